"""The fields-grouping hash: a stable 64-bit hash of strings, vectorised over Arrow buffers.

Stable means the same in every process, run and machine (unlike Python's ``hash``), so equal
keys meet in one task wherever they are emitted. The hash is computed with NumPy straight from
an Arrow string (or binary) array's offsets and bytes, with no Python object per value: each
string's bytes are summed as a polynomial modulo 2**64, then mixed with its length through
SplitMix64's finaliser. Cost is a few dozen NumPy calls per batch plus O(total bytes).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from heron_spark.wire import arrow_numpy

DICTIONARY_MIN_ROWS = 2048  # from this many values on, distinct values are hashed once
_MULTIPLIER = 0x100000001B3
_COMBINE = np.uint64(1000003)
_powers = np.ones(1, dtype=np.uint64)  # _MULTIPLIER ** i modulo 2**64, grown on demand


def _power_table(size: int) -> np.ndarray:
    global _powers
    if _powers.size < size:
        grown = np.full(max(size, 2 * _powers.size), _MULTIPLIER, dtype=np.uint64)
        grown[0] = 1
        _powers = np.cumprod(grown, dtype=np.uint64)  # wraps modulo 2**64, as intended
    return _powers


def _mix(h: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: spread every input bit over the output (arrays only)."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def string_hash(array: pa.Array, dedupe: bool = True) -> np.ndarray:
    """Return the uint64 hash of each value of a string or binary ``array`` (no nulls).

    ``array`` may also be a dictionary array of them. With ``dedupe``, a big array is
    dictionary-encoded first, so each distinct value is hashed once (keys repeat: a batch of
    80,000 words holds a few thousand).
    """
    if pa.types.is_dictionary(array.type):
        return _hash_strings(array.dictionary)[arrow_numpy.numbers(array.indices, zero_copy_only=False)]
    if dedupe and len(array) >= DICTIONARY_MIN_ROWS:
        encoded = array.dictionary_encode()  # imports pyarrow.compute (~9 MB) on first use
        return _hash_strings(encoded.dictionary)[arrow_numpy.numbers(encoded.indices)]
    return _hash_strings(array)


def _hash_strings(array: pa.Array) -> np.ndarray:
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    count = len(array)
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64 if large else np.int32)
    offsets = offsets[array.offset:array.offset + count + 1].astype(np.int64)
    first = int(offsets[0]) if count else 0
    lengths = np.diff(offsets)
    hashed = lengths.astype(np.uint64)
    total = int(offsets[-1]) - first if count else 0
    if total:
        data = np.frombuffer(buffers[2], dtype=np.uint8)[first:first + total]
        starts = offsets[:-1] - first
        position = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
        terms = (data.astype(np.uint64) + np.uint64(1)) * _power_table(int(lengths.max()))[position]
        nonempty = lengths > 0
        hashed[nonempty] ^= _mix(np.add.reduceat(terms, starts[nonempty]))
    return _mix(hashed)


_M64 = (1 << 64) - 1


def _mix_int(h: int) -> int:
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & _M64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & _M64
    return h ^ (h >> 31)


def text_hash(data: bytes) -> int:
    """Return the ``string_hash`` of one value given as its UTF-8 bytes, in plain Python.

    For a few new keys it costs microseconds where a NumPy call costs tens.
    """
    hashed = len(data)
    if data:
        total, power = 0, 1
        for byte in data:
            total = (total + (byte + 1) * power) & _M64
            power = (power * _MULTIPLIER) & _M64
        hashed ^= _mix_int(total)
    return _mix_int(hashed)


def combine(columns: list[np.ndarray]) -> np.ndarray:
    """Combine per-column hashes of the same rows into one hash per row."""
    combined = columns[0]
    for hashed in columns[1:]:
        combined = (combined * _COMBINE) ^ hashed
    return combined
