"""At-least-once: XOR tuple trees, tracked by the stmgr of each tree's spout task.

A spout tuple emitted with a message id roots a tree (root ids: ``wire.tree_ids``). Every
copy of a tuple sent to a task gets a random 64-bit edge id, drawn by the emitting instance
and XORed into each of its roots' checksum once when created and once when acked, so a
checksum of zero means every edge of the tree was created and acked. Updates are vectorised
per batch with NumPy; only the per-root dictionary step is a Python loop. Small updates (up
to ``tree_ids.SMALL_UPDATE_PAIRS`` pairs: a few tuples per turn, as when few trees are in
flight) take plain lists of ints instead (``start_pairs``, ``apply_pairs``): a NumPy call
has a fixed cost whatever its size, and a vectorised pass takes dozens of them.

Ordering keeps this sound: an instance's edge creations, emits and acks travel the same
connection in order (creations ahead of the frames that carry the copies), and its stmgr
forwards the XOR updates of one tree owner over one peer connection in order, so a child's
creation always reaches the owner before its parent's ack.
"""

from __future__ import annotations

import collections
import time
from itertools import repeat
from typing import Mapping

import numpy as np

from heron_spark.wire.tree_ids import ROOT_TASK_SHIFT


def xor_pairs(roots: list[int], values: list[int]) -> dict[int, int]:
    """Return ``xor_by_root`` of lists: each root's XOR of its values, roots in first-seen order."""
    combined: dict[int, int] = {}
    get = combined.get
    for root, value in zip(roots, values):
        combined[root] = get(root, 0) ^ value
    return combined


def xor_by_root(roots: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Combine (root, value) pairs: return unique roots and the XOR of each root's values."""
    if roots.size == 0:
        return roots, values
    order = np.argsort(roots, kind="stable")
    roots, values = roots[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], roots[1:] != roots[:-1])))
    return roots[starts], np.bitwise_xor.reduceat(values, starts)


class XorLedger:
    """Checksums of the open trees of this stmgr's spout tasks. Routing thread only.

    A tree lives as long as its spout task keeps it: ``expiry_secs`` after it opened, by
    then its spout has failed it by timeout (the core passes twice the spout component's
    message timeout), or for ever when that is None (timeouts off: each spout task then has at
    most ``topology.max.spout.pending`` trees open, and ``forget_task`` drops the trees of a
    task that restarted). ``task_expiry_secs`` sets it per spout task; others get
    ``expiry_secs``. So the ledger stays bounded even when acks are lost with a dead process.
    """

    def __init__(self, expiry_secs: float | None, clock=time.monotonic,
                 task_expiry_secs: Mapping[int, float | None] | None = None) -> None:
        self._open: dict[int, int] = {}
        self._clock = clock
        # per lifetime in seconds: (time opened, root ids), oldest first
        self._born: dict[float, collections.deque] = {}
        self._default_born = self._births(expiry_secs)
        # each spout task's deque (shared by tasks of one lifetime), None: its trees never expire
        self._task_born = {task: self._births(secs)
                           for task, secs in (task_expiry_secs or {}).items()}

    def _births(self, secs: float | None) -> collections.deque | None:
        """Return the deque that dates trees living ``secs``; None when they never expire."""
        if secs is None:
            return None
        born = self._born.get(secs)
        if born is None:
            born = self._born[secs] = collections.deque()
        return born

    def __len__(self) -> int:
        return len(self._open)

    def start(self, roots: np.ndarray, update_roots: np.ndarray,
              update_values: np.ndarray, task: int = -1) -> list[int]:
        """Open trees ``roots`` of spout ``task`` with their first edges; return those complete.

        Each edge of a new tree belongs to these updates; a tree already complete is one no
        subscriber took. ``task`` (-1: unknown) chooses the trees' lifetime.
        """
        unique, combined = xor_by_root(update_roots, update_values)
        self._open.update(zip(unique.tolist(), combined.tolist()))
        born = self._task_born.get(task, self._default_born)
        if born is not None:
            born.append((self._clock(), unique.tolist()))
        if unique.size == roots.size:
            return []
        return np.setdiff1d(roots, unique).tolist()

    def start_pairs(self, roots: list[int], update_roots: list[int],
                    update_values: list[int], task: int = -1) -> list[int]:
        """Return ``start`` for lists of ints (small updates); the same trees, in the same order."""
        combined = xor_pairs(update_roots, update_values)
        self._open.update(combined)
        born = self._task_born.get(task, self._default_born)
        if born is not None:
            born.append((self._clock(), list(combined)))
        if len(combined) == len(roots):
            return []
        return sorted(set(roots).difference(combined))

    def apply_pairs(self, roots: list[int], values: list[int]) -> list[int]:
        """Return ``apply`` for lists of ints (small updates): the completed trees, sorted."""
        return self.apply_combined(xor_pairs(roots, values))

    def apply_combined(self, combined: dict[int, int]) -> list[int]:
        """Return ``apply`` for updates already combined per root (``xor_pairs``), sorted."""
        opened = self._open
        finished = []
        for root, value in combined.items():
            current = opened.get(root, 0)
            if current == 0:
                continue  # unknown: completed, failed or expired already
            current ^= value
            if current:
                opened[root] = current
            else:
                del opened[root]
                finished.append(root)
        if len(finished) > 1:
            finished.sort()
        return finished

    def apply(self, roots: np.ndarray, values: np.ndarray) -> list[int]:
        """XOR ``values`` into the trees ``roots``; return the trees that completed.

        Updates for unknown roots (trees already completed, failed or expired) are ignored.
        Vectorised: one C-level pass reads the checksums (0 stands for unknown: a live tree's
        checksum is never 0), NumPy XORs, one C-level pass writes them back; only completed
        trees are removed one by one.
        """
        return self.apply_unique(*xor_by_root(roots, values))

    def apply_unique(self, unique: np.ndarray, combined: np.ndarray) -> list[int]:
        """Return ``apply`` for updates already combined per root (``xor_by_root``)."""
        if unique.size == 0:
            return []
        keys = unique.tolist()
        opened = self._open
        current = np.fromiter(map(opened.get, keys, repeat(0)), dtype=np.uint64,
                              count=len(keys))
        updated = current ^ combined
        known = current != 0
        done = known & (updated == 0)
        alive = known & ~done
        if alive.all():
            opened.update(zip(keys, updated.tolist()))
            return []
        opened.update(zip(unique[alive].tolist(), updated[alive].tolist()))
        finished = unique[done].tolist()
        for root in finished:
            del opened[root]
        return finished

    def fail(self, roots: np.ndarray) -> list[int]:
        """Close trees ``roots`` as failed; return those that were open."""
        failed = []
        for root in np.unique(roots).tolist():
            if self._open.pop(root, None) is not None:
                failed.append(root)
        return failed

    def expire(self) -> int:
        """Forget trees older than their expiry; return how many were still open."""
        now = self._clock()
        opened = self._open
        dropped = 0
        for secs, born in self._born.items():
            limit = now - secs
            while born and born[0][0] < limit:
                for root in born.popleft()[1]:
                    if opened.pop(root, None) is not None:
                        dropped += 1
        return dropped

    def forget_task(self, task: int) -> int:
        """Forget every open tree of spout ``task`` (it restarted); return how many.

        A pass over every open tree: called when a spout's connection ends, not per frame.
        """
        mine = [root for root in self._open if root >> ROOT_TASK_SHIFT == task]
        for root in mine:
            del self._open[root]
        return len(mine)
