"""Window settings of windowed streamlet operations (heronpy's ``WindowConfig``)."""

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

    def __repr__(self) -> str:
        return f"WindowConfig(duration={self.duration_secs}s, slide={self.slide_secs}s)"
