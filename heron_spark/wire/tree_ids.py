"""Root ids of at-least-once tuple trees, and how arrays of them travel in protobuf messages.

A root id is 64 bits: the spout task id in the top 16 bits (``ROOT_TASK_SHIFT``), a sequence
number below. Any process can therefore tell which spout task, and so which stmgr, owns a
tree. Arrays of root and edge ids travel as little-endian uint64 ``bytes`` fields.
"""

from __future__ import annotations

import sys
from array import array

import numpy as np

ROOT_TASK_SHIFT = 48
ROOT_SEQUENCE_MASK = (1 << ROOT_TASK_SHIFT) - 1
_U64 = np.dtype("<u8")
_BIG_ENDIAN = sys.byteorder == "big"


def root_task(roots: np.ndarray) -> np.ndarray:
    """Return the spout task id of each root id."""
    return (roots >> np.uint64(ROOT_TASK_SHIFT)).astype(np.int64)


def pack(values) -> bytes:
    """Return uint64 ``values`` as the little-endian bytes protobuf messages carry."""
    return np.asarray(values, dtype=_U64).tobytes()


def unpack(raw: bytes) -> np.ndarray:
    """Return the uint64 array in little-endian ``raw`` bytes."""
    return np.frombuffer(raw, dtype=_U64).astype(np.uint64)


def unpack_list(raw: bytes) -> list[int]:
    """Return ``unpack`` as a list of ints (small updates: no NumPy call)."""
    ids = array("Q", raw)
    if _BIG_ENDIAN:
        ids.byteswap()
    return ids.tolist()


def pack_list(ids: list[int]) -> bytes:
    """Return ``pack`` of a list of ints (small updates: no NumPy call)."""
    packed = array("Q", ids)
    if _BIG_ENDIAN:
        packed.byteswap()
    return packed.tobytes()


def xor_runs(roots: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Combine runs of equal consecutive roots: one (root, XOR of the run's values) per run.

    XOR updates of one tree commute, so this is the same update in fewer pairs; the pairs an
    instance sends come in runs (a sentence's words, emitted and acked together), so this
    shrinks them several-fold in O(n), without the sort a full group-by needs.
    """
    if roots.size < 2:
        return roots, values
    starts = np.flatnonzero(roots[1:] != roots[:-1]) + 1
    if starts.size == roots.size - 1:
        return roots, values  # no two neighbours share a tree
    starts = np.concatenate(([0], starts))
    return roots[starts], np.bitwise_xor.reduceat(values, starts)


# Up to this many (root, value) pairs, lists of ints beat NumPy (a NumPy call has a fixed cost
# whatever its size): here and in the stmgr's ledger (``stmgr.acking``).
SMALL_UPDATE_PAIRS = 64


def xor_runs_packed(roots: list[np.ndarray], values: list[np.ndarray]) -> tuple[bytes, bytes]:
    """Return ``xor_runs`` of the concatenated arrays, packed (``pack``) for a message.

    A small update (a turn's few tuples at a paced rate) is combined by one pass over Python
    ints: half the cost of the NumPy calls for a handful of pairs. No pairs: empty bytes.
    """
    total = sum(part.size for part in roots)
    if total > SMALL_UPDATE_PAIRS:
        combined = xor_runs(np.concatenate(roots), np.concatenate(values))
        return pack(combined[0]), pack(combined[1])
    out_roots: list[int] = []
    out_values: list[int] = []
    last = None
    for part_roots, part_values in zip(roots, values):
        for root, value in zip(part_roots.tolist(), part_values.tolist()):
            if root == last:
                out_values[-1] ^= value
            else:
                out_roots.append(root)
                out_values.append(value)
                last = root
    return pack_list(out_roots), pack_list(out_values)


def distinct_runs(roots: np.ndarray) -> np.ndarray:
    """Return ``roots`` with each run of equal neighbours kept once.

    A spout's new roots come one per row, or one per batch (the batch API), so this is each
    root once, without a sort.
    """
    if roots.size < 2:
        return roots
    return roots[np.concatenate(([True], roots[1:] != roots[:-1]))]
