"""Window bolts (heronpy's ``SlidingWindowBolt`` and ``TumblingWindowBolt``).

A window bolt keeps the tuples it received and calls ``processWindow(window_info, tuples)``
on every tick tuple: the bolt's ``initialize`` sets ``topology.tick.tuple.freq.secs`` to the
slide interval (sliding) or the window duration (tumbling), as Heron's do, so subclasses that
override ``initialize`` must call ``super().initialize(config, context)`` first.

Windows are time windows over each tuple's arrival time at this task (``HeronTuple
.creation_time``, seconds since the epoch) and the tick's time:

- **Sliding** (duration D, slide S <= D): the window of a tick at time T is ``[T - D, T]``
  and holds every tuple that arrived in it; consecutive windows overlap by D - S. (A tick
  late by more than D - S starts its window at the previous window's end instead, so every
  tuple is in at least one window.)
- **Tumbling** (duration D): the window of a tick at time T is ``(previous tick, T]``; every
  tuple is in exactly one window. ``window_info`` is ``WindowContext(previous tick, T)``.

Acking (at-least-once): a sliding window bolt acks a tuple when it leaves the window (it
arrived before T - D), a tumbling one acks the window's tuples after ``processWindow``
returns; emits in ``processWindow`` are unanchored unless ``anchors=`` is given. A tuple is
held up to D + S seconds, so that must stay below ``topology.message.timeout.secs``.

Bounded topologies (heron_spark): when every upstream task has ended, ``end_of_input`` fires
the windows the remaining tuples would still have been in (sliding: at the next tick times
until every tuple has left; tumbling: one last window) and acks them. Subclasses that
override ``end_of_input`` call ``super().end_of_input()``.

Durations may be fractional seconds (Heron truncates them to whole seconds).

Count windows (heron_spark; Heron has them in its Java API only): give the bolt a count
instead of a duration, ``TumblingWindowBolt.WINDOW_COUNT`` (a window every N tuples, holding
those N) or ``SlidingWindowBolt.WINDOW_COUNT`` and ``WINDOW_SLIDE_COUNT`` (every S tuples, a
window of the last N). There are no ticks: a window fires on the tuple that completes it.
``window_info`` spans the arrival times of its first and last tuple. Under at-least-once a
tuple is acked after the last window that holds it was processed; with a slow input that
may take longer than ``topology.message.timeout.secs`` (the tuple then fails and replays).
At the end of input, the window the next slide would have fired is fired with the tuples it has.

Event-time windows (heron_spark, issue 34; ``docs/guide/windows.md``): with the bolt's config
setting ``topology.bolts.tuple.timestamp.field.name`` (the input field holding each tuple's
event time, int ms) or ``heron.window.event.time: True`` (``HeronTuple.timestamp``), windows are
over event time, aligned to the epoch, and fire in ``process_watermark`` when the watermark
passes their end (``event_windows`` has the semantics); ``SessionWindowBolt`` is always so.
``window_info`` is then ``WindowContext(start, end)`` in ms, ``[start, end)``; emits made in
``processWindow`` carry the timestamp ``end - 1``. ``heron.window.allowed.lateness.ms`` keeps
a window that long after it fired: a late tuple for it updates it and it fires again at once
with all its tuples. A tuple later than that, or without a usable event time, is counted in
``__late-tuples``, logged, and emitted on ``topology.bolts.late.tuple.stream`` when that is set
(field ``late_tuple``: the tuple's values); a tuple without event time fails under
at-least-once when there is no late stream. Under at-least-once a tuple is acked once every
window holding it has fired (late and refused tuples at once). Under effectively once the
pending windows are saved at each checkpoint (the bolt is a ``StatefulComponent``) and
restored at the same parallelism.
"""

from __future__ import annotations

import time
from typing import Any

from heron_spark.api import _window_event_time as event_time
from heron_spark.api._window_cores import (CountWindows, TimeWindows, WindowContext, _check_timeout,
                                           _time_of, count_settings, window_settings)
from heron_spark.api import api_constants as keys
from heron_spark.api.bolt import Bolt
from heron_spark.api.event_time import WATERMARK_MAX
from heron_spark.api.event_windows import SESSION, SLIDING, TUMBLING, FiredWindow
from heron_spark.api.state import State, StatefulComponent
from heron_spark.api.stream import Stream
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.errors import TopologyValueError

_STATE_KEY = "__heron_spark.event_windows"


class _WindowBolt(Bolt, StatefulComponent):
    """What the window bolts share: settings, the tick frequency, validation, event time."""

    WINDOW_DURATION_SECS = ""
    WINDOW_SLIDEINTERVAL_SECS: str | None = None
    WINDOW_COUNT = ""
    WINDOW_SLIDE_COUNT: str | None = None
    EVENT_TIME = event_time.EVENT_TIME
    TIMESTAMP_FIELD = event_time.TIMESTAMP_FIELD
    ALLOWED_LATENESS_MS = event_time.ALLOWED_LATENESS_MS
    LATE_TUPLE_STREAM = event_time.LATE_TUPLE_STREAM
    WINDOW_LENGTH_MS = event_time.WINDOW_LENGTH_MS
    SLIDING_INTERVAL_MS = event_time.SLIDING_INTERVAL_MS
    LATE_TUPLE_FIELD = event_time.LATE_TUPLE_FIELD
    _EVENT_KIND = TUMBLING
    _ALWAYS_EVENT_TIME = False
    _windows: TimeWindows | None = None
    _counts: CountWindows | None = None
    _event: event_time.EventTimeTask | None = None
    _saved: State | None = None
    _emit_timestamp: int | None = None

    @classmethod
    def _keeps_state(cls, config: dict) -> bool:
        """Return whether the bolt saves state at checkpoints with ``config`` (event time)."""
        return cls._ALWAYS_EVENT_TIME or event_time.event_time_on(config, None)

    @classmethod
    def _event_settings(cls, config: dict, component: str | None,
                        require: bool) -> event_time.EventTimeSettings | None:
        """Return the event-time settings when ``config`` turns event time on, else None."""
        if not (cls._ALWAYS_EVENT_TIME or event_time.event_time_on(config, component)):
            return None
        if cls.WINDOW_COUNT and cls.WINDOW_COUNT in config:
            msg = "count windows cannot be event-time windows"
            raise TopologyValueError(msg, component=component, value=config[cls.WINDOW_COUNT],
                                     kind="config",
                                     fix=f"drop {cls.WINDOW_COUNT!r}, or drop "
                                         f"{event_time.TIMESTAMP_FIELD!r} / "
                                         f"{event_time.EVENT_TIME!r}")
        return event_time.event_time_settings(
            cls._EVENT_KIND, config, component, size_secs_key=cls.WINDOW_DURATION_SECS or None,
            slide_secs_key=cls.WINDOW_SLIDEINTERVAL_SECS, require=require)

    @classmethod
    def _settings(cls, config: dict, component: str | None) -> tuple | None:
        """Return (count windows?, size, slide) from ``config``.

        Return (count windows?, size, slide) from ``config``, None when it sets neither a count
        nor a duration; raise ``TopologyValueError`` for unusable settings.
        """
        if cls.WINDOW_COUNT in config and cls.WINDOW_DURATION_SECS in config:
            msg = "a window bolt takes a duration or a count, not both"
            raise TopologyValueError(msg,
                                     component=component, kind="config",
                                     fix=f"set {cls.WINDOW_DURATION_SECS!r} (time windows) or "
                                         f"{cls.WINDOW_COUNT!r} (count windows)")
        if cls.WINDOW_COUNT in config:
            return (True, *count_settings(config, cls.WINDOW_COUNT, cls.WINDOW_SLIDE_COUNT,
                                          component))
        if cls.WINDOW_DURATION_SECS in config:
            return (False, *window_settings(config, cls.WINDOW_DURATION_SECS,
                                            cls.WINDOW_SLIDEINTERVAL_SECS, component))
        return None

    @classmethod
    def spec(cls, name=None, par=1, inputs=None, config=None, optional_outputs=None):
        """Return this bolt's spec; checks ``processWindow`` and any window settings given."""
        if getattr(cls, "processWindow", None) is _WindowBolt.processWindow:
            msg = f"{cls.__name__} does not implement processWindow()"
            raise TopologyValueError(msg,
                                     component=name, kind="class",
                                     fix="define processWindow(self, window_info, tuples)")
        if isinstance(config, dict):
            if not cls._ALWAYS_EVENT_TIME:  # the bolt's own config decides, not the topology's
                config = {**config,
                          event_time.EVENT_TIME: event_time.event_time_on(config, name)}
            settings = cls._event_settings(config, name, require=False)
            if settings is None:
                cls._settings(config, name)
            elif settings.timestamp_field is not None:
                event_time.check_timestamp_field(settings.timestamp_field, inputs, name)
            late = config.get(event_time.LATE_TUPLE_STREAM)
            if late is not None and (settings is not None or cls._ALWAYS_EVENT_TIME):
                declared = [*(cls.outputs or []), *(optional_outputs or [])]
                added = event_time.with_late_stream(declared, late, name)
                if len(added) > len(declared):
                    optional_outputs = [*(optional_outputs or []), added[-1]]
        return super().spec(name=name, par=par, inputs=inputs, config=config,
                            optional_outputs=optional_outputs)

    def processWindow(self, window_info: WindowContext, tuples: list) -> None:  # noqa: N802
        """Handle one window: ``window_info`` its bounds, ``tuples`` its tuples in arrival order.

        Called on the task's thread every slide interval (sliding) or duration.
        """
        msg = f"{type(self).__name__} must implement processWindow()"
        raise NotImplementedError(msg)

    def initialize(self, config: dict, context) -> None:
        """Read the window settings and set the tick frequency; subclasses call this first.

        Event time: no ticks; the windows restored from the checkpoint, if any.
        """
        component = context.get_component_id() if context is not None else None
        event_settings = self._event_settings(config, component, require=True)
        if event_settings is not None:
            reliable = TopologyConfig.from_config(config, component).at_least_once
            self._event = event_time.EventTimeTask(event_settings, self, context, reliable)
            saved = self._saved.get(_STATE_KEY) if self._saved is not None else None
            if saved is not None:
                self._event.windows.restore(saved)
            self._windows = self._counts = None
            return
        settings = self._settings(config, component)
        if settings is None:  # raises: a window bolt needs its duration
            settings = (False, *window_settings(config, self.WINDOW_DURATION_SECS,
                                                self.WINDOW_SLIDEINTERVAL_SECS, component))
        counted, size, slide = settings
        if counted:  # count windows: no ticks
            self._counts = CountWindows(size, slide)
            self._windows = None
            return
        duration = size
        held = duration + slide if self.WINDOW_SLIDEINTERVAL_SECS else duration
        _check_timeout(config, held, component)
        self.window_duration = duration
        self.slide_interval = slide
        config[keys.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = slide
        self._windows = TimeWindows(duration, slide, time.time())

    # --- event time ---------------------------------------------------------------------------

    def init_state(self, stateful_state: State) -> None:
        """Keep the checkpointed state (effectively once): event-time windows live in it."""
        self._saved = stateful_state

    def pre_save(self, checkpoint_id) -> None:
        """Save the pending event-time windows (effectively once) into the state."""
        if self._event is not None and self._saved is not None:
            self._saved.put(_STATE_KEY, self._event.windows.snapshot())

    def emit(self, tup, stream: str = Stream.DEFAULT_STREAM_ID, anchors=None,
             direct_task: int | None = None, need_task_ids: bool = False,
             timestamp: int | None = None):
        """Emit as ``Bolt.emit``; inside an event-time ``processWindow`` at ``end - 1``."""
        if timestamp is None:
            timestamp = self._emit_timestamp
        return super().emit(tup, stream, anchors, direct_task, need_task_ids, timestamp)

    def process_watermark(self, watermark_ms: int) -> None:
        """Fire the event-time windows the watermark ``watermark_ms`` completes, in end order."""
        if self._event is not None:
            self._fire_event(self._event.windows.advance(watermark_ms))

    def _event_add(self, event: event_time.EventTimeTask, tup) -> None:
        """Put ``tup`` in its event-time windows; refire the fired ones it updates."""
        ts = getattr(tup, "timestamp", None)  # the usual: the tuple's own int event time
        if ts.__class__ is not int or event.settings.timestamp_field is not None:
            ts = event.timestamp_of(tup)
        windows = event.windows
        if ts is None:
            event.refuse_untimed(tup)
        elif not windows.add(ts, tup, self._window_key(tup)):
            event.refuse_late(tup, ts)
        elif windows.updated:
            self._fire_event(windows.fire_updated())

    def _window_key(self, tup) -> Any:
        return None

    def _fire_event(self, fired: list[FiredWindow]) -> None:
        for window in fired:
            self._emit_timestamp = window.end - 1
            try:
                self.processWindow(WindowContext(window.start, window.end), window.items)
            finally:
                self._emit_timestamp = None
            for tup in window.released:
                self.ack(tup)

    def _count_add(self, counts: CountWindows, tup) -> None:
        """Add ``tup`` to the count windows and fire the one it completes.

        Keep ``tup``; fire the window it completes, then ack the tuples no later window holds.
        """
        fired = counts.add(tup, _time_of(tup))
        if fired is not None:
            self._process_then_ack(*fired)

    def _count_flush(self, counts: CountWindows) -> None:
        fired = counts.flush()
        if fired is not None:
            self._process_then_ack(*fired)

    def _process_then_ack(self, window: WindowContext | None, tuples: list, released: list) -> None:
        if window is not None:
            self.processWindow(window, tuples)
        for tup in released:
            self.ack(tup)

    def _state(self) -> TimeWindows:
        windows = self._windows
        if windows is None:
            msg = f"{type(self).__name__}.initialize did not call the window bolt's initialize"
            raise TopologyValueError(
                msg, kind="class", fix="call super().initialize(config, context) in initialize")
        return windows


class SlidingWindowBolt(_WindowBolt):
    """Call ``processWindow`` every slide interval with the last window's tuples.

    Calls ``processWindow`` every slide interval with the tuples of the last window duration
    (see the module docstring for boundaries and acking).
    """

    WINDOW_DURATION_SECS = "slidingwindowbolt_duration_secs"
    WINDOW_SLIDEINTERVAL_SECS = "slidingwindowbolt_slideinterval_secs"
    WINDOW_COUNT = "slidingwindowbolt_count"
    WINDOW_SLIDE_COUNT = "slidingwindowbolt_slide_count"

    _EVENT_KIND = SLIDING

    def process(self, tup) -> None:
        """Keep ``tup`` in the window; ack the tuples that left it."""
        if self._event is not None:
            self._event_add(self._event, tup)
            return
        if self._counts is not None:
            self._count_add(self._counts, tup)
            return
        windows = self._state()
        now = _time_of(tup)
        windows.add(tup, now)
        for old in windows.expire(now):
            self.ack(old)

    def process_tick(self, tup) -> None:
        """Fire the window ending now, then ack the tuples that left it."""
        if self._counts is not None or self._event is not None:
            return  # count windows fire on tuples, not ticks
        window, tuples, expired = self._state().slide_to(_time_of(tup))
        for old in expired:
            self.ack(old)
        self.processWindow(window, tuples)

    def end_of_input(self) -> None:
        """Fire the windows the remaining tuples would still be in, acking them as they leave."""
        if self._event is not None:
            self.process_watermark(WATERMARK_MAX)
            return
        if self._counts is not None:
            self._count_flush(self._counts)
            return
        for window, tuples, expired in self._state().drain_sliding():
            for old in expired:
                self.ack(old)
            if tuples:
                self.processWindow(window, tuples)


class TumblingWindowBolt(_WindowBolt):
    """Call ``processWindow`` every window duration with the new tuples, then ack them.

    Calls ``processWindow`` every window duration with the tuples that arrived since the
    previous call, then acks them (see the module docstring).
    """

    WINDOW_DURATION_SECS = "tumblingwindowbolt_duration_secs"
    WINDOW_COUNT = "tumblingwindowbolt_count"

    def process(self, tup) -> None:
        """Keep ``tup`` for the current window."""
        if self._event is not None:
            self._event_add(self._event, tup)
            return
        if self._counts is not None:
            self._count_add(self._counts, tup)
            return
        windows = self._state()
        windows.add(tup, _time_of(tup))

    def process_tick(self, tup) -> None:
        """Fire the window ending now and ack its tuples."""
        if self._counts is not None or self._event is not None:
            return  # count windows fire on tuples, not ticks
        self._fire(_time_of(tup))

    def end_of_input(self) -> None:
        """Fire the last, partial window (if it holds tuples)."""
        if self._event is not None:
            self.process_watermark(WATERMARK_MAX)
            return
        if self._counts is not None:
            self._count_flush(self._counts)
            return
        if self._state().tuples:
            self._fire(time.time())

    def _fire(self, now: float) -> None:
        window, tuples = self._state().tumble_to(now)
        self.processWindow(window, tuples)
        for tup in tuples:
            self.ack(tup)


class SessionWindowBolt(_WindowBolt):
    """Call ``processWindow`` with each session: tuples less than a gap apart in event time.

    Always event time (``HeronTuple.timestamp``, or the field named by
    ``topology.bolts.tuple.timestamp.field.name``). A session is ``[first ts, last ts + gap)``
    in ms; it fires when the watermark passes its end. A late tuple that joins sessions
    merges them into one that fires again with all their tuples (see the module docstring).
    Sessions are per task unless ``session_key`` is overridden to keep them per key.
    """

    WINDOW_GAP_SECS = event_time.SESSION_GAP_SECS
    WINDOW_GAP_MS = event_time.SESSION_GAP_MS
    _EVENT_KIND = SESSION
    _ALWAYS_EVENT_TIME = True

    def session_key(self, tup) -> Any:
        """Return the key whose sessions ``tup`` belongs to (hashable; None: one per task).

        Override to keep sessions per key, e.g. ``return tup.values[0]`` for the user of a
        click, with a fields grouping on that field so each key's tuples reach one task.
        """
        return None

    def _window_key(self, tup) -> Any:
        return self.session_key(tup)

    def process(self, tup) -> None:
        """Put ``tup`` in its session."""
        if self._event is None:
            self._state()  # raises: initialize did not run the window bolt's
        else:
            self._event_add(self._event, tup)

    def end_of_input(self) -> None:
        """Fire the sessions left (the watermark at the end of input fired them already)."""
        self.process_watermark(WATERMARK_MAX)


__all__ = ["CountWindows", "SessionWindowBolt", "SlidingWindowBolt", "TimeWindows",
           "TumblingWindowBolt", "WindowContext"]
