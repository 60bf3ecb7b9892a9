"""Key groups: which task owns a key, for routing and for keyed state. Written once.

``topology.max.parallelism`` (M) fixes a topology's number of key groups. A key's group is
its stable 64-bit hash modulo M, and the task index that owns group ``g`` among a component's
``p`` tasks is ``g * p // M`` (Flink's rule): each task owns one contiguous range of groups
(``key_group_range``), and a rescaled component hands whole groups from task to task. The
emitting instance routes a fields-grouped tuple by its key's group (``plan.grouping``), a
stateful task keeps its state per group (``instance.stateful``), and a restore after
``heron-spark update`` reads every group from the old task that owned it.

The hash is the fields grouping's (``wire.hashing`` computes the same numbers vectorised over
Arrow buffers): a value hashes through its ``str`` form's UTF-8 bytes (``str`` values as they
are), and a tuple of values (the key of a grouping on several fields) combines its items'
hashes as the grouping combines its key columns. So the state key ``word`` and a fields
grouping on the one field ``word`` give the same group, as do the state key ``(word, lang)``
and a grouping on ``("word", "lang")``.

Standard library only; the functions taking hashes work on ints and on NumPy uint64 arrays
alike. Any process, any thread.
"""

from __future__ import annotations

import functools
import struct

MAX_KEY_GROUPS = 1 << 15  # the largest topology.max.parallelism (2 bytes prefix a state key)
MULTIPLIER = 0x100000001B3  # of the polynomial over a value's bytes
COMBINE = 1000003           # folds the hashes of several key fields into one
_M64 = (1 << 64) - 1
# A rocksdb state's stored key starts with its key group, 2 bytes big-endian (the database is
# ordered by key group): ``GROUP_PREFIX.pack(group)``, ``GROUP_PREFIX.unpack_from(raw)[0]``.
GROUP_PREFIX = struct.Struct(">H")


def _mix(h: int) -> int:
    """SplitMix64's finaliser (``wire.hashing`` applies the same steps to arrays)."""
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & _M64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & _M64
    return h ^ (h >> 31)


def text_hash(data: bytes) -> int:
    """Return the fields-grouping hash of one value given as its UTF-8 bytes: the definition.

    The sum over the bytes of ``(byte + 1) * MULTIPLIER**i`` modulo 2**64, mixed, xor-ed with
    the length, mixed again.
    """
    hashed = len(data)
    if data:
        total, power = 0, 1
        for byte in data:
            total = (total + (byte + 1) * power) & _M64
            power = (power * MULTIPLIER) & _M64
        hashed ^= _mix(total)
    return _mix(hashed)


def value_bytes(value) -> bytes:
    """Return the bytes a key value hashes through (its ``str`` form, lone surrogates kept)."""
    text = value if type(value) is str else str(value)
    return text.encode("utf-8", "surrogatepass")


def combine(first: int, second: int) -> int:
    """Fold the hash of one more key field into the hash of the fields before it."""
    return ((first * COMBINE) & _M64) ^ second


def key_hash(key) -> int:
    """Return the 64-bit hash of a state key or a fields-grouping key (see the docstring)."""
    if type(key) is tuple and key:
        hashed = text_hash(value_bytes(key[0]))
        for item in key[1:]:
            hashed = combine(hashed, text_hash(value_bytes(item)))
        return hashed
    return text_hash(value_bytes(key))


def key_group(key, max_parallelism: int) -> int:
    """Return the key group of ``key`` among ``max_parallelism`` (topology.max.parallelism)."""
    return key_hash(key) % max_parallelism


def key_groups(hashes, max_parallelism: int):
    """Return the key group of each hash (an int or a NumPy uint64 array: the same type back)."""
    if max_parallelism & (max_parallelism - 1) == 0:  # a mask gives the same numbers, faster
        return hashes & (max_parallelism - 1)
    return hashes % max_parallelism


def task_of_key_group(group: int, parallelism: int, max_parallelism: int) -> int:
    """Return the index (0-based, among the component's tasks) of the task owning ``group``."""
    return group * parallelism // max_parallelism


def key_group_range(task_index: int, parallelism: int, max_parallelism: int) -> range:
    """Return the key groups task ``task_index`` of ``parallelism`` owns, one contiguous range.

    The inverse of ``task_of_key_group`` (empty only when parallelism > max_parallelism).
    """
    start = (task_index * max_parallelism + parallelism - 1) // parallelism
    stop = ((task_index + 1) * max_parallelism + parallelism - 1) // parallelism
    return range(start, stop)


@functools.lru_cache(maxsize=64)
def owners(parallelism: int, max_parallelism: int) -> tuple[int, ...]:
    """Return the owning task index of every key group, in group order (a lookup table)."""
    return tuple(task_of_key_group(g, parallelism, max_parallelism)
                 for g in range(max_parallelism))


__all__ = ["GROUP_PREFIX", "MAX_KEY_GROUPS", "key_group", "key_group_range", "key_groups", "key_hash",
           "owners", "task_of_key_group", "text_hash"]
