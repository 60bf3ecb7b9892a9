"""A bolt task's logic, without sockets.

``process`` for every tuple of every delivered batch (or ``process_batch``), acking, ticks, end
of input, Heron's bolt metrics. Its input waits while its output gate is closed. Event time:
each input tuple carries its batch row's timestamp, emits made while processing it inherit it,
and WATERMARK frames move the task's ``InputWatermarks``; when that advances,
``_watermark_advanced`` fires the event-time timers it reached (``instance.timers``), runs
``process_watermark`` and sends the watermark on. See
``executor.py`` for the turn the shells drive.
"""

from __future__ import annotations

import time
from itertools import repeat

import numpy as np
import pyarrow as pa

from heron_spark.api.batch import BatchBolt
from heron_spark.api.bolt import Bolt
from heron_spark.api.serializer import load_serializer_named
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.api.tuple import HeronTuple, TupleHelper
from heron_spark.contract import metric_names
from heron_spark.api.event_time import WATERMARK_MAX, WATERMARK_MIN
from heron_spark.instance import batches, task_metrics, watermarks
from heron_spark.instance.acking import AckBuffer
from heron_spark.instance.executor import TaskExecutor
from heron_spark.instance.timers import EVENT, PROCESSING, KeyedTimers, uses_timers
from heron_spark.proto import stmgr_pb2
from heron_spark.wire import arrow_numpy, frames, tree_ids, tuple_batch

_new_tuple = tuple.__new__
_data_head = frames.DATA_HEAD.unpack_from
_PREFIX_BYTES = frames.PREFIX_BYTES
_PROGRESS_SECS = 0.01    # a bolt reports its progress at most this often
ACK_HOLD_SECS = 0.005    # acks alone, no spout capped: they leave at most this often
# ... or once this many acked tuples wait: each is held (and its memory kept from the cache)
# until its ack leaves, and a frame of this many acks costs the stmgr little more than one
ACKS_HELD_MAX = 1024
_clock_ns = time.perf_counter_ns  # latency metrics: one read before and one after each batch


class BoltExecutor(TaskExecutor):
    """Runs a bolt: ``process`` for every tuple of every batch the stmgr delivers."""

    gates_input = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        inputs = {(sub.component, sub.stream) for sub in self.decl.inputs}
        self.acks = AckBuffer(only_input=next(iter(inputs)) if len(inputs) == 1 else None)
        self.auto_ack = False
        self._current: HeronTuple | None = None  # auto-ack: the tuple in process()
        self._settled = False                     # auto-ack: process() acked or failed it
        self.upstream = set(self.plan.upstream_tasks(self.task_id))
        self.input_marks = watermarks.InputWatermarks(self.upstream)
        self.watermark = WATERMARK_MIN  # the input watermark process_watermark last saw
        self.drained = False
        self._tick_secs = 0.0
        self._next_tick: float | None = None
        self._reported = 0
        self._next_progress = 0.0
        self._acks_due = 0.0  # acks with no emits to ride with leave at most once per _ack_secs
        # Acks alone leave at most once per linger; once per ACK_HOLD_SECS when no spout of the
        # topology caps its open trees (nothing but the spouts' ack() calls wait on them).
        self._ack_secs = self.config.batch_linger_ms / 1000.0
        components = self.plan.logical.components.values()
        if all(c.topology_config.max_spout_pending is None for c in components if c.is_spout):
            self._ack_secs = max(self._ack_secs, ACK_HOLD_SECS)
        self._held: list = []                     # data that came before start
        self.batch_mode = False                   # a BatchBolt: process_batch per batch
        # batch mode: the input batch's roots, as ``tuple_batch.root_lists`` gives them
        self._input_roots: tuple[np.ndarray, np.ndarray | None] | None = None
        self._input_failed = False
        # (task, stream) -> (component, width, its input_stats entry)
        self._sources: dict[tuple, tuple[str, int, list]] = {}
        # (component, stream) -> [executed tuples, ns executing them]: Heron's
        # __execute-count / __execute-latency per input, every input at 0 from the start
        self.input_stats: dict[tuple[str, str], list] = {
            (sub.component, sub.stream): [0, 0] for sub in self.decl.inputs}
        self.timers: KeyedTimers | None = None  # a bolt with on_timer's (set by _configure)

    # delegate API
    def emit(self, values, stream, tup_id, anchors, direct_task, need_task_ids,
             timestamp=None, partition=None):
        """Emit one tuple (the slow path), anchored to ``anchors`` or, auto-acking, the input.

        Without ``timestamp`` it carries its anchors' newest timestamp, else the input's.
        """
        roots: tuple[int, ...] = ()
        if self.reliable:
            if anchors is None and self._current is not None:
                anchors = (self._current,)  # auto-ack bolts anchor to their input
            if anchors:
                roots = _roots_of(anchors)
        if timestamp is not None:
            timestamp = self._validated_timestamp(timestamp)
        else:
            timestamp = _newest_timestamp(anchors) if anchors else None
            if timestamp is None:
                timestamp = self.collector.current_ts
        return self.collector.emit(values, stream, direct_task, need_task_ids, roots, timestamp)

    def ack(self, tup) -> None:
        """Record ``tup`` processed (at-least-once; nothing to do at-most-once)."""
        if self.reliable and self._settle(tup):
            self.acks.ack(tup)

    def fail(self, tup) -> None:
        """Record ``tup`` failed: its spouts replay their trees (at-least-once)."""
        if self.reliable and self._settle(tup):
            self.acks.fail(tup)

    def _settle(self, tup) -> bool:
        """Return False when ``tup`` is auto-ack's current input and was already settled."""
        if tup is not self._current:
            return True
        if self._settled:
            return False
        self._settled = True
        return True

    def declare_exhausted(self) -> None:
        """Bolts end when their inputs end; nothing to declare."""

    def emit_batch(self, data, stream: str, parents, tup_id) -> None:
        """``BatchBolt.emit_batch``: rows anchored to the input rows ``parents`` names."""
        fields = self.collector.stream_fields(stream)
        for batch in batches.as_batches(data, fields, self.component_name, stream):
            roots = None
            if self._input_roots is not None:
                roots = batches.anchored_roots(*self._input_roots, parents, batch.num_rows,
                                               self.component_name)
            self.collector.emit_batch(batch, stream, roots)

    def fail_batch(self) -> None:
        """``BatchBolt.fail_batch``: the current input batch fails when process_batch returns."""
        self._input_failed = True

    def _configure(self, config: dict) -> None:
        self.acks.component = self.component_name
        self.batch_mode = isinstance(self.component, BatchBolt)
        if self.reliable:
            self.auto_ack = bool(getattr(self.component, "auto_ack", False)) or \
                self.decl.topology_config.bolt_auto_ack
            if not self.auto_ack:  # auto-ack anchors to, and settles, the current input
                self._bind(Bolt, "emit", self.collector.emit_anchored)
                self._bind(Bolt, "ack", self.acks.acked.append)
                self._bind(Bolt, "fail", self.acks.failed.append)
        else:
            self._bind(Bolt, "emit", self.collector.emit_plain)
            self._bind(Bolt, "ack", _ignore)
            self._bind(Bolt, "fail", _ignore)
        self._tick_secs = self.decl.topology_config.tick_tuple_freq_secs
        if self._tick_secs > 0:
            self._next_tick = self.clock() + self._tick_secs
        if uses_timers(type(self.component)):  # before the state's load: it restores them
            self.timers = self.context.timers = KeyedTimers(self.component_name)
            if self.stateful is not None:
                self.stateful.timers = self.timers

    def _initialized(self, config: dict) -> None:
        # initialize may set the frequency in its config (window bolts do): read it again
        ticks = TopologyConfig.from_config(config, self.component_name).tick_tuple_freq_secs
        if ticks != self._tick_secs:  # set by initialize, as Heron's window bolts do
            self._tick_secs = ticks
            self._next_tick = self.clock() + ticks if ticks > 0 else None
        if self.reliable and not self.auto_ack and getattr(self.component, "auto_ack", False):
            self.auto_ack = True  # turned on in initialize: the settling path, not the fast one
            for name, fast in self._bound.items():
                if self.component.__dict__.get(name) is fast:
                    del self.component.__dict__[name]

    def _take_held(self) -> None:
        held, self._held = self._held, []
        for frame in held:
            self._on_data(frame)

    def drop_held_input(self, epoch: int) -> None:
        """Forget the data that came before start: a restore to ``epoch`` came after it.

        It is the rolled-back epoch's (a restarted process connected before the stmgr heard
        of the rollback): its tuples are replayed, and its watermarks are past the checkpoint
        the task starts from, so they would fire restored windows before their replayed tuples.
        """
        if self._held:
            rows = sum(_data_head(frame, _PREFIX_BYTES)[3] for frame in self._held)
            self.logger.info("task %d drops %d frames (%d tuples) that came before the restore "
                             "of epoch %d", self.task_id, len(self._held), rows, epoch)
            self._held = []

    # the loop
    def accepting(self) -> bool:
        """Return whether the shell should read more frames for this task now."""
        return not self._inbox and self.gate.check(self.output_queued())

    def _wake_at(self, now: float, busy: bool) -> float | None:
        if self._inbox and self.gate.open:
            return now  # the turn's time was up before its input: the rest next turn
        return self.next_deadline(now)

    def on_frame(self, kind: int, frame: bytes) -> None:
        """Handle one frame from the stmgr: a data batch (held until started) or a control."""
        if kind == frames.DATA:
            if self.started:
                self._on_data(frame)
            else:
                self._held.append(frame)
            return
        message = stmgr_pb2.StmgrToInstance()
        message.ParseFromString(memoryview(frame)[_PREFIX_BYTES:])
        self.on_control(message)

    def _on_data(self, frame: bytes) -> None:
        data_kind, src, _, rows, stream_length = _data_head(frame, _PREFIX_BYTES)
        if data_kind != frames.TUPLES:
            if data_kind == frames.WATERMARK:
                self._on_watermark(src, watermarks.decode(frames.data_stream(frame,
                                                                             stream_length)))
            elif data_kind == frames.END_OF_STREAM:
                self._on_end_of_stream(src)
            elif data_kind == frames.CHECKPOINT_MARKER and self.stateful is not None:
                self.checkpoint(int(frames.data_stream(frame, stream_length)))
            return
        stream = frames.data_stream(frame, stream_length)
        source = self._sources.get((src, stream))
        if source is None:
            component = self.plan.task_component[src]
            width = len(self.plan.logical.components[component].outputs[stream].fields)
            stats = self.input_stats.setdefault((component, stream), [0, 0])
            source = self._sources[(src, stream)] = (component, width, stats)
        component, width, stats = source
        started_ns = _clock_ns()
        batch = tuple_batch.decode(memoryview(frame)[frames.data_body_offset(stream_length):])
        if self.batch_mode:
            self._process_batch(batch, component, stream, src, width)
            self._count_executed(rows, stats, started_ns)
            return
        values = tuple_batch.rows(batch, width, load_serializer_named)
        process = self.component.process
        if self.hooks is not None:
            process = self.hooks.executing(process)
        now = time.time()
        stamps = tuple_batch.timestamps(batch)
        if stamps is not None:
            self._process_stamped(batch, values, stamps, component, stream, src, now, process)
            self._count_executed(rows, stats, started_ns)
            return
        roots: list | None = None
        root_column: pa.Array | None = None
        if self.reliable:
            root_index = batch.schema.get_field_index(tuple_batch.ROOT_COLUMN)
            if root_index >= 0:  # one tree per tuple, as usual
                # a run of rows in one tree shares its roots tuple; the acks take the column
                # itself (AckBuffer.take), once per turn for all the batches
                root_column = batch.column(root_index)
                roots = tuple_batch.single_roots(root_column)
            else:
                roots = tuple_batch.row_roots(batch)
                self.acks.single_root = False  # some tuples belong to no tree, or to several
        if roots is None:
            # tuples built by C-level iteration: no Python frame per tuple before process()
            for tup in map(_new_tuple, repeat(HeronTuple), zip(
                    repeat(None), repeat(component), repeat(stream), repeat(src),
                    values, repeat(now), repeat(()), repeat(None))):
                process(tup)
        else:
            key_index = batch.schema.get_field_index(tuple_batch.KEY_COLUMN)  # by name
            key_column = batch.column(key_index if key_index >= 0 else tuple_batch.KEY_COLUMN)
            tuples = map(_new_tuple, repeat(HeronTuple), zip(
                key_column.to_pylist(), repeat(component), repeat(stream), repeat(src), values,
                repeat(now), roots, repeat(None)))
            if self.auto_ack:
                self._process_auto_acked(tuples)
            elif root_column is not None:  # acked as delivered, they are acked by these columns
                delivered = list(tuples)
                self.acks.delivered(delivered, root_column, key_column, now, (component, stream))
                for tup in delivered:
                    process(tup)
            else:
                for tup in tuples:
                    process(tup)
        self._count_executed(rows, stats, started_ns)

    def _count_executed(self, rows: int, stats: list, started_ns: int) -> None:
        """Count a batch's ``rows`` executed, and its time since ``started_ns`` in ``stats``."""
        self.executed += rows
        stats[1] += _clock_ns() - started_ns  # Heron's __execute-latency: per batch, not per tuple
        stats[0] += rows

    def _process_stamped(self, batch, values: list, stamps: list, component: str, stream: str,
                         src: int, now: float, process) -> None:
        """Process a batch whose tuples carry timestamps: emits inherit each one's.

        One Python step per tuple more than the plain paths (the input's timestamp is set
        before each ``process``); at most once the bolt's ``emit`` is the stamping fast path
        meanwhile.
        """
        ids: list | None = None
        roots: list | None = None
        root_column = key_column = None
        if self.reliable:
            roots = tuple_batch.row_roots(batch)
            if roots is not None:
                key_column = batch.column(tuple_batch.KEY_COLUMN)
                ids = key_column.to_pylist()
                root_index = batch.schema.get_field_index(tuple_batch.ROOT_COLUMN)
                if root_index >= 0:
                    root_column = batch.column(root_index)
                else:
                    self.acks.single_root = False
        tuples = list(map(_new_tuple, repeat(HeronTuple), zip(
            repeat(None) if ids is None else ids, repeat(component), repeat(stream),
            repeat(src), values, repeat(now), repeat(()) if roots is None else roots, stamps)))
        collector = self.collector
        component_dict = self.component.__dict__
        plain = component_dict.get("emit")
        swapped = plain is not None and plain is self._bound.get("emit") and not self.reliable
        if swapped:
            component_dict["emit"] = collector.emit_plain_stamped
        try:
            if roots is not None and self.auto_ack:
                self._process_auto_acked(tuples, stamped=True)
                return
            if root_column is not None:
                self.acks.delivered(tuples, root_column, key_column, now, (component, stream))
            for tup in tuples:
                collector.current_ts = tup[7]
                process(tup)
        finally:
            collector.current_ts = None
            if swapped:
                component_dict["emit"] = plain

    def _process_batch(self, batch, component: str, stream: str, src: int, width: int) -> None:
        view = batches.input_view(batch, width, component, stream, src)
        tracked = self.reliable and tuple_batch.KEY_COLUMN in batch.schema.names
        self._input_roots = tuple_batch.root_lists(batch) if tracked else None
        self._input_failed = False
        started_ns = _clock_ns()
        try:
            self.component.process_batch(view)
        finally:
            roots, self._input_roots = self._input_roots, None
        if roots is not None:
            flat, counts = roots
            spent_ns = (_clock_ns() - started_ns) * batch.num_rows  # each row waited for all
            self.acks.tally((component, stream)).add(batch.num_rows, spent_ns,
                                                     not self._input_failed)
            if self._input_failed:
                self.acks.fail_rows(flat, batch.num_rows)
            else:
                keys = arrow_numpy.numbers(batch.column(tuple_batch.KEY_COLUMN))
                self.acks.ack_rows(flat, keys if counts is None else np.repeat(keys, counts),
                                   batch.num_rows)

    def _process_auto_acked(self, tuples, stamped: bool = False) -> None:
        process = self.component.process
        ack = self.acks.ack
        if self.hooks is not None:
            process, ack = self.hooks.executing(process), self.hooks.acking(ack)
        collector = self.collector
        try:
            for tup in tuples:
                self._current, self._settled = tup, False
                if stamped:
                    collector.current_ts = tup[7]
                process(tup)
                if not self._settled:
                    ack(tup)
        finally:
            self._current = None

    # ---- event time ----------------------------------------------------------------------------
    def _on_watermark(self, src: int, status: watermarks.Status) -> None:
        marks = self.input_marks
        changed = marks.on_idle(src) if status == watermarks.IDLE else \
            marks.on_watermark(src, int(status))
        if changed:
            self._input_watermark_changed()

    def _input_watermark_changed(self) -> None:
        """Handle an input watermark that advanced or went idle, then tell downstream."""
        status = self.input_marks.status()
        if status != watermarks.IDLE and int(status) > self.watermark:
            self._watermark_advanced(int(status))
        if status != self.watermark_sent:
            self.send_watermark(status, self.clock())

    def _watermark_advanced(self, watermark: int) -> None:
        """Fire the event-time timers ``watermark`` reached, then run ``process_watermark``.

        Every tuple before the watermark was processed.
        """
        self.watermark = watermark
        self.fire_event_timers(watermark)
        process_watermark = getattr(self.component, "process_watermark", None)
        if process_watermark is not None:  # a duck-typed bolt may lack it
            process_watermark(watermark)

    def current_watermark(self) -> int:
        """Return the input watermark ``process_watermark`` last saw."""
        return self.watermark

    def time_state(self) -> dict | None:
        """Return the input watermarks, for a checkpoint."""
        return {"input": self.input_marks.snapshot(), "watermark": self.watermark}

    def restore_time_state(self, saved: dict) -> None:
        """Start from a checkpoint's input watermarks (``process_watermark`` saw its own)."""
        marks = saved.get("input")
        if marks is not None:
            self.input_marks.restore(marks)
        self.watermark = max(self.watermark, int(saved.get("watermark", WATERMARK_MIN)))

    def _on_end_of_stream(self, src: int) -> None:
        if src not in self.upstream:
            return  # replayed after a restart, or already seen
        self.upstream.discard(src)
        if self.input_marks.on_end(src):
            self._input_watermark_changed()
        if not self.upstream:
            self.component.end_of_input()
            self._flush_with_acks(self.clock(), force=True)
            self.control_message(stmgr_pb2.InstanceToStmgr(
                exhausted=stmgr_pb2.InstanceExhausted(task_id=self.task_id)))
            self.drained = True
            self.logger.info("bolt task %d drained", self.task_id)

    def end_turn(self, now: float, force: bool = False) -> None:
        """Send this turn's emits with its acks (``collector.flush_all``).

        Then its fails, then the progress when due.
        """
        self._flush_with_acks(now, force)
        if self.executed != self._reported and (force or now >= self._next_progress):
            self._next_progress = now + _PROGRESS_SECS
            self._reported = self.executed
            self.control_message(stmgr_pb2.InstanceToStmgr(
                progress=stmgr_pb2.InstanceProgress(executed=self.executed)))

    def _flush_with_acks(self, now: float, force: bool) -> None:
        if self.lingers(now, force):
            return  # acks wait with the emits they may anchor
        if not self.acks:
            self.acks.forget_delivered()  # none acked this turn: they are acked one by one
            self.collector.flush_all()
            return
        if not force and now < self._acks_due and not self.collector.buffered \
                and len(self.acks.acked) < ACKS_HELD_MAX:
            return  # acks alone: they wait (_ack_secs), with any later emits and acks
        self._acks_due = now + self._ack_secs
        roots, edge_ids, failed = self.acks.take()
        self.collector.flush_all((roots, edge_ids))
        if failed.size:
            self.control_message(stmgr_pb2.InstanceToStmgr(
                fails=stmgr_pb2.FailBatch(roots=tree_ids.pack(failed))))

    def next_deadline(self, now: float) -> float:
        """Return when the loop must come back at the latest: also progress, acks and ticks."""
        deadline = super().next_deadline(now)
        if self.executed != self._reported:
            deadline = min(deadline, self._next_progress)
        if self.acks:
            deadline = min(deadline, self._acks_due)
        if self._next_tick is not None:
            deadline = min(deadline, self._next_tick)
        if self.watermark_sent is not None and self.watermark_sent != WATERMARK_MAX:
            deadline = min(deadline, self._watermark_resend_at)
        if self.timers is not None and not self.drained:
            due_ms = self.timers.next_processing_deadline()
            if due_ms is not None:  # wall-clock ms: as a time of this loop's clock
                deadline = min(deadline, now + max(0.0, due_ms / 1000.0 - time.time()))
        return deadline

    def on_time(self, now: float) -> None:
        """Run what is due: user metrics, the watermark again, then a tick tuple when one is due."""
        super().on_time(now)
        if self.watermark_sent is not None and now >= self._watermark_resend_at \
                and self.watermark_sent != WATERMARK_MAX:
            self.send_watermark(self.watermark_sent, now)
        if self._next_tick is not None and now >= self._next_tick:
            self.component.process_tick(HeronTuple(
                None, TupleHelper.TICK_SOURCE_COMPONENT, TupleHelper.TICK_TUPLE_ID, -1,
                (), time.time(), ()))
            ticks = self._tick_secs
            self._next_tick += ticks * max(1, int((now - self._next_tick) / ticks) + 1)
        if self.timers is not None and not self.drained:
            self.fire_processing_timers(int(time.time() * 1000))

    # timers (instance.timers)
    def fire_event_timers(self, watermark_ms: int) -> None:
        """Call ``on_timer`` for each event-time timer the watermark ``watermark_ms`` reached.

        In time order; a timer ``on_timer`` registers for a time already reached fires too.
        """
        if self.timers is None:
            return
        on_timer = self.component.on_timer
        for key, ts_ms in self.timers.fire_event(watermark_ms):
            on_timer(key, ts_ms, EVENT)

    def fire_processing_timers(self, now_ms: int) -> None:
        """Call ``on_timer`` for each processing-time timer due at wall-clock ``now_ms``."""
        assert self.timers is not None
        due_ms = self.timers.next_processing_deadline()
        if due_ms is None or due_ms > now_ms:
            return
        on_timer = self.component.on_timer
        for key, ts_ms in self.timers.due_processing(now_ms):
            on_timer(key, ts_ms, PROCESSING)

    def add_metrics(self, add) -> None:
        """Add this task's counters and Heron's bolt metrics to a metrics publish."""
        super().add_metrics(add)
        if self.reliable:
            add(name=metric_names.ACK_COUNT, value=self.acks.acked_count + len(self.acks.acked))
            add(name=metric_names.FAIL_COUNT, value=self.acks.failed_count + len(self.acks.failed))
        task_metrics.add_bolt_metrics(add, self.means, self)


def _ignore(tup) -> None:
    """``ack``/``fail`` at-most-once: there are no trees to settle."""


def _newest_timestamp(anchors) -> int | None:
    """Return the newest timestamp among ``anchors`` (input tuples), None when none has one."""
    if not isinstance(anchors, (list, tuple)) or isinstance(anchors, HeronTuple):
        anchors = (anchors,)
    stamps = [t for t in (getattr(a, "timestamp", None) for a in anchors) if t is not None]
    return max(stamps) if stamps else None


def _roots_of(anchors) -> tuple[int, ...]:
    """Return the union of the trees of ``anchors`` (tuples received by this bolt)."""
    if not isinstance(anchors, (list, tuple)) or isinstance(anchors, HeronTuple):
        anchors = (anchors,)
    if len(anchors) == 1:
        return getattr(anchors[0], "roots", None) or ()
    return tuple(dict.fromkeys(r for a in anchors for r in (getattr(a, "roots", None) or ())))
