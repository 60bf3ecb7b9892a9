"""At-least-once: XOR tuple trees, tracked by the stmgr of each tree's spout task.

A spout tuple emitted with a message id roots a tree (root ids: ``wire.tree_ids``). Every
copy of a tuple sent to a task gets a random 64-bit edge id, drawn by the emitting instance
and XORed into each of its roots' checksum once when created and once when acked, so a
checksum of zero means every edge of the tree was created and acked. All updates are
vectorised per batch with NumPy; only the per-root dictionary step is a Python loop.

Ordering keeps this sound: an instance's edge creations, emits and acks travel the same
connection in order (creations ahead of the frames that carry the copies), and its stmgr
forwards the XOR updates of one tree owner over one peer connection in order, so a child's
creation always reaches the owner before its parent's ack.
"""

from __future__ import annotations

import collections
import time
from itertools import repeat

import numpy as np


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

    Entries older than ``expiry_secs`` are forgotten (their spout has failed them by timeout
    by then), so the ledger stays bounded even when acks are lost with a dead process.
    """

    def __init__(self, expiry_secs: float, clock=time.monotonic) -> None:
        self._open: dict[int, int] = {}
        self._expiry = expiry_secs
        self._clock = clock
        self._born: collections.deque = collections.deque()  # (time, root ids), oldest first

    def __len__(self) -> int:
        return len(self._open)

    def start(self, roots: np.ndarray, update_roots: np.ndarray,
              update_values: np.ndarray) -> list[int]:
        """Open trees ``roots`` with their first edges; return the trees already complete.

        Each edge of a new tree belongs to these updates; a tree already complete is one no
        subscriber took.
        """
        unique, combined = xor_by_root(update_roots, update_values)
        self._open.update(zip(unique.tolist(), combined.tolist()))
        self._born.append((self._clock(), unique.tolist()))
        if unique.size == roots.size:
            return []
        return np.setdiff1d(roots, unique).tolist()

    def apply(self, roots: np.ndarray, values: np.ndarray) -> list[int]:
        """XOR ``values`` into the trees ``roots``; return the trees that completed.

        Updates for unknown roots (trees already completed, failed or expired) are ignored.
        Vectorised: one C-level pass reads the checksums (0 stands for unknown: a live tree's
        checksum is never 0), NumPy XORs, one C-level pass writes them back; only completed
        trees are removed one by one.
        """
        unique, combined = xor_by_root(roots, values)
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
        """Forget trees older than the expiry; return how many were still open."""
        limit = self._clock() - self._expiry
        dropped = 0
        while self._born and self._born[0][0] < limit:
            for root in self._born.popleft()[1]:
                if self._open.pop(root, None) is not None:
                    dropped += 1
        return dropped
