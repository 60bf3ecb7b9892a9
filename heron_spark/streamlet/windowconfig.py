"""Window settings of windowed streamlet operations (heronpy's ``WindowConfig``).

``WindowConfig(duration, slide)`` windows are processing-time windows (each element's arrival
at the window's task, seconds). heron_spark adds event-time windows, over the timestamps
``Streamlet.assign_timestamps`` gives the elements (int milliseconds since the epoch):
``WindowConfig.event_time_tumbling(size_ms)``, ``event_time_sliding(size_ms, slide_ms)`` and
``event_time_session(gap_ms)``, each with ``allowed_lateness_ms``.
"""

from __future__ import annotations

import datetime

from heron_spark.errors import TopologyTypeError, TopologyValueError


def _as_timedelta(value, what: str) -> datetime.timedelta:
    if isinstance(value, datetime.timedelta):
        delta = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        delta = datetime.timedelta(seconds=value)
    else:
        msg = f"the {what} must be a datetime.timedelta or seconds"
        raise TopologyTypeError(msg, value=value, fix=f"pass datetime.timedelta(seconds=...) as {what}")
    if delta.total_seconds() <= 0:
        msg = f"the {what} must be positive"
        raise TopologyValueError(msg, value=value, kind="config", fix=f"pass a {what} above zero")
    return delta


class WindowConfig:
    """A time window: ``window_duration`` long, one every ``slide_interval``.

    Durations are ``datetime.timedelta`` or seconds; unlike Heron (whole seconds only),
    fractions of a second are accepted.
    """

    def __init__(self, window_duration, slide_interval) -> None:
        self._window_duration = _as_timedelta(window_duration, "window duration")
        self._slide_interval = _as_timedelta(slide_interval, "slide interval")
        if self._slide_interval > self._window_duration:
            msg = "the slide interval is longer than the window duration"
            raise TopologyValueError(msg,
                                     value=slide_interval, kind="config",
                                     fix="pass a slide interval <= the window duration")

    @staticmethod
    def create_tumbling_window(window_duration) -> "WindowConfig":
        """Return back-to-back windows of ``window_duration``: each element is in one."""
        return WindowConfig(window_duration, window_duration)

    @staticmethod
    def create_sliding_window(window_duration, slide_interval) -> "WindowConfig":
        """Return windows of ``window_duration``, one every ``slide_interval``."""
        return WindowConfig(window_duration, slide_interval)

    # heron_spark's names
    tumbling = create_tumbling_window
    sliding = create_sliding_window

    @property
    def duration_secs(self) -> float:
        """The window duration in seconds."""
        return self._window_duration.total_seconds()

    @property
    def slide_secs(self) -> float:
        """The slide interval in seconds."""
        return self._slide_interval.total_seconds()

    @property
    def is_tumbling(self) -> bool:
        """True when windows are back to back (slide == duration)."""
        return self._slide_interval == self._window_duration

    @property
    def is_event_time(self) -> bool:
        """True for windows over the elements' event times (``event_time_*`` constructors)."""
        return False

    # heron_spark: event-time windows
    @staticmethod
    def event_time_tumbling(size_ms, allowed_lateness_ms=0) -> "EventTimeWindowConfig":
        """Return back-to-back event-time windows ``size_ms`` long, aligned to the epoch.

        An element with event time ts is in ``[ts - ts % size_ms, that + size_ms)``. A
        window fires once the watermark passes its end; an element arriving later, but within
        ``allowed_lateness_ms`` of the end, fires the window again with the new result.
        """
        size = _as_ms(size_ms, "window size", "event_time_tumbling")
        return EventTimeWindowConfig(TUMBLING, size, size, 0,
                                     _lateness(allowed_lateness_ms, "event_time_tumbling"))

    @staticmethod
    def event_time_sliding(size_ms, slide_ms, allowed_lateness_ms=0) -> "EventTimeWindowConfig":
        """Return event-time windows ``size_ms`` long, one starting every ``slide_ms``.

        Window starts are multiples of ``slide_ms`` from the epoch; an element is in every
        window ``[k * slide_ms, k * slide_ms + size_ms)`` holding its event time.
        """
        size = _as_ms(size_ms, "window size", "event_time_sliding")
        slide = _as_ms(slide_ms, "slide", "event_time_sliding")
        if slide > size:
            msg = "event_time_sliding(): the slide is longer than the window size"
            raise TopologyValueError(msg, value=slide_ms, kind="config",
                                     fix=f"pass a slide <= the size ({size} ms), or "
                                         "event_time_tumbling for back-to-back windows")
        return EventTimeWindowConfig(SLIDING, size, slide, 0,
                                     _lateness(allowed_lateness_ms, "event_time_sliding"))

    @staticmethod
    def event_time_session(gap_ms, allowed_lateness_ms=0) -> "EventTimeWindowConfig":
        """Return event-time session windows: runs of elements less than ``gap_ms`` apart.

        Per key (the whole stream for ``reduce_by_window``), a session is ``[first event
        time, last event time + gap_ms)``; sessions an element bridges merge into one.
        """
        gap = _as_ms(gap_ms, "session gap", "event_time_session")
        return EventTimeWindowConfig(SESSION, 0, 0, gap,
                                     _lateness(allowed_lateness_ms, "event_time_session"))

    def __repr__(self) -> str:
        return f"WindowConfig(duration={self.duration_secs}s, slide={self.slide_secs}s)"


TUMBLING, SLIDING, SESSION = "tumbling", "sliding", "session"


def _as_ms(value, what: str, operation: str) -> int:
    """Return ``value`` (int milliseconds or a ``timedelta``) as int ms > 0."""
    if isinstance(value, datetime.timedelta):
        ms = value // datetime.timedelta(milliseconds=1)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        msg = f"{operation}(): the {what} must be whole milliseconds (int) or a datetime.timedelta"
        raise TopologyTypeError(msg, value=value,
                                fix=f"pass the {what} as an int of milliseconds, e.g. 5000")
    if ms <= 0:
        msg = f"{operation}(): the {what} must be positive"
        raise TopologyValueError(msg, value=value, kind="config",
                                 fix=f"pass a {what} of 1 ms or more")
    return ms


def _lateness(value, operation: str) -> int:
    """Return the allowed lateness (int ms or a ``timedelta``) as int ms >= 0."""
    if isinstance(value, datetime.timedelta):
        ms = value // datetime.timedelta(milliseconds=1)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        msg = f"{operation}(): the allowed lateness must be whole milliseconds (int) or a timedelta"
        raise TopologyTypeError(msg, value=value, fix="pass allowed_lateness_ms=0 or more")
    if ms < 0:
        msg = f"{operation}(): the allowed lateness is negative"
        raise TopologyValueError(msg, value=value, kind="config",
                                 fix="pass allowed_lateness_ms=0 (late elements dropped) or more")
    return ms


class EventTimeWindowConfig(WindowConfig):
    """An event-time window: tumbling, sliding or session, with its allowed lateness.

    Made by ``WindowConfig.event_time_tumbling`` / ``event_time_sliding`` /
    ``event_time_session``; every length is int milliseconds.
    """

    def __init__(self, kind: str, size_ms: int, slide_ms: int, gap_ms: int,
                 allowed_lateness_ms: int) -> None:
        self.kind = kind
        self.size_ms = size_ms
        self.slide_ms = slide_ms
        self.gap_ms = gap_ms
        self.allowed_lateness_ms = allowed_lateness_ms
        length = datetime.timedelta(milliseconds=size_ms or gap_ms)
        self._window_duration = length
        self._slide_interval = datetime.timedelta(milliseconds=slide_ms) if slide_ms else length

    @property
    def is_event_time(self) -> bool:
        """True: windows over event times."""
        return True

    @property
    def is_tumbling(self) -> bool:
        """True for tumbling event-time windows."""
        return self.kind == TUMBLING

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EventTimeWindowConfig) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple:
        return (self.kind, self.size_ms, self.slide_ms, self.gap_ms, self.allowed_lateness_ms)

    def __repr__(self) -> str:
        lengths = (f"gap={self.gap_ms}ms" if self.kind == SESSION else
                   f"size={self.size_ms}ms" + (f", slide={self.slide_ms}ms"
                                               if self.kind == SLIDING else ""))
        return (f"WindowConfig.event_time_{self.kind}({lengths}, "
                f"allowed_lateness={self.allowed_lateness_ms}ms)")


__all__ = ["EventTimeWindowConfig", "WindowConfig"]
