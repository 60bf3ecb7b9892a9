"""At-least-once inside an instance: a spout's open trees, and a bolt's acks and fails.

A spout names each reliable tuple's tree with a fresh root id (its task id in the top bits,
see ``wire.tree_ids``) and remembers root -> message id until its stmgr reports the tree done or
failed, or until ``topology.message.timeout.secs`` passes. A bolt buffers the tuples it acks
and fails; once per turn they become (root, edge id) pairs that travel in one XOR update with
the edges of the turn's anchored emits (``collector.flush_all``), so the stmgr never sees a
parent's ack without its children's creation. Used by the instance's loop thread only.
"""

from __future__ import annotations

import math
import random
import time
from itertools import chain, repeat
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from heron_spark.api.tuple import HeronTuple
from heron_spark.errors import TopologyValueError
from heron_spark.wire.arrow_numpy import numbers
from heron_spark.wire.tree_ids import ROOT_SEQUENCE_MASK, ROOT_TASK_SHIFT, SMALL_UPDATE_PAIRS, unpack


_EXPIRY_CHECK_SECS = 0.1
_CAP_STALL_SECS = 0.005  # a spout at its max pending resumes when no tree closed for this long
_first = itemgetter(0)
_roots_of = itemgetter(6)  # HeronTuple.roots
_source_of = itemgetter(1, 2)  # HeronTuple (component, stream)
_stamp_of = itemgetter(5)  # HeronTuple.timestamp (time.time() when its batch arrived)
_NS = 1_000_000_000
_born_of = itemgetter(1)   # SpoutTrees entry (message id, birth, stream)
_stream_of = itemgetter(2)
_NO_IDS = np.empty(0, dtype=np.uint64)  # read-only: shared by every empty answer
_NO_IDS.flags.writeable = False


def _joined_ids(columns: list, total: int) -> np.ndarray:
    """Return uint64 id columns (Arrow arrays, ``total`` ids in all) as one NumPy array.

    A few ids go through one list of ints: cheaper than a NumPy view per column and a join.
    """
    if total <= SMALL_UPDATE_PAIRS:
        return np.array(list(chain.from_iterable(column.to_pylist() for column in columns)),
                        dtype=np.uint64)
    if len(columns) == 1:
        return numbers(columns[0])
    return np.concatenate([numbers(column) for column in columns])


class StreamTally:
    """Heron's per-stream ack metrics of one task, as cumulative totals.

    Acked, failed and timed-out tuples, and the sums of their latencies in ns
    (``__complete-latency`` / ``__process-latency`` and ``__fail-latency`` are these sums over the
    counts, per interval). Written by the loop thread; the metrics thread reads the numbers.
    """

    __slots__ = ("acked", "failed", "timed_out", "ack_ns", "fail_ns")

    def __init__(self) -> None:
        self.acked = self.failed = self.timed_out = 0
        self.ack_ns = self.fail_ns = 0.0

    def add(self, count: int, latency_ns: float, acked: bool) -> None:
        """Count ``count`` settled tuples whose latencies sum to ``latency_ns``."""
        if acked:
            self.acked += count
            self.ack_ns += latency_ns
        else:
            self.failed += count
            self.fail_ns += latency_ns


class SpoutTrees:
    """Open trees of one spout task: root id -> (message id, emit time), oldest first."""

    def __init__(self, task_id: int, timeout_secs: float | None, max_pending: int | None,
                 clock=time.monotonic) -> None:
        self._base = task_id << ROOT_TASK_SHIFT
        self._sequence = random.getrandbits(ROOT_TASK_SHIFT)  # a restarted task picks new ids
        self._open: dict[int, tuple[Any, float, str]] = {}  # insertion order: oldest first
        self.timeout = timeout_secs
        self.max_pending = max_pending
        # Once at the cap, next_tuple waits until at most this many trees are open (half the
        # cap closed), or until trees stop closing for _CAP_STALL_SECS with some closed: it
        # then emits a batch of that half, not a batch per tree or two as acks trickle in
        # (each batch costs every process on its way). The stall rule keeps a spout going
        # whose bolts hold back more than half its cap (a window's tuples are acked when they
        # leave it, so they close only while new ones come).
        self.resume_at = None if max_pending is None else max_pending - max(1, max_pending // 2)
        self._capped = False
        self._last_close = 0.0  # when trees last closed (clock seconds)
        self._clock = clock
        self.acked = self.failed = self.timed_out = 0
        self.latency_ms_total = 0.0
        self.by_stream: dict[str, StreamTally] = {}  # Heron's per-stream ack metrics
        self._next_expiry_check = 0.0

    def __len__(self) -> int:
        return len(self._open)

    @property
    def full(self) -> bool:
        """True from when ``topology.max.spout.pending`` trees are open: stop calling next_tuple.

        It stays True until at most ``resume_at`` trees are open (half the cap closed; the
        first close for a cap under 4), or until, with some closed, none closed for
        ``_CAP_STALL_SECS``: never more than the cap are open, and the spout resumes with
        room for a batch.
        """
        if self.max_pending is None:
            return False
        opened = len(self._open)
        if self._capped:
            self._capped = opened > self.resume_at and (  # type: ignore[operator]
                opened >= self.max_pending
                or self._clock() < self._last_close + _CAP_STALL_SECS)
        else:
            self._capped = opened >= self.max_pending
        return self._capped

    def open(self, message_id: Any, stream: str = "default") -> int:
        """Start a tree for ``message_id``, emitted on ``stream``; return its root id."""
        self._sequence = (self._sequence + 1) & ROOT_SEQUENCE_MASK
        root = self._base | self._sequence
        self._open[root] = (message_id, self._clock(), stream)
        return root

    def tally(self, stream: str) -> StreamTally:
        """Return ``stream``'s ack metrics (created at 0)."""
        tally = self.by_stream.get(stream)
        if tally is None:
            tally = self.by_stream[stream] = StreamTally()
        return tally

    def _count(self, entries: list, now: float, acked: bool) -> float:
        """Add closed trees (message id, birth, stream) to their streams' tallies.

        Return the sum of their ages in seconds.
        """
        streams = set(map(_stream_of, entries))  # C-level passes: no Python per tree
        total = 0.0
        for stream in streams:
            mine = entries if len(streams) == 1 else [e for e in entries if e[2] == stream]
            ages = now * len(mine) - math.fsum(map(_born_of, mine))
            self.tally(stream).add(len(mine), ages * _NS, acked)
            total += ages
        return total

    def close(self, acked_raw: bytes, failed_raw: bytes) -> tuple[list, list]:
        """Close the trees a stmgr reported; return (acked, failed) message ids."""
        acked = self._pop(unpack(acked_raw).tolist())
        failed = self._pop(unpack(failed_raw).tolist())
        now = self._last_close = self._clock()
        if acked:
            self.latency_ms_total += self._count(acked, now, True) * 1000.0
            acked = list(map(_first, acked))
        if failed:
            self._count(failed, now, False)
        failed = [entry[0] for entry in failed]
        self.acked += len(acked)
        self.failed += len(failed)
        return acked, failed

    def ages_ms(self, raw: bytes) -> list[float]:
        """Return how long (ms) each open tree among the packed roots ``raw`` has been open.

        In the order ``close`` returns their message ids (call it before ``close``; task hooks).
        """
        now, opened = self._clock(), self._open
        return [(now - entry[1]) * 1000.0 for entry in map(opened.get, unpack(raw).tolist())
                if entry is not None]

    def _pop(self, roots: list) -> list:
        """Remove ``roots`` from the open trees; return the (message id, birth, stream) of those open.

        The others timed out already, or belong to an earlier run of this task.
        """
        if not roots:
            return []
        entries = list(map(self._open.pop, roots, repeat(None)))
        return [entry for entry in entries if entry is not None] if None in entries else entries

    def expired(self) -> list:
        """Remove trees open longer than the timeout; return their message ids."""
        if self.timeout is None:
            return []
        now = self._clock()
        if now < self._next_expiry_check:
            return []
        # Timeouts are seconds long: looking ten times a second is precise enough, and a dict
        # emptied from the front skips its deleted slots on every look until it is resized.
        self._next_expiry_check = now + min(_EXPIRY_CHECK_SECS, self.timeout / 10)
        limit = now - self.timeout
        # One pass from the oldest, then the deletes: a fresh iterator per expired tree would
        # skip the deleted slots again each time (quadratic when many trees time out at once).
        old = []
        for root, entry in self._open.items():
            if entry[1] > limit:
                break
            old.append((root, entry))
        if old:
            self._last_close = now
        out = []
        for root, (message_id, _, stream) in old:
            del self._open[root]
            out.append(message_id)
            self.tally(stream).timed_out += 1
        self.timed_out += len(out)
        return out


class AckBuffer:
    """A bolt's acked and failed input tuples since the last ``take``.

    ``acked`` and ``failed`` are plain lists whose ``append`` the executor binds as the bolt's
    ``ack`` and ``fail`` when the bolt does not override them: an ack costs one C-level call.
    ``take`` turns them into packed arrays once per turn (and checks what was acked).
    """

    def __init__(self, component: str = "", only_input: tuple[str, str] | None = None) -> None:
        self.component = component
        # The bolt's one declared input (component, stream), if it has one: every tuple it
        # settles comes from there, so the tallies skip the per-tuple look at each source.
        self.only_input = only_input
        self.acked: list = []
        self.failed: list = []
        self.acked_arrays: list = []   # (roots, edge ids) of whole batches (the batch API)
        self.failed_arrays: list = []  # roots of whole failed batches
        self.acked_count = self.failed_count = 0
        self.by_input: dict[tuple[str, str], StreamTally] = {}  # (component, stream): Heron's
        # True while every tuple this bolt received belongs to exactly one tree (the usual
        # case; the executor clears it for good at the first batch where that is not so).
        self.single_root = True
        # Batches delivered to process() since the last take, in order: (tuples, their root
        # and edge-id columns (Arrow), arrival time, (component, stream)). When the bolt acked
        # exactly these tuples, in order (the usual case), take uses these columns.
        self._delivered: list = []

    def __bool__(self) -> bool:
        return bool(self.acked or self.failed or self.acked_arrays or self.failed_arrays)

    def ack_rows(self, roots: np.ndarray, keys: np.ndarray, rows: int) -> None:
        """Record ``rows`` rows of a batch as processed: their (root, edge id) pairs."""
        self.acked_arrays.append((roots, keys))
        self.acked_count += rows

    def fail_rows(self, roots: np.ndarray, rows: int) -> None:
        """Record ``rows`` rows of a batch as failed: their trees fail at once."""
        self.failed_arrays.append(roots)
        self.failed_count += rows

    def delivered(self, tuples: list, roots: pa.Array, keys: pa.Array, stamp: float,
                  source: tuple[str, str]) -> None:
        """Note a batch of ``tuples`` handed to process(), each in the one tree ``roots[i]``.

        ``roots``, ``keys``: the batch's uint64 root and edge-id columns; ``stamp``: their
        ``creation_time``; ``source``: their (component, stream).
        """
        self._delivered.append((tuples, roots, keys, stamp, source))

    def forget_delivered(self) -> None:
        """Forget the delivered batches (their tuples were not all acked at once)."""
        if self._delivered:
            self._delivered = []

    def _take_delivered(self, acked: list) -> tuple[np.ndarray, np.ndarray] | None:
        """Return the (roots, edge ids) of ``acked`` when it is the delivered tuples in order.

        Tally them as the tuple path does. Forget the delivered batches either way.
        """
        delivered, self._delivered = self._delivered, []
        if not delivered or sum(len(entry[0]) for entry in delivered) != len(acked):
            return None
        start = 0
        for entry in delivered:
            end = start + len(entry[0])
            if acked[start:end] != entry[0]:  # identity first: a C-level pass
                return None
            start = end
        now = time.time()
        for tuples, _, _, stamp, source in delivered:
            self.tally(source).add(len(tuples), (now - stamp) * len(tuples) * _NS, True)
        return _joined_ids([entry[1] for entry in delivered], len(acked)), \
            _joined_ids([entry[2] for entry in delivered], len(acked))

    def ack(self, tup) -> None:
        """Record ``tup`` (a ``HeronTuple``) as processed."""
        self.acked.append(tup)

    def fail(self, tup) -> None:
        """Record ``tup`` as failed: its trees fail at once."""
        self.failed.append(tup)

    def tally(self, source: tuple[str, str]) -> StreamTally:
        """Return the ack metrics of input ``source`` (component, stream), created at 0."""
        tally = self.by_input.get(source)
        if tally is None:
            tally = self.by_input[source] = StreamTally()
        return tally

    def _count(self, tuples: list, acked: bool) -> None:
        """Add settled input tuples to their (component, stream) tallies, with their latency.

        The process (or fail) latency is now minus when their batch arrived. C-level passes per
        turn.
        """
        try:
            sources = {self.only_input} if self.only_input is not None else \
                set(map(_source_of, tuples))
            now = time.time()
            for source in sources:
                mine = tuples if len(sources) == 1 else [t for t in tuples
                                                         if _source_of(t) == source]
                self.tally(source).add(len(mine), (now * len(mine) - math.fsum(
                    map(_stamp_of, mine))) * _NS, acked)
        except (TypeError, IndexError):
            pass  # not received tuples: ``_roots`` below names the mistake

    def take(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return and forget (ack roots, ack edge ids, failed roots) as uint64 arrays.

        One (root, edge id) pair per root of each acked tuple.
        """
        acked, failed = self.acked, self.failed
        self.acked_count += len(acked)
        self.failed_count += len(failed)
        roots: np.ndarray | None = None
        keys: np.ndarray = _NO_IDS
        if not acked:
            self.forget_delivered()
            roots = keys = _NO_IDS
        elif (as_delivered := self._take_delivered(acked)) is not None:
            roots, keys = as_delivered  # the delivered batches' arrays: no pass per tuple
        else:
            self._count(acked, True)
            if self.single_root:
                try:  # two C-level passes, no Python per tuple
                    count = len(acked)
                    roots = np.fromiter(map(_first, map(_roots_of, acked)), np.uint64, count)
                    keys = np.fromiter(map(_first, acked), np.uint64, count)
                except (TypeError, IndexError, ValueError, OverflowError):
                    roots = None  # not received tuples: the general path says so
            if roots is None:
                roots, keys = self._acked_pairs(acked)
        if failed:
            self._count(failed, False)
            failed_roots, _ = self._roots(failed)
        else:
            failed_roots = _NO_IDS
        acked.clear()  # in place: the bolt's bound ``ack`` keeps appending to these lists
        failed.clear()
        assert roots is not None  # every branch above set it
        if self.acked_arrays:
            roots = np.concatenate([roots, *(r for r, _ in self.acked_arrays)])
            keys = np.concatenate([keys, *(k for _, k in self.acked_arrays)])
            self.acked_arrays = []
        if self.failed_arrays:
            failed_roots = np.concatenate([failed_roots, *self.failed_arrays])
            self.failed_arrays = []
        return roots, keys, failed_roots

    def _acked_pairs(self, acked: list) -> tuple[np.ndarray, np.ndarray]:
        """Return (root, edge id) pairs of ``acked``, one per root of each tuple."""
        roots, counts = self._roots(acked)
        if counts.size and counts.min() > 0:
            ids = np.array([t[0] for t in acked], dtype=np.uint64)
        else:
            ids = np.array([t[0] for t, n in zip(acked, counts.tolist()) if n], dtype=np.uint64)
            counts = counts[counts > 0]
        return roots, (ids if roots.size == ids.size else np.repeat(ids, counts))

    def _roots(self, tuples: list) -> tuple[np.ndarray, np.ndarray]:
        """Return the flat root ids of ``tuples`` and how many each has."""
        try:
            per_tuple = [t[6] for t in tuples]
            counts = np.fromiter(map(len, per_tuple), dtype=np.int64, count=len(per_tuple))
            flat = np.fromiter(chain.from_iterable(per_tuple), dtype=np.uint64,
                               count=int(counts.sum()))
        except (TypeError, IndexError, ValueError, OverflowError) as exc:
            bad = next((t for t in tuples if not isinstance(t, HeronTuple)), None)
            msg = "ack() and fail() take a tuple this bolt received in process()"
            raise TopologyValueError(
                msg, component=self.component, value=bad, kind="ack",
                fix="pass the tuple object process() got (anchors likewise)") from exc
        return flat, counts
