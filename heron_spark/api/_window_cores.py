"""The processing-time cores of the window bolts, and the settings every window bolt reads.

``TimeWindows`` (arrival-time windows of one task) and ``CountWindows`` (count windows), both
without a bolt; the checks of window lengths, slides and counts; the refusal of windows that
hold tuples past the message timeout. ``window.py`` builds the bolts on them (see its
docstring for the boundaries); event-time windows are ``event_windows.py``.
"""

from __future__ import annotations

import time
from collections import deque, namedtuple
from typing import Any, Iterator

from heron_spark.api import api_constants as keys
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.errors import TopologyValueError

WindowContext = namedtuple("WindowContext", ("start", "end"))
"""The bounds of a window: seconds since the epoch (``start`` to ``end``) for processing-time
windows, int ms since the epoch (``[start, end)``) for event-time windows."""


def _time_of(tup) -> float:
    """Return when ``tup`` arrived at this task (its ``creation_time``), else now."""
    stamp = getattr(tup, "creation_time", None)
    return stamp if isinstance(stamp, float) else time.time()


class TimeWindows:
    """The windowing of one task, without a bolt: tuples in with their arrival time, windows out.

    Times are seconds (any clock, as long as it is one clock). Not thread-safe.
    """

    def __init__(self, duration: float, slide: float, start: float) -> None:
        self.duration = duration
        self.slide = slide
        self.last_end = start
        self.tuples: deque = deque()  # (tuple, arrival), in arrival order

    def add(self, tup: Any, now: float) -> None:
        """Keep ``tup``, arrived at ``now``."""
        self.tuples.append((tup, now))

    def expire(self, now: float) -> list:
        """Drop and return the tuples no window will hold any more.

        Drop and return the tuples that arrived before ``now - duration`` and after them a
        window ended (a tuple is dropped only once a window held it).
        """
        out = []
        horizon = min(now - self.duration, self.last_end)
        tuples = self.tuples
        while tuples and tuples[0][1] < horizon:
            out.append(tuples.popleft()[0])
        return out

    def slide_to(self, now: float) -> tuple[WindowContext, list, list]:
        """Return the sliding window ending at ``now``, its tuples and the expired ones.

        Return the sliding window ending at ``now``, its tuples, and the tuples that left the
        window since the last call (to ack). The window is ``[now - duration, now]``, or starts
        at the previous window's end when that is earlier (a tick later than ``duration -
        slide``), so no tuple falls between two windows.
        """
        start = min(now - self.duration, self.last_end)
        expired = self.expire(now)
        self.last_end = now
        return WindowContext(start, now), [t for t, _ in self.tuples], expired

    def tumble_to(self, now: float) -> tuple[WindowContext, list]:
        """Return the tumbling window ``(last end, now]`` and its tuples, which it drops."""
        window = WindowContext(self.last_end, now)
        tuples = [t for t, _ in self.tuples]
        self.tuples.clear()
        self.last_end = now
        return window, tuples

    def drain_sliding(self) -> Iterator[tuple[WindowContext, list, list]]:
        """Yield the remaining sliding windows until every tuple has left.

        Yield the sliding windows at the next tick times (``last end + k * slide``) until every
        tuple has left; the last one yielded has no tuples, only expired ones.
        """
        while self.tuples:
            window, tuples, expired = self.slide_to(self.last_end + self.slide)
            yield window, tuples, expired


class CountWindows:
    """Count windowing of one task, without a bolt.

    Every ``slide`` tuples added, a window of the last ``size`` (``slide == size``: tumbling).
    Not thread-safe.
    """

    def __init__(self, size: int, slide: int) -> None:
        self.size = size
        self.slide = slide
        self.tuples: deque = deque()  # (tuple, arrival), in arrival order
        self.pending = 0              # tuples added since the last window fired

    def add(self, tup: Any, now: float) -> tuple[WindowContext, list, list] | None:
        """Keep ``tup``; return the window it completes, if any.

        Keep ``tup``; when it completes a window, return the window, its tuples and the tuples
        no later window will hold (to ack once the window was processed).
        """
        self.tuples.append((tup, now))
        self.pending += 1
        if self.pending < self.slide:
            return None
        return self._fire()

    def flush(self) -> tuple[WindowContext | None, list, list] | None:
        """Return the last window at the end of input.

        The last window, if tuples arrived since the previous one; every tuple left is released
        with it.
        """
        if not self.pending:
            released = [t for t, _ in self.tuples]
            self.tuples.clear()
            return None if not released else (None, [], released)
        window, tuples, released = self._fire()
        released += [t for t, _ in self.tuples]
        self.tuples.clear()
        return window, tuples, released

    def _fire(self) -> tuple[WindowContext, list, list]:
        self.pending = 0
        held = list(self.tuples)[-self.size:]
        window = WindowContext(held[0][1], held[-1][1])
        keep = max(self.size - self.slide, 0)  # the next window holds the last size - slide
        released = []
        while len(self.tuples) > keep:
            released.append(self.tuples.popleft()[0])
        return window, [t for t, _ in held], released


def count_settings(config: dict, count_key: str, slide_key: str | None,
                   component: str | None) -> tuple[int, int]:
    """Return (size, slide) in tuples from ``config``.

    Return (size, slide) in tuples; raise ``TopologyValueError`` when they are not positive
    integers or the slide is larger than the size.
    """
    return _size_and_slide(config, count_key, slide_key, component, _count,
                           "the slide count is larger than the window count")


def _size_and_slide(config: dict, size_key: str, slide_key: str | None,
                    component: str | None, parse, too_large: str) -> tuple:
    """Return (size, slide) read with ``parse``.

    The slide defaults to the size and may not exceed it (``too_large`` says so).
    """
    size = parse(config[size_key], size_key, component)
    slide = size
    if slide_key is not None and config.get(slide_key) is not None:
        slide = parse(config[slide_key], slide_key, component)
        if slide > size:
            raise TopologyValueError(too_large, component=component, value=slide,
                                     kind="config",
                                     fix=f"set {slide_key!r} <= {size_key!r} ({size})")
    return size, slide


def _count(value: Any, key: str, component: str | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        msg = f"{key!r} must be a positive whole number of tuples"
        raise TopologyValueError(msg,
                                 component=component, value=value, kind="config",
                                 fix=f"set {key!r} to an int > 0")
    return value


def window_settings(config: dict, duration_key: str, slide_key: str | None,
                    component: str | None) -> tuple[float, float]:
    """Return (duration, slide) in seconds from ``config``.

    Return (duration, slide) in seconds from ``config``; raise ``TopologyValueError`` when they
    are missing, not positive, or the slide is longer than the duration.
    """
    if duration_key not in config:
        msg = f"a window bolt needs its window duration {duration_key!r}"
        raise TopologyValueError(msg,
                                 component=component, kind="config",
                                 fix=f"pass config={{{duration_key!r}: seconds}} to add_bolt")
    return _size_and_slide(config, duration_key, slide_key, component, _seconds,
                           "the slide interval is longer than the window duration")


def _seconds(value: Any, key: str, component: str | None) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if isinstance(value, bool) or not seconds > 0:
        msg = f"{key!r} must be a positive number of seconds"
        raise TopologyValueError(msg,
                                 component=component, value=value, kind="config",
                                 fix=f"set {key!r} to seconds > 0")
    return seconds


def _check_timeout(config: dict, held_secs: float, component: str | None) -> None:
    """Refuse windows that hold tuples longer than their trees may stay open."""
    settings = TopologyConfig.from_config(config, component)
    timeout = settings.message_timeout_or_none_secs
    if not settings.at_least_once or timeout is None:
        return
    if held_secs >= timeout:
        msg = (
            f"the window holds tuples up to {held_secs:g} s (duration + slide), not less than "
            f"{keys.TOPOLOGY_MESSAGE_TIMEOUT_SECS} ({timeout:g} s): they would time out"
        )
        raise TopologyValueError(
            msg,
            component=component, value=held_secs, kind="config",
            fix=f"raise {keys.TOPOLOGY_MESSAGE_TIMEOUT_SECS} above {held_secs:g} or shorten "
                "the window")
