"""Event-time mode of the window bolts: its config keys, their checks, and the per-task part.

``heron_spark.api.window`` documents the behaviour; this module reads and checks the settings
(on the driver in ``spec()``, again in the task's ``initialize``) and holds what one task needs
besides the windows themselves (``event_windows.EventWindows``): where a tuple's event time
comes from, and what happens to late and untimed tuples. Runs on the task's thread only.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from heron_spark.api import api_constants as keys
from heron_spark.api.event_time import timestamp_ms
from heron_spark.api.event_windows import SESSION, SLIDING, TUMBLING, EventWindows
from heron_spark.api.component import HeronComponentSpec
from heron_spark.api.stream import Stream
from heron_spark import config
from heron_spark.errors import TopologyValueError

EVENT_TIME = config.WINDOW_EVENT_TIME
"""True: windows over each tuple's event time (``HeronTuple.timestamp``, ms)."""
TIMESTAMP_FIELD = keys.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME
"""Heron Java's key: the input field holding each tuple's event time (int ms)."""
ALLOWED_LATENESS_MS = keys.HERON_WINDOW_ALLOWED_LATENESS_MS
"""How long (ms of event time) a window is kept after it fired, for late tuples (default 0)."""
LATE_TUPLE_STREAM = keys.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM
"""Heron Java's key: the stream late tuples are emitted on (one field, ``late_tuple``)."""
WINDOW_LENGTH_MS = "topology.bolts.window.length.duration.ms"
"""Heron Java's key: the window length in ms (instead of the heronpy ``..._secs`` key)."""
SLIDING_INTERVAL_MS = "topology.bolts.window.sliding.interval.duration.ms"
"""Heron Java's key: the sliding interval in ms (instead of the heronpy ``..._secs`` key)."""
MAX_LAG_MS = keys.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS
"""The spouts' out-of-orderness bound (ms); checked here when a window bolt's config has it."""
SESSION_GAP_SECS = "sessionwindowbolt_gap_secs"
SESSION_GAP_MS = "sessionwindowbolt_gap_ms"
LATE_TUPLE_FIELD = "late_tuple"
"""The one field of the late stream: the late tuple's values (a tuple)."""

_LOGGED_WINDOWS = 256  # late tuples are logged once per window, for this many recent windows


def event_time_on(config: dict, component: str | None) -> bool:
    """Return True when ``config`` turns event-time windows on (checking the two keys).

    ``heron.window.event.time: False`` wins over a timestamp field (a window bolt's ``spec``
    pins the flag from its own config, so a topology-wide timestamp field meant for the
    spouts does not turn its windows to event time).
    """
    field = config.get(TIMESTAMP_FIELD)
    if field is not None and (not isinstance(field, str) or not field):
        msg = f"{TIMESTAMP_FIELD!r} must name an input field (a non-empty str)"
        raise TopologyValueError(msg, component=component, value=field, kind="config",
                                 fix=f"set {TIMESTAMP_FIELD!r} to the field holding the event "
                                     "time in ms, or leave it out")
    flag = config.get(EVENT_TIME)
    if flag is not None and not isinstance(flag, bool) and str(flag).lower() not in (
            "true", "false"):
        msg = f"{EVENT_TIME!r} must be True or False"
        raise TopologyValueError(msg, component=component, value=flag, kind="config",
                                 fix=f"set {EVENT_TIME!r} to True or False")
    if flag is not None and str(flag).lower() == "false":
        return False
    return bool(field) or str(flag).lower() == "true"


def _ms(value: Any, key: str, component: str | None, *, zero: bool = False) -> int:
    """Return ``value`` as whole ms; refuse non-numbers, negatives, and 0 unless ``zero``."""
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if number is None or not math.isfinite(number) or number < 0 or (number == 0 and not zero) \
            or number != int(number):
        least = ">= 0" if zero else "> 0"
        msg = f"{key!r} must be a whole number of milliseconds {least}"
        raise TopologyValueError(msg, component=component, value=value, kind="config",
                                 fix=f"set {key!r} to an int {least}")
    return int(number)


def _secs_as_ms(value: Any, key: str, component: str | None) -> int:
    """Return seconds ``value`` as ms (at least 1); refuse non-numbers and values <= 0."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if isinstance(value, bool) or not math.isfinite(seconds) or round(seconds * 1000) <= 0:
        msg = f"{key!r} must be a number of seconds of at least 0.001"
        raise TopologyValueError(msg, component=component, value=value, kind="config",
                                 fix=f"set {key!r} to seconds > 0")
    return round(seconds * 1000)


def _one_of(config: dict, secs_key: str | None, ms_key: str, component: str | None) -> int | None:
    """Return the duration (ms) ``config`` gives by ``secs_key`` or ``ms_key``, None if neither."""
    given = [key for key in (secs_key, ms_key) if key is not None and key in config]
    if len(given) == 2:
        msg = f"the window bolt has both {secs_key!r} and {ms_key!r}"
        raise TopologyValueError(msg, component=component, value=config[ms_key], kind="config",
                                 fix=f"keep one of {secs_key!r} (seconds) and {ms_key!r} (ms)")
    if not given:
        return None
    key = given[0]
    return _ms(config[key], key, component) if key == ms_key else \
        _secs_as_ms(config[key], key, component)


@dataclass(frozen=True)
class EventTimeSettings:
    """One window bolt's event-time settings (ms)."""

    kind: str                   # event_windows.TUMBLING, SLIDING or SESSION
    size_ms: int                # window length, or the session gap
    slide_ms: int
    lateness_ms: int
    timestamp_field: str | None  # None: HeronTuple.timestamp
    late_stream: str | None

    def windows(self) -> EventWindows:
        """Return empty windows with these settings."""
        return EventWindows(self.kind, self.size_ms, self.slide_ms if self.kind == SLIDING
                            else None, self.lateness_ms)


def event_time_settings(kind: str, config: dict, component: str | None, *,
                        size_secs_key: str | None, slide_secs_key: str | None,
                        require: bool) -> EventTimeSettings | None:
    """Return the event-time settings in ``config``, None when its window length is missing.

    Raise ``TopologyValueError`` for an unusable value; with ``require``, also when the
    window length (session gap) is missing.
    """
    if kind == SESSION:
        size = _one_of(config, SESSION_GAP_SECS, SESSION_GAP_MS, component)
        missing = f"a session window bolt needs its gap {SESSION_GAP_SECS!r} or {SESSION_GAP_MS!r}"
    else:
        size = _one_of(config, size_secs_key, WINDOW_LENGTH_MS, component)
        missing = (f"an event-time window bolt needs its window length {size_secs_key!r} "
                   f"or {WINDOW_LENGTH_MS!r}")
    slide = size
    if kind == SLIDING:
        slide = _one_of(config, slide_secs_key, SLIDING_INTERVAL_MS, component) or size
    elif SLIDING_INTERVAL_MS in config:
        msg = f"a {kind} window has no sliding interval {SLIDING_INTERVAL_MS!r}"
        raise TopologyValueError(msg, component=component, value=config[SLIDING_INTERVAL_MS],
                                 kind="config", fix="use SlidingWindowBolt for sliding windows, "
                                                    f"or drop {SLIDING_INTERVAL_MS!r}")
    lateness = _ms(config.get(ALLOWED_LATENESS_MS, 0), ALLOWED_LATENESS_MS, component,
                   zero=True)
    if MAX_LAG_MS in config:
        _ms(config[MAX_LAG_MS], MAX_LAG_MS, component, zero=True)
    late = config.get(LATE_TUPLE_STREAM)
    if late is not None and (not isinstance(late, str) or not late or late == "__tick"):
        msg = f"{LATE_TUPLE_STREAM!r} must name a stream (a non-empty str, not '__tick')"
        raise TopologyValueError(msg, component=component, value=late, kind="config",
                                 fix=f"set {LATE_TUPLE_STREAM!r} to a stream name such as "
                                     "'late'")
    if size is None:
        if require:
            raise TopologyValueError(missing, component=component, kind="config",
                                     fix="pass the window length in the bolt's config")
        return None
    if slide is not None and size is not None and slide > size:
        msg = "the window is shorter than its slide: tuples between windows would be lost"
        raise TopologyValueError(msg, component=component, value=slide, kind="config",
                                 fix=f"slide by at most the window length ({size} ms)")
    field = config.get(TIMESTAMP_FIELD) or None
    return EventTimeSettings(kind, size, slide if slide is not None else size, lateness, field,
                             late)


def check_timestamp_field(field: str, inputs: Any, component: str | None) -> None:
    """Refuse ``field`` when an input given by its spec declares its stream without it.

    Only inputs given as specs (their default stream) are checked here; the others are
    checked where the tuples arrive (a stream without the field: its tuples have no event
    time).
    """
    specs = list(inputs) if isinstance(inputs, (dict, list, tuple)) else []
    for spec in specs:
        if not isinstance(spec, HeronComponentSpec) or not isinstance(spec.outputs, list):
            continue
        fields = [out for out in spec.outputs if isinstance(out, str)]
        for out in spec.outputs:
            if isinstance(out, Stream) and out.stream_id == Stream.DEFAULT_STREAM_ID:
                fields = list(out.fields)
        if fields and field not in fields:
            msg = (f"{TIMESTAMP_FIELD!r} names {field!r}, which the input "
                   f"{spec.name}/{Stream.DEFAULT_STREAM_ID} does not declare")
            raise TopologyValueError(msg, component=component, value=field, kind="config",
                                     fix=f"name one of its fields {fields}")


def with_late_stream(outputs: list, late_stream: str, component: str | None) -> list:
    """Return ``outputs`` (spec outputs) with the late stream declared, if they lack it.

    Accept a declaration of the same shape (one field, ``late_tuple``, not direct); refuse a
    stream of that name with another shape.
    """
    if late_stream == Stream.DEFAULT_STREAM_ID:
        fields = [out for out in outputs if isinstance(out, str)]
        declared = [Stream(fields)] if fields else []
    else:
        declared = []
    declared += [out for out in outputs
                 if isinstance(out, Stream) and out.stream_id == late_stream]
    for stream in declared:
        if list(stream.fields) != [LATE_TUPLE_FIELD] or stream.direct:
            msg = (f"the late tuple stream {late_stream!r} ({LATE_TUPLE_STREAM}) is also "
                   f"declared with another shape: {stream!r}")
            raise TopologyValueError(msg, component=component, value=late_stream,
                                     kind="outputs",
                                     fix=f"name another stream in {LATE_TUPLE_STREAM!r}, or "
                                         f"declare it as Stream([{LATE_TUPLE_FIELD!r}], "
                                         f"name={late_stream!r})")
    if declared:
        return outputs
    return [*outputs, Stream([LATE_TUPLE_FIELD], name=late_stream)]


class EventTimeTask:
    """The event-time part of one window bolt task: timestamps, late and untimed tuples.

    ``bolt`` is the window bolt (for ``emit``, ``ack``, ``fail``, ``log``); ``context`` its
    topology context. Task thread only.
    """

    def __init__(self, settings: EventTimeSettings, bolt: Any, context: Any,
                 at_least_once: bool) -> None:
        self.settings = settings
        self.windows = settings.windows()
        self._bolt = bolt
        self._context = context
        self._at_least_once = at_least_once
        self._field_index: dict[tuple, int | None] = {}
        self._logged: OrderedDict = OrderedDict()
        self.late_tuples = 0  # this task's count (also in the __late-tuples metric)

    def timestamp_of(self, tup: Any) -> int | None:
        """Return ``tup``'s event time in ms, None when it has no usable one."""
        field = self.settings.timestamp_field
        if field is None:
            value = getattr(tup, "timestamp", None)
        else:
            index = self._index(tup, field)
            values = tup.values
            value = values[index] if index is not None and index < len(values) else None
        return timestamp_ms(value)

    def _index(self, tup: Any, field: str) -> int | None:
        source = (tup.component, tup.stream)
        if source not in self._field_index:
            fields = None
            if self._context is not None:
                fields = self._context.get_component_output_fields(tup.component, tup.stream)
            index = list(fields).index(field) if fields and field in fields else None
            self._field_index[source] = index
            if index is None:
                self._bolt.log(f"input {tup.component}/{tup.stream} has no field {field!r} "
                               f"({TIMESTAMP_FIELD}): its tuples have no event time",
                               "warn")
        return self._field_index[source]

    def refuse_untimed(self, tup: Any) -> None:
        """Handle ``tup`` without a usable event time: count it, then late stream or fail.

        With a late stream it goes there (and is acked); without one it fails under
        at-least-once (so it is not lost silently) and is dropped otherwise, counted and
        logged once per input stream.
        """
        self._count()
        where = (tup.component, tup.stream, None)
        if where not in self._logged:
            self._remember(where)
            self._bolt.log(f"tuples from {tup.component}/{tup.stream} without a usable event "
                           f"time reach this event-time window bolt (e.g. {tup.values!r}); "
                           + self._fate(), "warn")
        if self.settings.late_stream is not None:
            self._to_late_stream(tup, None)
        elif self._at_least_once:
            self._bolt.fail(tup)

    def refuse_late(self, tup: Any, ts: int) -> None:
        """Handle ``tup`` too late for its windows: count it, log it once per window, pass it on.

        It goes to the late stream when one is set; it is acked either way.
        """
        self._count()
        if self.settings.kind == SESSION:
            bounds = (ts, ts + self.settings.size_ms)
        else:
            bounds = self.windows.bounds_of(ts)[-1]
        if bounds not in self._logged:
            self._remember(bounds)
            self._bolt.log(f"late tuple (event time {ts} ms) for the window [{bounds[0]}, {bounds[1]}) "
                           f"purged at watermark {self.windows.watermark}; " + self._fate(),
                           "warn")
        if self.settings.late_stream is not None:
            self._to_late_stream(tup, ts)
        else:
            self._bolt.ack(tup)

    def _fate(self) -> str:
        stream = self.settings.late_stream
        if stream is not None:
            return f"sent to the late stream {stream!r}"
        return f"counted in __late-tuples (set {LATE_TUPLE_STREAM!r} to receive them)"

    def _to_late_stream(self, tup: Any, ts: int | None) -> None:
        stream = self.settings.late_stream
        self._bolt.emit([tuple(tup.values)], stream=stream, anchors=[tup], timestamp=ts)
        self._bolt.ack(tup)

    def _count(self) -> None:
        self.late_tuples += 1
        if self._context is not None:
            self._context.record_late_tuples(1)

    def _remember(self, key: tuple) -> None:
        self._logged[key] = True
        while len(self._logged) > _LOGGED_WINDOWS:
            self._logged.popitem(last=False)


__all__ = ["ALLOWED_LATENESS_MS", "EVENT_TIME", "LATE_TUPLE_FIELD", "LATE_TUPLE_STREAM",
           "MAX_LAG_MS", "SESSION", "SESSION_GAP_MS", "SESSION_GAP_SECS", "SLIDING",
           "SLIDING_INTERVAL_MS", "TIMESTAMP_FIELD", "TUMBLING", "WINDOW_LENGTH_MS",
           "EventTimeSettings", "EventTimeTask", "event_time_on", "event_time_settings",
           "with_late_stream"]
