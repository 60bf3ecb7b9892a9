"""Timers of a keyed bolt: event-time and processing-time, per key, without I/O.

A bolt registers a timer for a key and a time through its context
(``register_event_time_timer(key, ts_ms)``, ``register_processing_time_timer(key, ts_ms)``);
the executor calls ``Bolt.on_timer(key, ts_ms, kind)`` when it is due: an event-time timer when
the task's input watermark reaches ``ts_ms`` (``fire_event``), a processing-time timer when the
wall clock (ms since the epoch) does (``due_processing``). Per kind a heap orders the timers by
time, then by key (``order_key``: deterministic whatever the keys' types), and a set holds the
live ones: a timer registered twice is one timer, a deleted one stays in the heap until it
comes up and is skipped then.

Both firing functions are generators that look at the heap again before each timer, so a timer
that ``on_timer`` registers for a time already reached fires in the same advance.

A checkpoint keeps ``snapshot()`` (plain, picklable data); ``split_by_key_group`` hands each
key's timers to the key group of its key (``contract.key_groups``: the group a fields grouping
routes the key by), so a rescaled component's tasks take the timers of the groups they own
(``instance.stateful``). Keys are what the state is keyed by: the grouping field's value, or a
tuple of the values of several grouping fields.

Loop thread only (the task's).
"""

from __future__ import annotations

import heapq
import itertools
import operator
from typing import Any, Hashable, Iterator

from heron_spark.errors import TopologyTypeError
from heron_spark.wire import tuple_batch

EVENT = "event"
PROCESSING = "processing"
KINDS = (EVENT, PROCESSING)
TIMERS_FORMAT = "heron_spark.timers/1"
_SIMPLE = (str, bytes, int, float, bool)


def order_key(key: Any) -> tuple:
    """Return a sort key ordering timer keys the same way in every process, whatever their types.

    Strings, bytes and numbers sort by value among their own kind, tuples item by item, any
    other key by its ``repr``.
    """
    kind = type(key)
    if kind is tuple:
        return ("tuple", tuple(order_key(item) for item in key))
    if kind in (int, float, bool):
        return ("number", key)
    if kind in (str, bytes):
        return (kind.__name__, key)
    return (f"{kind.__module__}.{kind.__qualname__}", repr(key))


def uses_timers(component_class: type) -> bool:
    """Return whether ``component_class`` handles timers (overrides ``Bolt.on_timer``)."""
    from heron_spark.api.bolt import Bolt

    own = getattr(component_class, "on_timer", None)
    return own is not None and own is not getattr(Bolt, "on_timer", None)


class _Queue:
    """The timers of one kind: a heap by (time, key order) and the set of live timers."""

    def __init__(self) -> None:
        self.heap: list[tuple[int, tuple, int, Hashable]] = []
        self.live: set[tuple[Hashable, int]] = set()
        self._seq = itertools.count()  # never compare two keys, even of equal order keys

    def add(self, key: Hashable, ts: int) -> None:
        if (key, ts) in self.live:
            return
        self.live.add((key, ts))
        heapq.heappush(self.heap, (ts, order_key(key), next(self._seq), key))

    def delete(self, key: Hashable, ts: int) -> None:
        self.live.discard((key, ts))
        if len(self.heap) > 64 and len(self.heap) > 2 * len(self.live):
            # deleted entries no longer outnumber the live ones; in place: ``due`` may hold it
            kept = {(entry[3], entry[0]): entry for entry in self.heap
                    if (entry[3], entry[0]) in self.live}
            self.heap[:] = kept.values()
            heapq.heapify(self.heap)

    def peek(self) -> int | None:
        """Return the earliest live time (dropping deleted entries on the way), or None."""
        heap = self.heap
        while heap:
            ts, _, _, key = heap[0]
            if (key, ts) in self.live:
                return ts
            heapq.heappop(heap)
        return None

    def due(self, until: int) -> Iterator[tuple[Hashable, int]]:
        """Yield and remove each live timer with time <= ``until``, earliest first."""
        heap, live = self.heap, self.live
        while heap and heap[0][0] <= until:
            ts, _, _, key = heapq.heappop(heap)
            if (key, ts) in live:
                live.discard((key, ts))
                yield key, ts

    def items(self) -> list[tuple[Hashable, int]]:
        """Return the live timers as ``(key, ts)``, in firing order."""
        return sorted(self.live, key=lambda item: (item[1], order_key(item[0])))


class KeyedTimers:
    """The timers of one bolt task (see the module docstring). Loop thread only."""

    def __init__(self, component: str | None = None) -> None:
        self.component = component  # named in errors
        self._queues = {EVENT: _Queue(), PROCESSING: _Queue()}

    def __len__(self) -> int:
        """Return how many timers are registered (both kinds)."""
        return sum(len(queue.live) for queue in self._queues.values())

    def register(self, kind: str, key: Hashable, ts_ms: int) -> None:
        """Register a timer of ``kind`` for ``key`` at ``ts_ms``; once only per (key, ts, kind)."""
        self._queue(kind).add(self._checked_key(key), self._checked_ts(ts_ms))

    def delete(self, kind: str, key: Hashable, ts_ms: int) -> None:
        """Delete the timer of ``kind`` for ``key`` at ``ts_ms`` (nothing if there is none)."""
        self._queue(kind).delete(self._checked_key(key), self._checked_ts(ts_ms))

    def timers(self, kind: str) -> list[tuple[Hashable, int]]:
        """Return the registered timers of ``kind`` as ``(key, ts_ms)``, in firing order."""
        return self._queue(kind).items()

    def fire_event(self, watermark_ms: int) -> Iterator[tuple[Hashable, int]]:
        """Yield (and remove) each event-time timer with ``ts <= watermark_ms``, in order.

        Order: by time, then by key (``order_key``). A timer registered while this runs (from
        ``on_timer``) for a time <= ``watermark_ms`` is yielded too, in its place.
        """
        return self._queues[EVENT].due(watermark_ms)

    def due_processing(self, now_ms: int) -> Iterator[tuple[Hashable, int]]:
        """Yield (and remove) each processing-time timer with ``ts <= now_ms`` (wall ms), in order."""
        return self._queues[PROCESSING].due(now_ms)

    def next_processing_deadline(self) -> int | None:
        """Return the earliest processing-time timer's time (wall ms), or None when there is none."""
        return self._queues[PROCESSING].peek()

    def next_event_time(self) -> int | None:
        """Return the earliest event-time timer's time (ms), or None when there is none."""
        return self._queues[EVENT].peek()

    # ---- checkpoints -----------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Return every timer as plain, picklable data (what a checkpoint keeps).

        ``{"format": TIMERS_FORMAT, "event": [(key, ts_ms), ...], "processing": [...]}``, the
        timers of each kind in no particular order (a copy of the live set: linear time on
        the task's thread at each checkpoint; ``restore`` orders them again).
        """
        return {"format": TIMERS_FORMAT,
                **{kind: list(queue.live) for kind, queue in self._queues.items()}}

    def restore(self, data: dict) -> None:
        """Replace every timer with those of ``data`` (a ``snapshot()``, maybe merged or split).

        Raise ``ValueError`` when ``data`` is not a timers snapshot.
        """
        check_snapshot(data)
        self._queues = {EVENT: _Queue(), PROCESSING: _Queue()}
        for kind in KINDS:
            queue = self._queues[kind]
            for key, ts in data[kind]:
                queue.add(key, ts)

    # ---- argument checks -------------------------------------------------------------------
    def _queue(self, kind: str) -> _Queue:
        queue = self._queues.get(kind)
        if queue is None:
            msg = "a timer's kind is 'event' or 'processing'"
            raise TopologyTypeError(msg, component=self.component, value=kind,
                                    fix="pass kind='event' or kind='processing'")
        return queue

    def _checked_ts(self, ts_ms) -> int:
        if type(ts_ms) is int:
            return ts_ms
        try:
            if isinstance(ts_ms, bool):
                raise TypeError
            return operator.index(ts_ms)  # NumPy integers too
        except TypeError:
            msg = "a timer's time is an int of milliseconds since the epoch"
            raise TopologyTypeError(msg, component=self.component, value=ts_ms,
                                    fix="pass an int, e.g. int(seconds * 1000)") from None

    def _checked_key(self, key: Hashable) -> Hashable:
        try:
            hash(key)
        except TypeError:
            msg = "a timer's key must be hashable (the value(s) the fields grouping routes by)"
            raise TopologyTypeError(msg, component=self.component, value=key,
                                    fix="pass the grouping field's value, or a tuple of the "
                                        "values of several grouping fields") from None
        return key


def check_snapshot(data: Any) -> None:
    """Raise ``ValueError`` unless ``data`` is a timers snapshot (``KeyedTimers.snapshot``)."""
    if not isinstance(data, dict) or data.get("format") != TIMERS_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        msg = f"unknown timers format {found!r}"
        raise ValueError(msg)
    for kind in KINDS:
        if not isinstance(data.get(kind), list):
            msg = f"a timers snapshot without its list of {kind} timers"
            raise ValueError(msg)


def empty_snapshot() -> dict:
    """Return the snapshot of no timers."""
    return {"format": TIMERS_FORMAT, EVENT: [], PROCESSING: []}


def split_by_key_group(data: dict, max_parallelism: int) -> dict[int, dict]:
    """Return the timers of snapshot ``data`` split by the key group of each timer's key.

    Each part is a snapshot of its own; groups with no timer are absent.
    """
    check_snapshot(data)
    keys = list(dict.fromkeys(key for kind in KINDS for key, _ in data[kind]))
    group_of = dict(zip(keys, tuple_batch.key_groups_of(keys, max_parallelism)))
    out: dict[int, dict] = {}
    for kind in KINDS:
        for key, ts in data[kind]:
            group = group_of[key]
            part = out.get(group)
            if part is None:
                part = out[group] = empty_snapshot()
            part[kind].append((key, ts))
    return out


def merge_snapshots(parts: list[dict]) -> dict:
    """Return one snapshot holding the timers of every snapshot in ``parts``."""
    out = empty_snapshot()
    for part in parts:
        check_snapshot(part)
        for kind in KINDS:
            out[kind].extend(part[kind])
    return out
