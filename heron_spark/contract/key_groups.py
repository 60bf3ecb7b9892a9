"""Key groups: the fixed number of shares (``topology.max.parallelism``) keyed state is cut into.

A key's group is the hash fields grouping gives its ``str`` form, modulo the maximum
parallelism; the same on every process and in every generation of a topology.
"""

from __future__ import annotations

DEFAULT_MAX_PARALLELISM = 128
MAX_PARALLELISM = "topology.max.parallelism"


def key_group(key, max_parallelism: int) -> int:
    """Return the key group (``0 <= group < max_parallelism``) of the state key ``key``."""
    from heron_spark.wire import tuple_batch

    digest = tuple_batch.key_hash([tuple_batch.canonical_keys([key])], dedupe=False)[0]
    return int(digest % max_parallelism)
