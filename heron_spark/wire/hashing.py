"""The fields-grouping hash: a stable 64-bit hash of strings, vectorised over Arrow buffers.

Stable means the same in every process, run and machine (unlike Python's ``hash``), so equal
keys meet in one task wherever they are emitted. The hash is computed with NumPy straight from
an Arrow string (or binary) array's offsets and bytes, with no Python object per value: each
string's bytes are summed as a polynomial modulo 2**64, then mixed with its length through
SplitMix64's finaliser (``contract.key_groups.text_hash`` is the definition, in plain Python:
key groups and keyed state use the same hash).

The polynomial of every string comes from one running sum over the array's bytes: byte ``t``
of the buffer adds ``(byte + 1) * M**t``, and the string on bytes ``[s, e)`` is the difference
of the running sum at ``e`` and at ``s``, times ``M**-s`` (``M`` is odd, so it has an inverse
modulo 2**64). That is three passes over the bytes and a few over the rows; the bytes are
taken ``_CHUNK_BYTES`` at a time, which bounds the tables of powers.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from heron_spark.contract import key_groups
from heron_spark.contract.key_groups import text_hash
from heron_spark.wire import arrow_numpy

DICTIONARY_MIN_ROWS = 2048  # from this many values on, long values are hashed once per value
_DEDUPE_MIN_BYTES = 12      # ... when they average more bytes than this (the crossover)
_CHUNK_BYTES = 1 << 16      # bytes per running-sum pass: the power tables hold 1 MiB
_MULTIPLIER = key_groups.MULTIPLIER
_INVERSE = pow(_MULTIPLIER, -1, 1 << 64)
_COMBINE = np.uint64(key_groups.COMBINE)
_ONE = np.uint64(1)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_C1, _C2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_powers = np.ones(1, dtype=np.uint64)    # _MULTIPLIER ** t modulo 2**64, grown on demand
_inverses = np.ones(1, dtype=np.uint64)  # _INVERSE ** t modulo 2**64, grown on demand


def _geometric(base: int, size: int) -> np.ndarray:
    table = np.full(size, base, dtype=np.uint64)
    table[0] = 1
    return np.cumprod(table, dtype=np.uint64)  # wraps modulo 2**64, as intended


def _tables(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the powers and inverse powers of the multiplier for ``size`` bytes (size + 1)."""
    global _powers, _inverses
    if _inverses.size <= size:  # a chunk's worth, or one longer value's
        grown = max(size + 1, min(2 * _inverses.size, _CHUNK_BYTES + 1))
        _powers, _inverses = _geometric(_MULTIPLIER, grown), _geometric(_INVERSE, grown)
    return _powers, _inverses


def _mix(h: np.ndarray) -> np.ndarray:
    """Apply SplitMix64's finaliser to ``h`` in place (it spreads every bit); return it."""
    h ^= h >> _S30
    h *= _C1
    h ^= h >> _S27
    h *= _C2
    h ^= h >> _S31
    return h


def string_hash(array: pa.Array, dedupe: bool = True) -> np.ndarray:
    """Return the uint64 hash of each value of a string or binary ``array`` (no nulls).

    ``array`` may also be a dictionary array of them (each dictionary value is hashed once).
    With ``dedupe``, a big array of long values is dictionary-encoded first, so each distinct
    value is hashed once: that pays when values average more than ``_DEDUPE_MIN_BYTES``.
    """
    if pa.types.is_dictionary(array.type):
        return _hash_strings(array.dictionary)[arrow_numpy.numbers(array.indices, zero_copy_only=False)]
    if dedupe and len(array) >= DICTIONARY_MIN_ROWS \
            and _value_bytes(array) > _DEDUPE_MIN_BYTES * len(array):
        encoded = array.dictionary_encode()  # imports pyarrow.compute on first use
        return _hash_strings(encoded.dictionary)[arrow_numpy.numbers(encoded.indices)]
    return _hash_strings(array)


def _offsets(array: pa.Array) -> np.ndarray:
    """Return the value offsets of a string or binary ``array`` (a read-only view)."""
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    dtype = np.dtype(np.int64 if large else np.int32)
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array) + 1,
                         offset=array.offset * dtype.itemsize)


def _value_bytes(array: pa.Array) -> int:
    """Return how many bytes the values of a string or binary ``array`` hold together."""
    offsets = _offsets(array)
    return int(offsets[-1]) - int(offsets[0])


def _hash_strings(array: pa.Array) -> np.ndarray:
    count = len(array)
    if count == 0:
        return np.empty(0, dtype=np.uint64)
    offsets = _offsets(array).astype(np.intp)
    first = int(offsets[0])
    if first:
        offsets -= first
    total = int(offsets[-1])
    hashed = np.diff(offsets).astype(np.uint64)  # the lengths
    if total:
        data = np.frombuffer(array.buffers()[2], dtype=np.uint8, count=total, offset=first)
        if total <= _CHUNK_BYTES:
            sums = _polynomials(data, offsets)
        else:
            sums = np.empty(count, dtype=np.uint64)
            row = 0
            while row < count:  # rows whose bytes fit one chunk (a longer string alone)
                begin = int(offsets[row])
                end = int(np.searchsorted(offsets, begin + _CHUNK_BYTES, side="right")) - 1
                end = max(end, row + 1)
                stop = int(offsets[end])
                sums[row:end] = _polynomials(data[begin:stop], offsets[row:end + 1] - begin)
                row = end
        hashed ^= _mix(sums)
    return _mix(hashed)


def _polynomials(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Return sum over i of ``(data[s + i] + 1) * M**i`` for each string ``[s, e)`` of ``data``.

    ``offsets`` (intp, starting at 0) delimit the strings; modulo 2**64.
    """
    size = data.size
    powers, inverses = _tables(size)
    running = np.empty(size + 1, dtype=np.uint64)
    running[0] = 0
    terms = running[1:]
    np.add(data, _ONE, out=terms, dtype=np.uint64)
    terms *= powers[:size]
    np.cumsum(terms, out=terms)  # running[t]: the bytes before t, byte u weighted M**u
    sums = np.diff(running.take(offsets))
    sums *= inverses.take(offsets[:-1])
    return sums


def combine(columns: list[np.ndarray]) -> np.ndarray:
    """Combine per-column hashes of the same rows into one hash per row (``key_groups.combine``)."""
    combined = columns[0]
    for hashed in columns[1:]:
        combined = (combined * _COMBINE) ^ hashed
    return combined


__all__ = ["combine", "string_hash", "text_hash"]
