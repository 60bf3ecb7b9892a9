"""The window an output of a windowed operation belongs to (heronpy's ``Window`` and ``KeyedWindow``)."""

from __future__ import annotations

from typing import Any

from heron_spark.errors import TopologyTypeError


class Window:
    """A window's bounds, ``start_time`` to ``end_time``.

    Processing-time windows: seconds since the epoch (floats). Event-time windows
    (``WindowConfig.event_time_*``): int milliseconds since the epoch, ``[start, end)``.
    """

    __slots__ = ("_start_time", "_end_time")

    def __init__(self, start_time: float, end_time: float) -> None:
        self._start_time = start_time
        self._end_time = end_time

    @property
    def start_time(self) -> float:
        """Where the window starts (seconds; event-time windows: int ms, since the epoch)."""
        return self._start_time

    @property
    def end_time(self) -> float:
        """Where the window ends (seconds; event-time windows: int ms, since the epoch)."""
        return self._end_time

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Window) and (self._start_time, self._end_time) == \
            (other._start_time, other._end_time)

    def __hash__(self) -> int:
        return hash((self._start_time, self._end_time))

    def __reduce__(self):
        return Window, (self._start_time, self._end_time)

    def __repr__(self) -> str:
        return f"Window {{start_time: {self._start_time}, end_time: {self._end_time}}}"


class KeyedWindow:
    """A key and the window its value was computed over.

    What ``reduce_by_key_and_window`` and the joins emit as the first element of their
    ``(KeyedWindow, value)`` pairs.
    """

    __slots__ = ("_key", "_window")

    def __init__(self, key: Any, window: Window) -> None:
        if not isinstance(window, Window):
            msg = "the window of a KeyedWindow must be a Window"
            raise TopologyTypeError(msg, value=window, fix="pass Window(start, end)")
        self._key = key
        self._window = window

    @property
    def key(self) -> Any:
        """The key."""
        return self._key

    @property
    def window(self) -> Window:
        """The window."""
        return self._window

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyedWindow) and (self._key, self._window) == \
            (other._key, other._window)

    def __hash__(self) -> int:
        return hash((self._key, self._window))

    def __reduce__(self):
        return KeyedWindow, (self._key, self._window)

    def __repr__(self) -> str:
        return f"KeyedWindow {{key: {self._key}, window: {self._window}}}"
