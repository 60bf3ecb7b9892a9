"""Which Kafka offsets a spout task may commit, and which partitions it reads: no I/O.

``OffsetTracker`` follows every record a ``KafkaSpout`` task emitted and not yet saw acked, per
partition. The offset it may commit for a partition (Kafka's "next offset to read") is the
lowest offset still pending, or one past the highest offset emitted when nothing is pending:
so a commit never covers a record whose tuple tree has not been acked, and a restart from the
committed offset replays exactly the records not known to be done (at-least-once). Failed
records stay pending until their replay is acked.

``assign_partitions`` spreads partitions over a spout's tasks by index: the sorted
``(topic, partition)`` list, task ``k`` of ``n`` takes every ``n``-th from position ``k``. It is
a pure function of the partition list and the parallelism, so a restarted task takes the same
partitions, and after ``update`` of the parallelism every partition has exactly one owner again.

Pure data structures: single-threaded (the instance's task thread), any process.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

TopicPartition = tuple[str, int]
"""A partition: ``(topic, partition number)``."""


def assign_partitions(partitions: Iterable[TopicPartition], task_index: int,
                      tasks: int) -> list[TopicPartition]:
    """Return the partitions task ``task_index`` of ``tasks`` reads (sorted)."""
    if tasks < 1 or not 0 <= task_index < tasks:
        msg = f"task index {task_index} is not within a component of {tasks} tasks"
        raise ValueError(msg)
    ordered = sorted(set(partitions))
    return ordered[task_index::tasks]


@dataclasses.dataclass
class _Partition:
    """Pending offsets and read position of one partition."""

    position: int                      # next offset to read from Kafka
    generation: int = 0                # which assignment of the partition this is
    pending: set[int] = dataclasses.field(default_factory=set)
    committed: int | None = None       # last offset handed out by ``to_commit``


class OffsetTracker:
    """Pending records per partition and the offsets safe to commit; see the module docstring."""

    def __init__(self) -> None:
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._assignments = 0

    def assign(self, tp: TopicPartition, position: int) -> None:
        """Start tracking ``tp``, reading from ``position`` (a committed or restored offset).

        Each assignment gets a new ``generation``: a record emitted under an earlier one (the
        partition was revoked, then came back) is told apart from the same offset emitted again.
        """
        self._assignments += 1
        self._partitions[tp] = _Partition(position=position, generation=self._assignments,
                                          committed=position)

    def generation(self, tp: TopicPartition) -> int:
        """Return the number of ``tp``'s current assignment (see ``assign``)."""
        return self._partitions[tp].generation

    def revoke(self, tp: TopicPartition) -> None:
        """Stop tracking ``tp`` (it moved to another task); its pending records are forgotten."""
        self._partitions.pop(tp, None)

    def partitions(self) -> list[TopicPartition]:
        """Return the tracked partitions, sorted."""
        return sorted(self._partitions)

    def __contains__(self, tp: object) -> bool:
        return tp in self._partitions

    def emitted(self, tp: TopicPartition, offset: int, *, reliable: bool = True) -> bool:
        """Note that the record at ``offset`` was emitted; return False if it is not ours.

        ``reliable``: the tuple waits for its ack (at-least-once); otherwise it counts as done
        at once (at-most-once, and effectively-once, where checkpoints cover it).
        """
        part = self._partitions.get(tp)
        if part is None or offset < part.position:
            return False  # revoked, or a record before a seek that the client still had
        part.position = offset + 1
        if reliable:
            part.pending.add(offset)
        return True

    def acked(self, tp: TopicPartition, offset: int) -> None:
        """Note that the record at ``offset`` was fully processed."""
        part = self._partitions.get(tp)
        if part is not None:
            part.pending.discard(offset)

    def is_pending(self, tp: TopicPartition, offset: int) -> bool:
        """Return whether the record at ``offset`` was emitted and not yet acked."""
        part = self._partitions.get(tp)
        return part is not None and offset in part.pending

    def pending_count(self) -> int:
        """Return the number of records emitted and not yet acked, over all partitions."""
        return sum(len(part.pending) for part in self._partitions.values())

    def safe_offset(self, tp: TopicPartition) -> int:
        """Return the offset to commit for ``tp``: every record below it is done."""
        part = self._partitions[tp]
        return min(part.pending) if part.pending else part.position

    def position(self, tp: TopicPartition) -> int:
        """Return the next offset this task reads from ``tp``."""
        return self._partitions[tp].position

    def offsets(self) -> dict[TopicPartition, int]:
        """Return the safe offset of every tracked partition."""
        return {tp: self.safe_offset(tp) for tp in sorted(self._partitions)}

    def to_commit(self) -> dict[TopicPartition, int]:
        """Return the safe offsets that moved since the last call (and remember them)."""
        moved = {}
        for tp, part in sorted(self._partitions.items()):
            safe = self.safe_offset(tp)
            if safe != part.committed:
                moved[tp] = safe
                part.committed = safe
        return moved

    def forget_commits(self) -> None:
        """Make the next ``to_commit`` return every partition (a commit failed)."""
        for part in self._partitions.values():
            part.committed = None

    def rewind(self, tp: TopicPartition, position: int) -> None:
        """Read ``tp`` again from ``position`` (a restored checkpoint): nothing is pending."""
        self.assign(tp, position)


def state_key(tp: TopicPartition) -> str:
    """Return the key a partition's offset has in a checkpointed state (``topic:partition``)."""
    return f"{tp[0]}:{tp[1]}"


def parse_state_key(key: str) -> TopicPartition:
    """Return the partition of a ``state_key``."""
    topic, _, number = key.rpartition(":")
    return topic, int(number)
