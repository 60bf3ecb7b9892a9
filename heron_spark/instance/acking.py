"""At-least-once inside an instance: a spout's open trees, and a bolt's acks and fails.

A spout names each reliable tuple's tree with a fresh root id (its task id in the top bits,
see ``wire.tree_ids``) and remembers root -> message id until its stmgr reports the tree done or
failed, or until ``topology.message.timeout.secs`` passes. A bolt buffers (root, edge id) pairs
of the tuples it acks and the roots of those it fails; the runtime sends them after flushing
the bolt's emits, so the stmgr always sees a child's creation before its parent's ack.
Used by the task-execution thread only.
"""

from __future__ import annotations

import collections
import random
import time
from typing import Any

from heron_spark.wire.tree_ids import ROOT_SEQUENCE_MASK, ROOT_TASK_SHIFT, pack, unpack


class SpoutTrees:
    """Open trees of one spout task: root id -> (message id, emit time), oldest first."""

    def __init__(self, task_id: int, timeout_secs: float | None, max_pending: int | None,
                 clock=time.monotonic) -> None:
        self._base = task_id << ROOT_TASK_SHIFT
        self._sequence = random.getrandbits(ROOT_TASK_SHIFT)  # a restarted task picks new ids
        self._open: collections.OrderedDict[int, tuple[Any, float]] = collections.OrderedDict()
        self.timeout = timeout_secs
        self.max_pending = max_pending
        self._clock = clock
        self.acked = self.failed = self.timed_out = 0
        self.latency_ms_total = 0.0

    def __len__(self) -> int:
        return len(self._open)

    @property
    def full(self) -> bool:
        """True while ``topology.max.spout.pending`` trees are open: stop calling next_tuple."""
        return self.max_pending is not None and len(self._open) >= self.max_pending

    def open(self, message_id: Any) -> int:
        """Start a tree for ``message_id``; return its root id."""
        self._sequence = (self._sequence + 1) & ROOT_SEQUENCE_MASK
        root = self._base | self._sequence
        self._open[root] = (message_id, self._clock())
        return root

    def close(self, acked_raw: bytes, failed_raw: bytes) -> tuple[list, list]:
        """Close the trees a stmgr reported; return (acked, failed) message ids."""
        now = self._clock()
        acked, failed = [], []
        for root in unpack(acked_raw).tolist():
            entry = self._open.pop(root, None)
            if entry is not None:  # None: timed out already, or a tree of an earlier run
                acked.append(entry[0])
                self.latency_ms_total += (now - entry[1]) * 1000.0
        for root in unpack(failed_raw).tolist():
            entry = self._open.pop(root, None)
            if entry is not None:
                failed.append(entry[0])
        self.acked += len(acked)
        self.failed += len(failed)
        return acked, failed

    def expired(self) -> list:
        """Remove trees open longer than the timeout; return their message ids."""
        if self.timeout is None:
            return []
        limit = self._clock() - self.timeout
        out = []
        while self._open:
            root, (message_id, born) = next(iter(self._open.items()))
            if born > limit:
                break
            del self._open[root]
            out.append(message_id)
        self.timed_out += len(out)
        return out


class AckBuffer:
    """A bolt's acks and fails since the last send."""

    def __init__(self) -> None:
        self.roots: list[int] = []
        self.keys: list[int] = []
        self.failed_roots: list[int] = []
        self.acked = self.failed = 0

    def __bool__(self) -> bool:
        return bool(self.roots or self.failed_roots)

    def ack(self, tup) -> None:
        """Record ``tup`` (a ``HeronTuple``) as processed."""
        roots = tup.roots
        if roots:
            self.roots.extend(roots)
            self.keys.extend([tup.id] * len(roots))
        self.acked += 1

    def fail(self, tup) -> None:
        """Record ``tup`` as failed: its trees fail at once."""
        if tup.roots:
            self.failed_roots.extend(tup.roots)
        self.failed += 1

    def take(self) -> tuple[bytes, bytes, bytes]:
        """Return and forget (ack roots, ack edge ids, failed roots) as packed uint64 bytes."""
        out = pack(self.roots), pack(self.keys), pack(self.failed_roots)
        self.roots, self.keys, self.failed_roots = [], [], []
        return out
