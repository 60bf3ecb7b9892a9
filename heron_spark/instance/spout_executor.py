"""A spout task's logic, without sockets.

``next_tuple`` slices, tuple trees under at-least-once, deactivation, Heron's spout metrics. It
calls ``next_tuple`` only while its output gate is open and the stmgr lets it emit. Event
time: the tuples' timestamps move the task's ``SourceWatermarks``, whose watermark (or
idleness) goes downstream every ``topology.bolts.watermark.event.interval.ms``. See
``executor.py`` for the turn the shells drive.
"""

from __future__ import annotations

import time
from collections import deque
from itertools import count, repeat

import numpy as np

from heron_spark.api.event_time import timestamp_ms as event_time_ms
from heron_spark.api.spout import Spout
from heron_spark.contract import metric_names
from heron_spark.api.event_time import WATERMARK_MAX, WATERMARK_MIN
from heron_spark.instance import batches, task_metrics, watermarks
from heron_spark.instance.acking import SpoutTrees
from heron_spark.instance.executor import TaskExecutor
from heron_spark.proto import physical_plan_pb2, stmgr_pb2
from heron_spark.wire import frames

_PREFIX_BYTES = frames.PREFIX_BYTES
_clock_ns = time.perf_counter_ns  # next_tuple latency: one read before and after each slice
_IDLE_SPOUT_WAIT_SECS = 0.001


class SpoutExecutor(TaskExecutor):
    """Runs a spout: ``next_tuple`` in slices while the stmgr lets it emit."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.trees: SpoutTrees | None = None  # a reliable spout's open trees
        self.exhausted = False
        self.announced = False                # the stmgr knows this spout is exhausted
        self.gated = False                    # the stmgr says the topology is congested
        self.routed = 0                       # this spout's tuples the stmgr has taken in
        self._unrouted_max = self.config.backpressure_high_water_tuples
        self.next_tuple_calls = 0  # Heron's __next-tuple-count
        self.next_tuple_ns = 0     # total time in next_tuple: __next-tuple-latency's numerator
        settings = self.decl.topology_config
        self.watermarks = watermarks.SourceWatermarks(
            settings.watermark_lag_ms, settings.watermark_idle_ms, self.clock())
        self._watermark_secs = settings.watermark_interval_ms / 1000.0
        self._next_watermark = self.clock() + self._watermark_secs
        # topology.bolts.tuple.timestamp.field.name: stream -> the field's index
        self._stamp_fields: dict[str, int] = {}
        if settings.timestamp_field is not None:
            self._stamp_fields = {
                name: stream.fields.index(settings.timestamp_field)
                for name, stream in self.decl.outputs.items()
                if settings.timestamp_field in stream.fields}

    # delegate API
    def emit(self, values, stream, tup_id, anchors, direct_task, need_task_ids,
             timestamp=None, partition=None):
        """Emit one tuple (the slow path); a message id ``tup_id`` opens a tree.

        A timestamp (given, or the stream's timestamp field's value) moves the watermark of
        ``partition``; a timestamp field whose value is no timestamp leaves the tuple without.
        """
        if timestamp is not None:
            if timestamp.__class__ is not int or not WATERMARK_MIN < timestamp < WATERMARK_MAX:
                timestamp = self._validated_timestamp(timestamp)
        elif self._stamp_fields:
            index = self._stamp_fields.get(stream)
            if index is not None and index < len(values):
                timestamp = event_time_ms(values[index])
        if timestamp is not None:
            self.watermarks.observe(timestamp, partition)
        if self.trees is None or tup_id is None:  # no tree: the stamping fast path
            return self.collector.emit_plain_stamped(values, stream, None, direct_task,
                                                     need_task_ids, timestamp)
        return self.collector.emit(values, stream, direct_task, need_task_ids,
                                   (self.trees.open(tup_id, stream),), timestamp)

    def advance_watermark(self, watermark_ms: int) -> None:
        """Raise the task's watermark to ``watermark_ms`` and send it now."""
        now = self.clock()
        if watermark_ms != WATERMARK_MAX:
            watermark_ms = self._validated_timestamp(watermark_ms)
        self.watermarks.advance(watermark_ms, now)
        status = self.watermarks.status(now)
        if status != self.watermark_sent:
            self.send_watermark(status, now)

    def set_watermark_partitions(self, partitions) -> None:
        """Track exactly ``partitions`` in the task's watermark."""
        self.watermarks.track(partitions, self.clock())

    def declare_exhausted(self) -> None:
        """Mark the spout out of input: once its trees close, the stmgr is told."""
        self.exhausted = True

    def emit_batch(self, data, stream: str, parents, tup_id) -> None:
        """``BatchSpout.emit_batch``: with a message id (at-least-once) all rows are one tree."""
        fields = self.collector.stream_fields(stream)
        root = self.trees.open(tup_id, stream) if self.trees is not None and tup_id is not None else None
        for batch in batches.as_batches(data, fields, self.component_name, stream):
            roots = None
            if root is not None:
                rows = batch.num_rows
                roots = (np.full(rows, root, dtype=np.uint64), np.ones(rows, dtype=np.int64))
            self.collector.emit_batch(batch, stream, roots)

    def _configure(self, config: dict) -> None:
        # A timestamp field: every emit reads it, so the general emit, no fast path.
        fast = not self._stamp_fields
        if self.reliable:
            settings = self.decl.topology_config  # this component's view
            self.trees = SpoutTrees(self.task_id, settings.message_timeout_or_none_secs,
                                    settings.max_spout_pending, clock=self.clock)
            self.collector.open_tree = self.trees.open
            if fast:
                self._bind(Spout, "emit", self.collector.spout_emit_tracked)
        elif fast:
            self._bind(Spout, "emit", self.collector.spout_emit_plain)

    def _initialized(self, config: dict) -> None:
        if not self.paused:  # deployed deactivated: ``activate`` comes with the activation
            self.component.activate()

    def set_paused(self, paused: bool) -> None:
        """Deactivate (``paused``) or activate the spout, as Heron does.

        ``deactivate()`` once, then no ``next_tuple`` until ``activate()``; acks and fails still
        arrive meanwhile.
        """
        if paused == self.paused:
            return
        self.paused = paused
        if not self.started:
            return  # start() reads ``paused``
        if paused:
            self.collector.flush_all()  # what it emitted before goes out now
            self.component.deactivate()
        else:
            self.component.activate()
        self.logger.info("spout task %d %s", self.task_id,
                         "deactivated" if paused else "activated")

    # the loop
    def may_emit(self) -> bool:
        """Return whether ``next_tuple`` may run now."""
        if self.gated or self.exhausted or self.held or self.paused:
            return False
        if self.trees is not None and self.trees.full:
            return False
        return self.collector.sent + self.collector.buffered < self.routed + self._unrouted_max

    def _run(self, now: float) -> bool:
        """Run a slice of ``next_tuple`` calls, when the output gate is open and it may emit."""
        gate, queued = self.gate, self.output_queued
        if gate.check(queued()) and self.may_emit():
            emitted = self.run_slice(now)
            gate.check(queued())  # a slice that ended past the mark closes the gate
            return emitted
        return False

    def _wake_at(self, now: float, busy: bool) -> float | None:
        return now if busy else now + self.wait_secs(now)

    def run_slice(self, now: float) -> bool:
        """Call ``next_tuple`` until it emits nothing, may not emit more, or the slice is over.

        The slice is ``heron.batch.flush.interval.ms``; return whether it emitted.
        """
        collector = self.collector
        next_tuple = self.component.next_tuple
        clock = self.clock
        queued, out_high = self.output_queued, self.gate.high
        end = now + self._turn_secs
        limit = self.routed + self._unrouted_max
        trees = self.trees
        emitted_any = False
        started_ns = _clock_ns()
        for calls in count(1):  # noqa: B007 - read after the loop: a C-level call counter
            before = collector.sent + collector.buffered
            next_tuple()
            after = collector.sent + collector.buffered
            if after == before:
                break
            emitted_any = True
            if self.exhausted or self.gated or after >= limit or \
                    (trees is not None and trees.full) or clock() >= end or queued() > out_high:
                break
        self.next_tuple_ns += _clock_ns() - started_ns
        self.next_tuple_calls += calls
        return emitted_any

    def end_turn(self, now: float, force: bool = False) -> None:
        """Send what was emitted (unless it lingers); tell the stmgr once the spout is done."""
        done = self.exhausted and not self.announced and not self.trees
        if self.exhausted and self.watermark_sent != WATERMARK_MAX and not self.announced:
            # Out of input: nothing more comes but replays. Windows downstream fire (and ack)
            # now, not after the trees they hold time out; a tuple replayed later is late. The
            # watermark follows what was emitted and goes before the announcement.
            self.collector.flush_all()
            self.watermarks.advance(WATERMARK_MAX, now)
            self.watermark_frames(WATERMARK_MAX, now)
        elif not self.lingers(now, force or done):
            self.collector.flush_all()
        if done:
            self.control_message(stmgr_pb2.InstanceToStmgr(
                exhausted=stmgr_pb2.InstanceExhausted(task_id=self.task_id)))
            self.announced = True
            self.logger.info("spout task %d exhausted", self.task_id)

    def next_deadline(self, now: float) -> float:
        """Return when the loop must come back at the latest: also the watermark."""
        return min(super().next_deadline(now), self._next_watermark)

    def wait_secs(self, now: float) -> float:
        """How long the loop may wait for input when ``next_tuple`` did not emit."""
        wait = max(0.0, self.next_deadline(now) - now)
        if self.may_emit():
            return min(wait, _IDLE_SPOUT_WAIT_SECS)
        if self.trees is not None and len(self.trees) and not self.announced:
            return min(wait, 0.01)  # trees open: wake for their timeouts
        return wait

    def on_frame(self, kind: int, frame: bytes) -> None:
        """Handle one control frame from the stmgr: closed trees, the gate, activation, the rest."""
        if kind != frames.CONTROL:
            return
        message = stmgr_pb2.StmgrToInstance()
        message.ParseFromString(memoryview(frame)[_PREFIX_BYTES:])
        body = message.WhichOneof("body")
        if body == "trees":
            self._close_trees(message.trees)
        elif body == "gate":
            self.gated = message.gate.paused
            self.routed = message.gate.routed
        elif body == "activation":
            self.set_paused(message.activation.state == physical_plan_pb2.PAUSED)
        else:
            self.on_control(message)

    def on_time(self, now: float) -> None:
        """Run what is due: user metrics, the watermark, ``fail`` for every tree that timed out."""
        super().on_time(now)
        if now >= self._next_watermark:
            self._next_watermark = now + self._watermark_secs
            self._tell_watermark(now)
        if self.trees is not None:
            fail = self.component.fail
            if self.hooks is not None:
                fail = self.hooks.spout_failing(fail, repeat((self.trees.timeout or 0.0) * 1000.0))
            for message_id in self.trees.expired():
                self.exhausted = False  # a bounded spout replays, then declares exhaustion again
                fail(message_id)

    def _tell_watermark(self, now: float) -> None:
        """Send the task's watermark or idleness downstream when it changed, or is due again.

        A spout held back (backpressure, deactivated, waiting for a restore) is not idle.
        """
        if self.announced:
            return  # its END_OF_STREAM went out: +infinity downstream
        marks = self.watermarks
        if self.gated or self.paused or self.held or not self.gate.open or \
                (self.trees is not None and self.trees.full):
            marks.hold(now)
        status = marks.status(now)
        if status != self.watermark_sent or now >= self._watermark_resend_at:
            self.send_watermark(status, now)

    def current_watermark(self) -> int:
        """Return this task's watermark (``WATERMARK_MAX`` once it ended)."""
        return WATERMARK_MAX if self.announced else self.watermarks.watermark

    def time_state(self) -> dict | None:
        """Return the watermark generator's progress, for a checkpoint."""
        return {"source": self.watermarks.snapshot()}

    def restore_time_state(self, saved: dict) -> None:
        """Start the watermark generator from a checkpoint's progress."""
        source = saved.get("source")
        if source is not None:
            self.watermarks.restore(source, self.clock())

    def _close_trees(self, done: stmgr_pb2.TreesDone) -> None:
        if self.trees is None:
            return
        ack, fail = self.component.ack, self.component.fail
        if self.hooks is not None:  # the trees' ages, before close() forgets them
            ack = self.hooks.spout_acking(ack, self.trees.ages_ms(done.acked))
            fail = self.hooks.spout_failing(fail, self.trees.ages_ms(done.failed))
        acked, failed = self.trees.close(done.acked, done.failed)
        deque(map(ack, acked), maxlen=0)  # one ack(message id) each, looped in C
        for message_id in failed:
            self.exhausted = False
            fail(message_id)

    def close(self) -> None:
        """End the task cleanly: hooks' ``clean_up``, the spout's ``close``, last metrics."""
        if not self.started:
            return
        try:
            if self.hooks is not None:
                self.hooks.clean_up()
            self.component.close()
        except Exception:  # noqa: BLE001 - we are exiting anyway; keep the trace in the log
            self.logger.exception("spout close() failed")
        super().close()

    def add_metrics(self, add) -> None:
        """Add this task's counters and Heron's spout metrics to a metrics publish."""
        super().add_metrics(add)
        trees = self.trees
        if trees is not None:
            add(name=metric_names.ACK_COUNT, value=trees.acked)
            add(name=metric_names.FAIL_COUNT, value=trees.failed)
            add(name=metric_names.TIMEOUT_COUNT, value=trees.timed_out)
            add(name=metric_names.PENDING_TREES, value=len(trees))
            add(name=metric_names.COMPLETE_LATENCY_MS_TOTAL, value=trees.latency_ms_total)
        task_metrics.add_spout_metrics(add, self.means, self)
