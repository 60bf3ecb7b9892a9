"""A spout reading Kafka topics with offsets tied to the topology's reliability mode.

Each record is emitted as ``(key, value, topic, partition, offset, timestamp)``: key and value
are bytes (or None), ``timestamp`` is the record's Kafka timestamp in milliseconds (None when
the broker gave none). A ``kafka.decoder`` (a picklable callable taking those six values and
returning a tuple) with ``kafka.output.fields`` emits its own fields instead.

Which task reads which partition (``kafka.assignment``):

- ``static`` (the default): partitions are spread over the spout's tasks by index
  (``kafka_offsets.assign_partitions``), not by the consumer group's rebalancing protocol: the
  split is a pure function of the partition list and the parallelism, so a restarted task reads
  the same partitions at once (no group rebalance to wait for), an ``update`` of the
  parallelism moves each partition to exactly one new owner, and every partition's offsets stay
  in one task's checkpoints (effectively once).
- ``group``: every task joins the consumer group (``subscribe``) and Kafka's cooperative-sticky
  rebalancing spreads the partitions over the tasks alive (and any other consumer of the same
  group). When a partition is revoked from a task, the task first commits, synchronously, the
  offset below which every record of it is done (at-least-once: acked), then forgets the
  partition's records in flight: their late acks are ignored and their fails not replayed by
  it, as the new owner reads on from that commit (records after it may be seen twice). A lost
  partition (the task was out of the group too long) is forgotten without a commit. A task
  killed with ``kill -9`` keeps its partitions until the group's ``session.timeout.ms``
  (librdkafka's default is 45 s; ``kafka.properties`` may set it lower); its restarted instance
  joins as a new member. Refused under effectively once (``kafka_config.check_reliability``).

The group (``kafka.group.id``) stores the committed offsets, which is where a task taking over
a partition starts. New partitions and topics matching ``kafka.pattern`` are picked up every
``kafka.metadata.refresh.secs``.

Offsets per reliability mode:

- at-least-once: a record's offset is committed to the group only once the tuple trees of it
  and of every record before it in its partition are acked (``OffsetTracker``); a failed or
  timed-out record is emitted again. After a crash, or a kill of the whole topology and a
  resubmit, reading resumes at the committed offsets: records after them may be seen twice.
- at-most-once: offsets are committed as records are emitted (every
  ``kafka.commit.interval.secs``); a crash loses what was emitted and not processed.
- effectively-once (a ``TwoPhaseStatefulComponent``): the offsets are part of each checkpoint
  (``init_state`` / ``pre_save``); after a failure every task seeks back to its partitions'
  checkpointed offsets. A checkpoint's offsets are committed to the group in its
  ``post_save``, once the checkpoint is committed (never before: a rollback to no checkpoint
  at all starts from the group's offsets, which must still be those the run started from), so
  lag tools see them and a topology submitted afresh starts there. A bounded input commits its
  end offsets when it is exhausted, as the sinks commit their output at the end of input.

With ``kafka.bounded: True`` a task reads its partitions up to the end offsets they had when it
started (as a batch read of Kafka does), commits, and declares itself exhausted once every
record it emitted is acked; the topology then ends as a bounded one does. In group mode a task
notes every partition's end when it starts, and declares itself exhausted (and leaves the
group) once nothing of its own is pending and the group's committed offsets reach every end.

Latency: ``next_tuple`` takes every record the client has already fetched without waiting;
only when there is none does it wait, in ``poll``, which returns as soon as a record arrives,
for at most ``kafka.poll.timeout.ms`` (5 ms: how long an idle spout holds its task's turn).
The consumer asks the broker with ``fetch.wait.max.ms`` 10 (see
``kafka_config.CONSUMER_DEFAULTS``); ``kafka.properties`` overrides either.

Event time (``kafka.event.time``, on by default): each tuple's event time is its record's Kafka
timestamp, and the task keeps a watermark per partition it reads
(``Spout.set_watermark_partitions``): a partition holds it back from its assignment until its
first record, or until it has been idle for ``heron.watermark.idle.ms``; records without a
timestamp go on without one. See the event-time guide.

Metric: ``__kafka-lag/<topic>/<partition>``, the records between the task's read position and
the partition's end (the high watermark the client last fetched), per partition it reads,
sampled every ``LAG_BUCKET_SECS``.
Runs in a Heron Instance, on the task thread; ``confluent_kafka`` is imported only there.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

from heron_spark.api.metrics import IMetric
from heron_spark.api.spout import Spout
from heron_spark.api.state import TwoPhaseStatefulComponent
from heron_spark.api.stream import Stream
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.errors import ConnectorError, TopologyRuntimeError, TopologyValueError
from heron_spark.io import kafka_config as kc
from heron_spark.io.kafka_offsets import (OffsetTracker, TopicPartition, assign_partitions,
                                          parse_state_key, state_key)

LAG_METRIC = "__kafka-lag"
LAG_BUCKET_SECS = 2  # how often the lag is sampled (cheap: the client's cached watermarks)
GROUP_END_CHECK_SECS = 0.2  # bounded group mode: how often the group's commits are read
COMMITTED_RETRY_SECS = 0.05  # the group's coordinator moving: how soon it is asked again
LEAVE_GROUP_SECS = 10.0  # group mode's close: how long it waits for the revoke of what it holds
STATE_KEY = "kafka_offsets"
_LOG = logging.getLogger(__name__)


class _Lag(IMetric):
    """``{topic/partition: records behind the high watermark}`` of one task's partitions."""

    def __init__(self, spout: "KafkaSpout") -> None:
        self._spout = spout

    def get_value_and_reset(self):
        """Return the lag per partition (partitions without a fetched watermark are left out)."""
        return self._spout.lag()


class KafkaSpout(Spout, TwoPhaseStatefulComponent):
    """See the module docstring. Configure through the component config (``kafka.*`` keys)."""

    outputs = [Stream(fields=list(kc.SPOUT_FIELDS))]

    @classmethod
    def _check_in_topology(cls, name, config, settings) -> None:
        """Refuse group assignment under effectively once (see the module docstring)."""
        kc.check_reliability(config, name, settings.effectively_once)

    @classmethod
    def spec(cls, name=None, par=1, inputs=None, config=None, optional_outputs=None):
        """Return the spec, with the config checked (no broker is contacted here)."""
        config = kc.spout_settings(config or {}, component=name)
        spec = super().spec(name=name, par=par, inputs=inputs, config=config,
                            optional_outputs=optional_outputs)
        if config.get(kc.OUTPUT_FIELDS):
            spec.outputs = [Stream(fields=list(config[kc.OUTPUT_FIELDS])),
                            *(optional_outputs or [])]
        return spec

    _checkpointed: Any = None  # effectively once: the task's State (set by init_state)

    def init_state(self, stateful_state) -> None:
        """Keep the checkpointed state (effectively once): the offsets live there."""
        self._checkpointed = stateful_state

    def pre_save(self, checkpoint_id) -> None:
        """Put the read positions into the state; keep them for ``post_save``."""
        offsets = self._tracker.offsets()
        self._checkpointed.put(STATE_KEY, {state_key(tp): off for tp, off in offsets.items()})
        self._saved[int(checkpoint_id)] = offsets

    def post_save(self, checkpoint_id) -> None:
        """Commit the offsets of the newest checkpoint up to ``checkpoint_id`` to the group."""
        due = [cid for cid in self._saved if cid <= int(checkpoint_id)]
        if due:
            offsets = self._saved[max(due)]
            for cid in due:
                del self._saved[cid]
            self._commit(offsets, asynchronous=True)

    def pre_restore(self, checkpoint_id) -> None:
        """Close the consumer before a rollback (the restored spout opens its own)."""
        self.close()

    # ---- life cycle ----------------------------------------------------------------------
    def initialize(self, config, context):
        """Connect, check the topics, take this task's partitions and seek to their offsets."""
        self._ck = kc.client()
        self._name = context.get_component_id()
        self._config = config = kc.spout_settings(config, component=self._name)
        self._index = context.get_task_index()
        self._tasks = context.get_component_parallelism(self._name) or 1
        mode = TopologyConfig.from_config(config)
        self._reliable = mode.at_least_once
        self._stateful = self._checkpointed is not None
        kc.check_reliability(config, self._name, self._stateful)
        self._group = config[kc.ASSIGNMENT] == kc.GROUP
        self._task_id = context.get_task_id()
        properties = {**kc.consumer_properties(config), "on_commit": self._on_commit}
        # (kafka.properties may set an eager strategy: the callbacks then get whole assignments)
        self._cooperative = "cooperative" in str(properties.get("partition.assignment.strategy"))
        self._consumer = self._ck.Consumer(properties)
        self._saved: dict[int, dict[TopicPartition, int]] = {}  # checkpoint -> its offsets
        self._reset = str(properties["auto.offset.reset"])
        self._tracker = OffsetTracker()
        # at-least-once: (values, timestamp) of pending records
        self._records: dict[tuple, tuple] = {}
        self._replay: collections.deque = collections.deque()
        self._restored: dict[TopicPartition, int] = {}
        if self._stateful:
            saved = self._checkpointed.get(STATE_KEY) or {}
            self._restored = {parse_state_key(k): int(v) for k, v in saved.items()}
        self._decoder = config.get(kc.DECODER)
        self._event_time = bool(config[kc.EVENT_TIME])
        self._per_call = int(config[kc.MAX_RECORDS_PER_CALL])
        self._poll_secs = float(config[kc.POLL_TIMEOUT_MS]) / 1000.0
        self._commit_every = float(config[kc.COMMIT_INTERVAL_SECS])
        self._refresh_every = float(config[kc.METADATA_REFRESH_SECS])
        self._committed_at = self._refreshed_at = self._group_checked_at = time.monotonic()
        self._topics: dict[str, int] = {}  # group mode: the subscription
        self._closing = False
        self._callback_error: Exception | None = None  # raised by a rebalance callback
        try:
            if self._group:
                self._subscribe()
            else:
                self._refresh_assignment()
        except (TopologyValueError, ConnectorError):
            self._consumer.close()
            self._consumer = None
            raise
        self._ends: dict[TopicPartition, int] | None = None
        if config[kc.BOUNDED]:
            # static: this task's partitions; group: every partition, wherever it goes
            partitions = [(topic, p) for topic, count in self._topics.items()
                          for p in range(count)] if self._group else self._tracker.partitions()
            self._ends = {}
            for tp in partitions:
                low, high = self._consumer.get_watermark_offsets(
                    self._ck.TopicPartition(*tp), timeout=float(config[kc.CHECK_TIMEOUT_SECS]))
                self._ends[tp] = high if high > low else 0  # 0: nothing to read
        context.register_metric(LAG_METRIC, _Lag(self), LAG_BUCKET_SECS)

    # ---- group mode: Kafka's rebalancing assigns the partitions -----------------------------
    def _subscribe(self) -> None:
        """Check the topics and subscribe to them (again, when the topics changed)."""
        pattern = self._config.get(kc.PATTERN) or None
        topics = kc.check_cluster(self._consumer, self._name, self._config,
                                  None if pattern else kc.topics_of(self._config), pattern)
        if sorted(topics) != sorted(self._topics):
            self._consumer.subscribe(sorted(topics), on_assign=self._guard(self._on_assign),
                                     on_revoke=self._guard(self._on_revoke),
                                     on_lost=self._guard(self._on_lost))
            self.log(f"KafkaSpout {self._name} task {self._index} subscribes to "
                     f"{sorted(topics)} in group {self._config[kc.GROUP_ID]!r}")
        self._topics = topics

    def _guard(self, handler):
        """Return ``handler`` for librdkafka to call: an exception is kept, raised after poll."""
        def call(consumer, partitions) -> None:
            try:
                handler(consumer, partitions)
            except Exception as exc:  # noqa: BLE001 - raised by _raise_callback_error
                self._callback_error = exc
        return call

    def _raise_callback_error(self) -> None:
        error, self._callback_error = self._callback_error, None
        if error is not None:
            msg = f"the Kafka consumer's rebalance failed: {error}"
            raise TopologyRuntimeError(msg, component=self._name) from error

    def _on_assign(self, consumer, partitions) -> None:
        """Start reading the partitions given to this task, each at its start offset."""
        if not partitions or self._consumer is None or self._closing:
            return  # (closing: the client assigns them itself, then revokes them at once)
        tps = [(part.topic, part.partition) for part in partitions]
        starts = self._start_offsets(tps)
        for tp in tps:
            self._tracker.assign(tp, starts[tp])
        given = [self._ck.TopicPartition(t, p, starts[(t, p)]) for t, p in tps]
        if self._cooperative:
            consumer.incremental_assign(given)
        else:  # an eager strategy set in kafka.properties: everything was revoked before
            consumer.assign(given)
        self._assignment_changed(f"is given {starts}")

    def _on_revoke(self, consumer, partitions) -> None:
        """Commit what is done of the partitions taken away (synchronously), then drop them."""
        tps = {(part.topic, part.partition) for part in partitions}
        done = {tp: off for tp, off in self._tracker.offsets().items() if tp in tps}
        self._commit(done, asynchronous=False)
        self._give_up(consumer, partitions, f"gives up {done}")

    def _on_lost(self, consumer, partitions) -> None:
        """Drop partitions the group gave away already (no commit: they are not ours)."""
        self._give_up(consumer, partitions, "lost "
                      f"{sorted((part.topic, part.partition) for part in partitions)}")

    def _give_up(self, consumer, partitions, what: str) -> None:
        gone = {(part.topic, part.partition) for part in partitions}
        for tp in gone:
            self._tracker.revoke(tp)
        # late acks of these records are ignored, late fails not replayed: see the docstring
        kept = {tup_id: pending for tup_id, pending in self._records.items()
                if (tup_id[0], tup_id[1]) not in gone}
        if len(kept) < len(self._records):
            what += f" ({len(self._records) - len(kept)} records in flight left to the next owner)"
        self._records = kept
        if self._cooperative:
            consumer.incremental_unassign(partitions)
        else:
            consumer.unassign()
        self._assignment_changed(what)

    def _assignment_changed(self, what: str) -> None:
        if self._event_time:
            self.set_watermark_partitions(self._tracker.partitions())
        self.log(f"KafkaSpout {self._name} task {self._index} {what}; reads "
                 f"{self._tracker.partitions()}")

    def _group_done(self) -> bool:
        """Bounded group mode: tell whether the group committed every partition's end.

        Commits this task's offsets again first (synchronously: an asynchronous commit that
        failed in a rebalance would otherwise hold every task back).
        """
        assert self._ends is not None
        now = time.monotonic()
        if now - self._group_checked_at < GROUP_END_CHECK_SECS:
            return False
        self._group_checked_at = now
        self._commit(self._tracker.offsets(), asynchronous=False)
        try:
            found = self._consumer.committed(
                [self._ck.TopicPartition(*tp) for tp in self._ends],
                timeout=float(self._config[kc.CHECK_TIMEOUT_SECS]))
        except self._ck.KafkaException as exc:  # a rebalance, the coordinator moving: later
            self.log(f"KafkaSpout {self._name}: reading the group's offsets failed ({exc}); "
                     "retrying", "warning")
            return False
        # (an end of 0: nothing to read, whether or not the group ever committed there)
        return all(part.offset >= self._ends[(part.topic, part.partition)] or
                   not self._ends[(part.topic, part.partition)] for part in found)

    def _refresh_assignment(self) -> None:
        """Read the topics' partitions; assign this task its share, seeking new ones."""
        pattern = self._config.get(kc.PATTERN) or None
        topics = kc.check_cluster(self._consumer, self._name, self._config,
                                  None if pattern else kc.topics_of(self._config), pattern)
        everything = [(topic, p) for topic, count in topics.items() for p in range(count)]
        mine = set(assign_partitions(everything, self._index, self._tasks))
        current = set(self._tracker.partitions())
        if mine == current:
            return
        for tp in current - mine:
            self._tracker.revoke(tp)
        for tp, offset in self._start_offsets(sorted(mine - current)).items():
            self._tracker.assign(tp, offset)
        self._consumer.assign([self._ck.TopicPartition(t, p, self._tracker.position((t, p)))
                               for t, p in self._tracker.partitions()])
        if self._event_time:
            self.set_watermark_partitions(self._tracker.partitions())
        self.log(f"KafkaSpout {self._name} task {self._index}/{self._tasks} reads "
                 f"{self._tracker.offsets()}")

    def _start_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Return where to start each partition: checkpoint, else the group's commit, else reset."""
        ck = self._ck
        starts = {tp: self._restored[tp] for tp in partitions if tp in self._restored}
        rest = [tp for tp in partitions if tp not in starts]
        if rest:
            timeout = float(self._config[kc.CHECK_TIMEOUT_SECS])
            for found in self._committed([ck.TopicPartition(t, p) for t, p in rest], timeout):
                tp = (found.topic, found.partition)
                if found.offset >= 0:
                    starts[tp] = found.offset
                else:
                    low, high = self._consumer.get_watermark_offsets(
                        ck.TopicPartition(*tp), timeout=timeout)
                    starts[tp] = high if self._reset in ("latest", "largest", "end") else low
        return starts

    def _committed(self, parts: list, timeout: float) -> list:
        """Return the group's committed offsets of ``parts``, asking again within ``timeout``.

        While the group's coordinator moves or loads (a broker restarting, a new group) the
        broker answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS: asked again, not a
        failure of the task.
        """
        moving = (self._ck.KafkaError.NOT_COORDINATOR,
                  self._ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                  self._ck.KafkaError.COORDINATOR_NOT_AVAILABLE)
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._consumer.committed(
                    parts, timeout=max(deadline - time.monotonic(), 0.1))
            except self._ck.KafkaException as exc:
                error = kc.error_of(exc)
                if error is None or time.monotonic() >= deadline or \
                        not (error.retriable() or error.code() in moving):
                    raise
                time.sleep(COMMITTED_RETRY_SECS)

    def close(self):
        """Commit what is done and close the consumer."""
        consumer = getattr(self, "_consumer", None)
        if consumer is None:
            return
        if not self._stateful:
            self._commit(self._tracker.offsets(), asynchronous=False)
        if self._group:
            self._leave_group(consumer)
        self._closing = True
        consumer.close()
        self._consumer = None

    def _leave_group(self, consumer) -> None:
        """Unsubscribe and serve the revoke of what this task holds before ``close``.

        A cooperative consumer whose ``close`` itself revokes its partitions can hang in
        librdkafka (confluentinc/librdkafka#4527, #4883: seen here once, stuck in the revoke's
        ``incremental_unassign`` inside ``close``); revoked through ``poll`` first, as in any
        rebalance, ``close`` has nothing left to revoke. Records ``poll`` returns meanwhile
        are dropped: not emitted, so not committed; the next owner reads them.
        """
        consumer.unsubscribe()
        deadline = time.monotonic() + LEAVE_GROUP_SECS
        while consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.05)

    # ---- emitting ------------------------------------------------------------------------
    def next_tuple(self):
        """Emit replays of failed records first, then new records (up to a batch)."""
        if self._consumer is None:  # bounded group mode: left the group, exhausted
            self.declare_exhausted()
            return
        emitted = 0
        while self._replay and emitted < self._per_call:
            tup_id = self._replay.popleft()
            pending = self._records.get(tup_id)
            if pending is not None:
                self.emit(pending[0], tup_id=tup_id, timestamp=pending[1],
                          partition=(tup_id[0], tup_id[1]))
                emitted += 1
        if self._ends is not None and self._read_to_end():
            if not self._records and not self._replay:
                self._commit(self._tracker.to_commit(), asynchronous=False)
                if not self._group:
                    self.declare_exhausted()
                elif self._group_done():
                    self.close()  # leave the group: nothing is left to read
                    self.declare_exhausted()
                    return
            if not self._group:
                return
            # group mode polls on: rebalances are served in poll, and may bring partitions
        if emitted < self._per_call:
            for message in self._fetched(self._per_call - emitted, wait=not emitted):
                self._emit_message(message)
        now = time.monotonic()
        if not self._stateful and now - self._committed_at >= self._commit_every:
            self._commit(self._tracker.to_commit(), asynchronous=True)
        if self._ends is None and now - self._refreshed_at >= self._refresh_every:
            self._refreshed_at = now
            if self._group:
                self._subscribe()
            else:
                self._refresh_assignment()

    def _fetched(self, most: int, wait: bool) -> list:
        """Return up to ``most`` records the client has fetched, at once if it has any.

        ``consume(n, timeout)`` returns only when it has ``n`` records or the timeout is over,
        which would hold every record of a slow stream for the whole timeout; so take what is
        there without waiting, and only when there is nothing (and ``wait``) block in ``poll``,
        which returns as soon as one record arrives, for at most ``kafka.poll.timeout.ms``.
        """
        messages = self._consumer.consume(num_messages=most, timeout=0)
        self._raise_callback_error()
        if messages or not wait or self._poll_secs <= 0:
            return messages
        first = self._consumer.poll(self._poll_secs)
        self._raise_callback_error()
        if first is None:
            return []
        return [first, *self._consumer.consume(num_messages=most - 1, timeout=0)] \
            if most > 1 else [first]

    def _read_to_end(self) -> bool:
        """Tell whether this task read each of its partitions up to its end."""
        ends = self._ends
        assert ends is not None
        return all(self._tracker.position(tp) >= ends.get(tp, 0)
                   for tp in self._tracker.partitions())

    def _emit_message(self, message) -> None:
        error = message.error()
        if error is not None:
            if error.code() == self._ck.KafkaError._PARTITION_EOF:
                return
            if error.code() == self._ck.KafkaError.UNKNOWN_TOPIC_OR_PART:
                msg = f"the topic {message.topic()!r} it reads is gone ({error.str()})"
                raise ConnectorError(msg, system=kc.SYSTEM, component=self._name,
                                     value=message.topic(),
                                     fix=f"create the topic again or correct {kc.TOPICS!r}",
                                     permanent=True)
            if error.fatal():
                msg = f"the Kafka consumer failed: {error.str()}"
                raise TopologyRuntimeError(msg, component=self._name)
            self.log(f"KafkaSpout {self._name}: {error.str()} (retrying)", "warning")
            return
        tp = (message.topic(), message.partition())
        offset = message.offset()
        if self._ends is not None and offset >= self._ends.get(tp, 0):
            return  # bounded: written after the task started
        if not self._tracker.emitted(tp, offset, reliable=self._reliable):
            return
        kind, stamp = message.timestamp()
        if kind == self._ck.TIMESTAMP_NOT_AVAILABLE:
            stamp = None
        values = (message.key(), message.value(), tp[0], tp[1], offset, stamp)
        if self._decoder is not None:
            values = tuple(self._decoder(*values))
        if not self._event_time:
            stamp = None
        if self._reliable:  # (the generation tells a record emitted again after a revoke)
            tup_id = (tp[0], tp[1], offset, self._tracker.generation(tp))
            self._records[tup_id] = (values, stamp)
            self.emit(values, tup_id=tup_id, timestamp=stamp, partition=tp)
        else:
            self.emit(values, timestamp=stamp, partition=tp)

    def ack(self, tup_id):
        """Mark the record done: its offset is committed once every record below it is."""
        if self._records.pop(tup_id, None) is not None:
            self._tracker.acked((tup_id[0], tup_id[1]), tup_id[2])

    def fail(self, tup_id):
        """Emit the record again (its offset stays uncommitted until the replay is acked)."""
        if tup_id in self._records:
            self._replay.append(tup_id)

    # ---- offsets and metrics -------------------------------------------------------------
    def _commit(self, offsets: dict[TopicPartition, int], asynchronous: bool) -> None:
        self._committed_at = time.monotonic()
        if not offsets:
            return
        parts = [self._ck.TopicPartition(t, p, off) for (t, p), off in offsets.items()]
        try:
            self._consumer.commit(offsets=parts, asynchronous=asynchronous)
        except self._ck.KafkaException as exc:  # the next commit carries the same offsets
            self.log(f"KafkaSpout {self._name}: offset commit failed ({exc}); retrying later",
                     "warning")
            self._tracker.forget_commits()

    def _on_commit(self, error, partitions) -> None:
        """Make the next commit carry every offset again when an asynchronous one failed."""
        if error is not None:
            self._tracker.forget_commits()

    def lag(self) -> dict[str, int]:
        """Return ``{"topic/partition": records not yet read}`` from the cached watermarks."""
        out: dict[str, int] = {}
        if self._consumer is None:  # closed
            return out
        for tp in self._tracker.partitions():
            low, high = self._consumer.get_watermark_offsets(self._ck.TopicPartition(*tp),
                                                             cached=True)
            if high >= 0:
                out[f"{tp[0]}/{tp[1]}"] = max(0, high - self._tracker.position(tp))
        return out
