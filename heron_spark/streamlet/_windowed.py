"""The window bolts and groupings of the windowed streamlet operations.

For ``reduce_by_window``, ``reduce_by_key_and_window`` and the joins, built on the window bolts
of ``heron_spark.api.window``.

A sliding ``WindowConfig`` compiles to a ``SlidingWindowBolt``, a tumbling one (slide ==
duration) to a ``TumblingWindowBolt``, so tumbling windows never overlap or leave gaps.
Elements of keyed operations are ``(key, value)`` pairs, routed by a stable hash of the key
(the same key reaches the same task from every upstream process). Outputs are anchored to
the inputs they were computed from; inputs are acked as they leave their windows.
"""

from __future__ import annotations

import functools
import zlib
from typing import Any

from heron_spark.api.custom_grouping import ICustomGrouping
from heron_spark.api.window import (SlidingWindowBolt, TumblingWindowBolt, WindowContext,
                                   _WindowBolt)
from heron_spark.errors import TopologyTypeError
from heron_spark.streamlet._components import FUNCTION, OUTPUT, OUTPUTS
from heron_spark.streamlet.window import KeyedWindow, Window

JOIN_TYPE = "streamlet.join.type"
JOIN_RIGHT = "streamlet.join.right"  # the right-hand streamlet's component name
OUTER_LEFT, INNER, OUTER_RIGHT, OUTER = 1, 2, 3, 4  # heronpy's JoinBolt constants


def stable_hash(key: Any) -> int:
    """Return a hash of ``key`` that is the same in every process.

    Unlike ``hash`` of str: ints hash to themselves, str and bytes by CRC-32, anything else by
    CRC-32 of its repr.
    """
    if isinstance(key, int):
        return key & 0x7FFFFFFFFFFFFFFF
    if isinstance(key, str):
        return zlib.crc32(key.encode("utf-8", "surrogatepass"))
    if isinstance(key, bytes):
        return zlib.crc32(key)
    return zlib.crc32(repr(key).encode("utf-8", "surrogatepass"))


def key_value(element: Any, operation: str, component: str | None) -> tuple[Any, Any]:
    """Return ``element`` as (key, value); raise ``TopologyTypeError`` when it is no pair."""
    if isinstance(element, (tuple, list)) and len(element) == 2:
        return element[0], element[1]
    msg = f"{operation} takes (key, value) pairs"
    raise TopologyTypeError(msg, component=component,
                            value=element, fix="map the elements to (key, value) tuples first")


class KeyGrouping(ICustomGrouping):
    """Send each (key, value) element to the task its key's stable hash picks."""

    def __init__(self, operation: str) -> None:
        self.operation = operation

    def prepare(self, context, component, stream, target_tasks) -> None:
        self._tasks = list(target_tasks)
        self._component = component

    def choose_tasks(self, values) -> list[int]:
        key, _ = key_value(values[0], self.operation, self._component)
        return [self._tasks[stable_hash(key) % len(self._tasks)]]


class RepartitionGrouping(ICustomGrouping):
    """``repartition(n, function)``: the grouping that asks ``function``.

    ``function(element, n)`` returns the partition, or a list of partitions, each element goes
    to (taken modulo n).
    """

    def __init__(self, function) -> None:
        self.function = function

    def prepare(self, context, component, stream, target_tasks) -> None:
        self._tasks = list(target_tasks)

    def choose_tasks(self, values) -> list[int]:
        tasks = self._tasks
        chosen = self.function(values[0], len(tasks))
        if isinstance(chosen, int):
            return [tasks[chosen % len(tasks)]]
        return [tasks[index % len(tasks)] for index in chosen]


class _ReduceByWindow(_WindowBolt):
    """``reduce_by_window``: one ``(Window, reduction)`` per non-empty window.

    Like the two mixins below, joined with a sliding or tumbling window bolt.
    """

    def initialize(self, config: dict, context) -> None:
        super().initialize(config, context)
        self._reduce = config[FUNCTION]

    def processWindow(self, window_info: WindowContext, tuples: list) -> None:  # noqa: N802
        if tuples:
            result = functools.reduce(self._reduce, (t.values[0] for t in tuples))
            self.emit([(Window(window_info.start, window_info.end), result)], stream=OUTPUT,
                      anchors=tuples)


class _ReduceByKeyAndWindow(_WindowBolt):
    """``reduce_by_key_and_window``: one ``(KeyedWindow, reduction)`` per key and window."""

    def initialize(self, config: dict, context) -> None:
        super().initialize(config, context)
        self._reduce = config[FUNCTION]
        self._component = context.get_component_id()

    def processWindow(self, window_info: WindowContext, tuples: list) -> None:  # noqa: N802
        groups: dict[Any, tuple[list, list]] = {}
        for tup in tuples:
            key, value = key_value(tup.values[0], "reduce_by_key_and_window", self._component)
            values, sources = groups.setdefault(key, ([], []))
            values.append(value)
            sources.append(tup)
        window = Window(window_info.start, window_info.end)
        for key, (values, sources) in groups.items():
            self.emit([(KeyedWindow(key, window), functools.reduce(self._reduce, values))],
                      stream=OUTPUT, anchors=sources)


class _Join(_WindowBolt):
    """The joins, per key and window.

    Per key and window, ``(KeyedWindow, join_function(left, right))`` for every pair of a left
    and a right value; outer joins add ``join_function(left, None)`` / ``join_function(None,
    right)`` for keys that only one side has in the window.
    """

    def initialize(self, config: dict, context) -> None:
        super().initialize(config, context)
        self._function = config[FUNCTION]
        self._type = config[JOIN_TYPE]
        self._right = config[JOIN_RIGHT]
        self._component = context.get_component_id()

    def processWindow(self, window_info: WindowContext, tuples: list) -> None:  # noqa: N802
        groups: dict[Any, tuple[list, list]] = {}
        for tup in tuples:
            key, value = key_value(tup.values[0], "join", self._component)
            groups.setdefault(key, ([], []))[tup.component == self._right].append((value, tup))
        window = Window(window_info.start, window_info.end)
        join, kind = self._function, self._type
        for key, (lefts, rights) in groups.items():
            keyed = KeyedWindow(key, window)
            if lefts and rights:
                for left, left_tup in lefts:
                    for right, right_tup in rights:
                        self.emit([(keyed, join(left, right))], stream=OUTPUT,
                                  anchors=[left_tup, right_tup])
            elif lefts and kind in (OUTER_LEFT, OUTER):
                for left, left_tup in lefts:
                    self.emit([(keyed, join(left, None))], stream=OUTPUT, anchors=[left_tup])
            elif rights and kind in (OUTER_RIGHT, OUTER):
                for right, right_tup in rights:
                    self.emit([(keyed, join(None, right))], stream=OUTPUT, anchors=[right_tup])


class ReduceByWindowBolt(_ReduceByWindow, SlidingWindowBolt):
    """``reduce_by_window`` over sliding windows."""

    outputs = OUTPUTS


class TumblingReduceByWindowBolt(_ReduceByWindow, TumblingWindowBolt):
    """``reduce_by_window`` over tumbling windows."""

    outputs = OUTPUTS


class ReduceByKeyAndWindowBolt(_ReduceByKeyAndWindow, SlidingWindowBolt):
    """``reduce_by_key_and_window`` over sliding windows."""

    outputs = OUTPUTS


class TumblingReduceByKeyAndWindowBolt(_ReduceByKeyAndWindow, TumblingWindowBolt):
    """``reduce_by_key_and_window`` over tumbling windows."""

    outputs = OUTPUTS


class JoinBolt(_Join, SlidingWindowBolt):
    """The joins over sliding windows."""

    outputs = OUTPUTS
    OUTER_LEFT, INNER, OUTER_RIGHT, OUTER = OUTER_LEFT, INNER, OUTER_RIGHT, OUTER


class TumblingJoinBolt(_Join, TumblingWindowBolt):
    """The joins over tumbling windows."""

    outputs = OUTPUTS
