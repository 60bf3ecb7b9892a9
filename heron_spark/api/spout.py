"""The spout API (heronpy's ``Spout``), plus ``declare_exhausted`` for bounded sources."""

from __future__ import annotations

from typing import Any

from heron_spark.api.component import BaseComponent
from heron_spark.api.stream import Stream


class BaseSpout(BaseComponent):
    """What every spout can do to the runtime: emit, declare itself exhausted (heronpy's ``BaseSpout``)."""

    _is_spout = True

    def emit(self, tup, tup_id: Any = None, stream: str = Stream.DEFAULT_STREAM_ID,
             direct_task: int | None = None, need_task_ids: bool = False,
             timestamp: int | None = None, partition: Any = None):
        """Emit ``tup`` (values in declared field order) on ``stream``.

        ``tup_id`` makes the tuple reliable under at-least-once. ``direct_task`` names the target
        task on a direct stream. Returns the target task ids when ``need_task_ids`` is True.
        heron_spark: ``timestamp`` is the tuple's event time (int ms since the epoch; without
        it, the field named by ``topology.bolts.tuple.timestamp.field.name``, if set), and
        ``partition`` names the source partition it comes from (any hashable; default: this
        task): the spout's watermark is the minimum over its partitions (see
        ``heron_spark.api.event_time``).
        """
        return self.delegate.emit(tup, stream, tup_id, None, direct_task, need_task_ids,
                                  timestamp, partition)

    def advance_watermark(self, watermark_ms: int) -> None:
        """Say that every tuple this task emits from now on has a timestamp >= ``watermark_ms``.

        heron_spark: for sources that know their progress (an explicit watermark, as in tests);
        it goes downstream at once, after the tuples emitted before. The generated watermark
        never moves it back.
        """
        self.delegate.advance_watermark(watermark_ms)

    def set_watermark_partitions(self, partitions) -> None:
        """Name the source partitions this task reads (heron_spark, event time).

        Each one not heard from yet holds the task's watermark back until its first
        timestamped tuple (or until it is idle, ``heron.watermark.idle.ms``), so a partition
        that starts late does not find its tuples late; a partition no longer named stops
        counting. Without it a partition counts from its first tuple.
        """
        self.delegate.set_watermark_partitions(partitions)

    def declare_exhausted(self) -> None:
        """Tell the runtime this spout will emit nothing more (bounded sources only).

        Under at-least-once the spout ends only once all its tuple trees are closed; a
        ``fail`` meanwhile makes ``next_tuple`` run again (to replay), so declare exhaustion
        again once the replays are out.
        """
        self.delegate.declare_exhausted()


class Spout(BaseSpout):
    """A source of tuples. Runs in its own Heron Instance process, one per task.

    ``next_tuple`` is called in a loop on the instance's task-execution thread; it should emit
    a few tuples and return quickly. A bounded source calls ``declare_exhausted()`` once it has
    emitted everything: when every spout has, and every tuple is processed, the topology ends.
    """

    _is_spout = True

    def next_tuple(self) -> None:
        """Emit zero or more tuples; called repeatedly while the topology is active."""
        msg = f"{type(self).__name__} must implement next_tuple()"
        raise NotImplementedError(msg)

    def ack(self, tup_id: Any) -> None:
        """Handle the full processing of the tuple tree rooted at message id ``tup_id``."""

    def fail(self, tup_id: Any) -> None:
        """Handle the failure or timeout of the tuple tree rooted at ``tup_id``."""

    def activate(self) -> None:
        """Handle the topology's activation (also called at start)."""

    def deactivate(self) -> None:
        """Handle the topology's deactivation: ``next_tuple`` stops being called."""

    def close(self) -> None:
        """Release resources: called once before the instance process exits cleanly."""
