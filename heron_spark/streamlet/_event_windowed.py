"""The bolts of the event-time windowed streamlet operations.

For ``reduce_by_window``, ``reduce_by_key_and_window`` and the joins given an event-time
``WindowConfig`` (``WindowConfig.event_time_tumbling`` / ``_sliding`` / ``_session``), built
on the I/O-free windows of ``heron_spark.api.event_windows``:

- each input element goes into its windows by its event time (``HeronTuple.timestamp``, ms),
  keyed by the element's key (``reduce_by_window``: one key, the whole stream);
- ``process_watermark(W)`` fires every window with ``end <= W``, in end order, and emits its
  result as ``(Window(start_ms, end_ms), value)`` / ``(KeyedWindow(key, Window), value)``
  with the event time ``end - 1`` (so windowed results can be windowed again downstream);
- an element later than the watermark whose window is still kept (``end + allowed lateness``
  not reached) updates that window, which fires again at once with its full new result; an
  element with no window kept any more is dropped and counted in the task's
  ``__late-tuples`` metric;
- at-least-once: results are anchored to the window's elements not acked yet; an element is
  acked once the last window holding it fired (or when it is dropped as late).

A window's contents live in the task's memory (not checkpointed). These classes run in the
operator's tasks only.
"""

from __future__ import annotations

import functools
from typing import Any, Hashable

from heron_spark.api.bolt import Bolt
from heron_spark.api.event_windows import EventWindows, FiredWindow
from heron_spark.errors import TopologyTypeError
from heron_spark.streamlet._components import FUNCTION, OUTPUT, OUTPUTS
from heron_spark.streamlet._windowed import (INNER, JOIN_RIGHT, JOIN_TYPE, OUTER, OUTER_LEFT,
                                             OUTER_RIGHT, key_value)
from heron_spark.streamlet.window import KeyedWindow, Window

EVENT_WINDOW = "streamlet.event.window"  # (kind, size or gap ms, slide ms or None, lateness ms)


class _Held:
    """One element in the windows: its value, its input tuple, whether that was acked."""

    __slots__ = ("value", "tup", "acked", "right")

    def __init__(self, value: Any, tup: Any, right: bool = False) -> None:
        self.value = value
        self.tup = tup
        self.acked = False
        self.right = right  # joins: the element came from the right-hand streamlet


class EventTimeWindowBolt(Bolt):
    """What the event-time windowed operations share: windows in, results out, acks.

    Subclasses say how an element is keyed (``_hold``) and what a fired window emits
    (``_results``: (KeyedWindow or Window, value, anchors) triples).
    """

    outputs = OUTPUTS
    operation = ""

    def initialize(self, config: dict, context) -> None:
        """Set up this task's windows from the operation's ``WindowConfig``."""
        self._context = context
        self._component = context.get_component_id()
        self._function = config[FUNCTION]
        kind, length, slide, lateness = config[EVENT_WINDOW]
        self._windows = EventWindows(kind, length, slide, lateness_ms=lateness)

    def process(self, tup) -> None:
        """Put the element in its windows; re-fire a fired window it updates (late)."""
        timestamp = tup.timestamp
        if timestamp is None:
            msg = (f"{self.operation} windows by event time, and an element arrived without "
                   f"one")
            raise TopologyTypeError(msg, component=self._component, value=tup.values[0],
                                    fix="call assign_timestamps(...) on every source this "
                                        "operation reads from")
        key, held = self._hold(tup)
        if not self._windows.add(timestamp, held, key):
            self._context.record_late_tuples(1)
            self.ack(tup)
            return
        self._emit(self._windows.fire_updated())

    def process_watermark(self, watermark_ms: int) -> None:
        """Fire the windows the watermark completed (and purge those past their lateness)."""
        self._emit(self._windows.advance(watermark_ms))

    def _emit(self, fired: list[FiredWindow]) -> None:
        for window in fired:
            bounds = Window(window.start, window.end)
            for where, value, anchors in self._results(window, bounds):
                self.emit([(where, value)], stream=OUTPUT, timestamp=window.end - 1,
                          anchors=[held.tup for held in anchors if not held.acked])
            for held in window.released:
                held.acked = True
                self.ack(held.tup)

    def _hold(self, tup) -> tuple[Hashable, _Held]:
        """Return the window key of ``tup``'s element and what the windows keep of it."""
        raise NotImplementedError

    def _results(self, window: FiredWindow, bounds: Window) -> list[tuple[Any, Any, list]]:
        """Return what ``window`` emits: (Window or KeyedWindow, value, anchors) triples."""
        raise NotImplementedError


class EventTimeReduceByWindowBolt(EventTimeWindowBolt):
    """``reduce_by_window`` by event time: one ``(Window, reduction)`` per window."""

    operation = "reduce_by_window"

    def _hold(self, tup) -> tuple[Hashable, _Held]:
        return None, _Held(tup.values[0], tup)

    def _results(self, window: FiredWindow, bounds: Window) -> list[tuple[Any, Any, list]]:
        held = window.items
        return [(bounds, functools.reduce(self._function, (h.value for h in held)), held)]


class EventTimeReduceByKeyAndWindowBolt(EventTimeWindowBolt):
    """``reduce_by_key_and_window`` by event time: one ``(KeyedWindow, reduction)`` per key and window."""

    operation = "reduce_by_key_and_window"

    def _hold(self, tup) -> tuple[Hashable, _Held]:
        key, value = key_value(tup.values[0], self.operation, self._component)
        return key, _Held(value, tup)

    def _results(self, window: FiredWindow, bounds: Window) -> list[tuple[Any, Any, list]]:
        held = window.items
        value = functools.reduce(self._function, (h.value for h in held))
        return [(KeyedWindow(window.key, bounds), value, held)]


class EventTimeJoinBolt(EventTimeWindowBolt):
    """The joins by event time, per key and window (see ``_windowed._Join``)."""

    operation = "join"
    OUTER_LEFT, INNER, OUTER_RIGHT, OUTER = OUTER_LEFT, INNER, OUTER_RIGHT, OUTER

    def initialize(self, config: dict, context) -> None:
        """Set up the windows and read the join's kind and right-hand streamlet."""
        super().initialize(config, context)
        self._type = config[JOIN_TYPE]
        self._right = config[JOIN_RIGHT]

    def _hold(self, tup) -> tuple[Hashable, _Held]:
        key, value = key_value(tup.values[0], self.operation, self._component)
        return key, _Held(value, tup, right=tup.component == self._right)

    def _results(self, window: FiredWindow, bounds: Window) -> list[tuple[Any, Any, list]]:
        keyed = KeyedWindow(window.key, bounds)
        lefts = [h for h in window.items if not h.right]
        rights = [h for h in window.items if h.right]
        join, kind = self._function, self._type
        if lefts and rights:
            return [(keyed, join(left.value, right.value), [left, right])
                    for left in lefts for right in rights]
        if lefts and kind in (OUTER_LEFT, OUTER):
            return [(keyed, join(left.value, None), [left]) for left in lefts]
        if rights and kind in (OUTER_RIGHT, OUTER):
            return [(keyed, join(None, right.value), [right]) for right in rights]
        return []
