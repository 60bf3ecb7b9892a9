"""One task's logic, without sockets: frames from the stmgr in, user code, frames out.

``SpoutExecutor`` and ``BoltExecutor`` run a task's user code on the instance's loop thread.
The shell (``runtime.InstanceRuntime``) hands them every frame from the stmgr (``on_frame``),
asks a spout for a slice of ``next_tuple`` calls (``run_slice``) whenever it may emit, and
calls ``end_turn`` when the loop has handled what it had: that is when emitted tuples leave
("batch when busy, send when idle": a busy task fills big batches, an idle one sends each
tuple at the end of the turn that produced it), followed by the acks and fails of that turn
and, now and then, the bolt's progress. The executor answers only through ``send(frame)``
and reads time only from ``clock``, so it is tested without processes or sockets.

The executor is also the delegate behind the user's ``Spout``/``Bolt`` methods. When a
component does not override ``emit``, the executor binds the collector's fast path as the
component's ``emit``: per tuple, one Python call and one list append.
"""

from __future__ import annotations

import logging
import time
from itertools import count, repeat
from typing import Callable

import numpy as np

from heron_spark.api import api_constants as keys
from heron_spark.api import global_metrics
from heron_spark.api.batch import BatchBolt
from heron_spark.api.bolt import Bolt
from heron_spark.api.metrics import MultiCountMetric
from heron_spark.api.serializer import load_serializer
from heron_spark.api.spout import Spout
from heron_spark.api.tuple import HeronTuple, TupleHelper
from heron_spark.config import SystemConfig
from heron_spark.instance import batches, hooks, task_metrics
from heron_spark.instance.acking import AckBuffer, SpoutTrees
from heron_spark.instance.collector import OutputCollector
from heron_spark.instance.context import InstanceContext
from heron_spark.instance.stateful import TaskState
from heron_spark.plan.logical import message_timeout_secs
from heron_spark.plan.view import PlanView
from heron_spark.proto import physical_plan_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.wire import frames, tree_ids, tuple_batch

_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
           "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR}
_new_tuple = tuple.__new__
_data_head = frames.DATA_HEAD.unpack_from
_PREFIX_BYTES = frames.PREFIX_BYTES
_PROGRESS_SECS = 0.01    # a bolt reports its progress at most this often
_clock_ns = time.perf_counter_ns  # latency metrics: one read before and one after each batch
_IDLE_SPOUT_WAIT_SECS = 0.001


class Stop(Exception):
    """Leave the task: the stmgr said shut down (code 0) or went away (code 2)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class TaskExecutor:
    """What spout and bolt executors share: the delegate API, control frames, metrics."""

    def __init__(self, plan: PlanView, task_id: int, config: SystemConfig,
                 send: Callable[[bytes | list], None], logger: logging.Logger,
                 clock: Callable[[], float] = time.monotonic,
                 push: Callable[[], None] | None = None,
                 output_full: Callable[[], bool] = lambda: False) -> None:
        # kept to start over on an effectively-once restore
        self._init_args = (plan, task_id, config, send, logger)
        self._init_kwargs = {"clock": clock, "push": push, "output_full": output_full}
        self.plan = plan
        self.task_id = task_id
        self.config = config
        self.send = send
        self.push = push
        self.output_full = output_full  # True while the stmgr has not taken enough of our output
        self.logger = logger
        self.clock = clock
        self.component_name = plan.task_component[task_id]
        self.decl = plan.logical.components[self.component_name]
        self.context = InstanceContext(plan, task_id)
        self.reliable = plan.logical.reliability_mode == keys.TopologyReliabilityMode.ATLEAST_ONCE
        self.collector: OutputCollector | None = None
        self.component = None
        self.started = False
        self.executed = 0
        self._next_metrics = 0.0
        self._metric_due: dict[str, float] = {}
        self.user_metrics: dict[str, float] = {}  # latest values, gathered on the loop thread
        self._bound: dict[str, Callable] = {}     # fast paths bound onto the component
        self.statemgr_url = config.statemgr
        self.stateful: TaskState | None = None  # effectively once
        if plan.logical.reliability_mode == keys.TopologyReliabilityMode.EFFECTIVELY_ONCE:
            self.stateful = TaskState(config, plan.logical.name, task_id)
        self.held = False  # effectively once: a spout waits for the end of a restore
        self.paused = False  # the topology is deactivated: a spout does not emit
        self.hooks: hooks.TaskHooks | None = None  # set once the task has a task hook
        self.global_counts = MultiCountMetric()    # this task's global_metrics (``__auto__``)
        self.means = task_metrics.IntervalMean()   # the metrics thread's, for latencies

    # ---- delegate API (user code calls these) ----------------------------------------------
    def log(self, message: str, level: str | None = None) -> None:
        self.logger.log(_LEVELS.get((level or "info").lower(), logging.INFO), message)

    def spout_state_store(self):
        """Return where this task keeps its source offsets (the topology's state manager)."""
        from heron_spark.instance.state_store import SpoutStateStore

        return SpoutStateStore(self.statemgr_url, self.plan.logical.name,
                               f"{self.component_name}.{self.context.get_task_index()}")

    # ---- life cycle ------------------------------------------------------------------------
    def start(self, epoch: int = 0, checkpoint_id: int = 0, hold: bool = False) -> None:
        """Create the user's component and initialize it (after StartProcessing).

        Effectively once: ``init_state`` first, with the state of ``checkpoint_id``; then the
        task reports it restored ``epoch``; a spout emits nothing while ``hold``.
        """
        self.started = True
        self.component = self.decl.component_class(self)
        self.collector = OutputCollector(self.plan, self.task_id, self.context, self.send,
                                         self.config.batch_max_tuples, self.push,
                                         self.config.batch_linger_ms / 1000.0, self.clock)
        self.collector.delegate_emit = self.emit
        config = self.context.get_cluster_config()
        self.collector.serializer = load_serializer(config, self.component_name)
        self.context.register_metric(global_metrics.root_name, self.global_counts,
                                     self.config.metrics_interval_ms / 1000.0)
        global_metrics.use(self.global_counts)
        self._configure(config)  # before initialize: user code may keep self.emit / self.ack
        if self.stateful is not None:
            self.held = hold
            self.stateful.load(self.component, epoch, checkpoint_id)
        self.context.on_task_hook = self._hooked
        for hook in hooks.auto_hooks(config, self.component_name):
            self.context.add_task_hook(hook)
        self.component.initialize(config, self.context)
        if self.hooks is not None:
            self.hooks.prepare(config, self.context)
        self._initialized(config)
        if self.stateful is not None:
            self.control_message(stmgr_pb2.InstanceToStmgr(restored=tmaster_pb2.InstanceRestored(
                task_id=self.task_id, epoch=epoch, checkpoint_id=checkpoint_id)))
        self.logger.info("task %d of %s started", self.task_id, self.component_name)

    def _configure(self, config: dict) -> None:
        """Set up acking and bind the fast ``emit``/``ack`` (subclasses)."""

    def _initialized(self, config: dict) -> None:
        """What follows the user's ``initialize`` (subclasses)."""

    def _hooked(self) -> None:
        """The task got a task hook: from now on its events go through the hooked paths."""
        if self.hooks is None:
            self.hooks = hooks.TaskHooks(self.context.task_hooks, self.task_id)
            self.hooks.install(self)

    def enter(self) -> None:
        """Point process-wide user state (``global_metrics``) at this task: a runner hosting
        several tasks in one process calls this before each call into the task."""
        global_metrics.use(self.global_counts)

    def _bind(self, base: type, name: str, fast) -> None:
        """Make ``fast`` the component's method ``name`` unless its class overrides it."""
        if getattr(type(self.component), name, None) is getattr(base, name):
            setattr(self.component, name, fast)
            self._bound[name] = fast

    def on_control(self, message: stmgr_pb2.StmgrToInstance) -> None:
        """Handle a control message from the stmgr: start, shutdown."""
        body = message.WhichOneof("body")
        if body == "start":
            if not self.started:
                start = message.start
                self.paused = start.paused
                self.start(start.epoch, start.checkpoint_id, start.hold)
        elif body == "checkpoint":
            if self.started and self.stateful is not None:
                self.checkpoint(message.checkpoint.checkpoint_id)
        elif body == "restore":
            if self.started and self.stateful is not None:
                self.restore(message.restore.epoch, message.restore.checkpoint_id)
        elif body == "resume":
            if self.stateful is not None and message.resume.epoch == self.stateful.epoch:
                self.held = False
        elif body == "shutdown":
            reason = tmaster_pb2.ShutdownReason.Name(message.shutdown.reason)
            self.logger.info("shutdown (%s) %s", reason, message.shutdown.detail)
            if self.started:
                self.end_turn(self.clock(), force=True)
            raise Stop(0)

    # ---- effectively once --------------------------------------------------------------------
    def checkpoint(self, checkpoint_id: int) -> None:
        """Save state for ``checkpoint_id``: what was emitted before goes first, then the
        markers to every downstream task, then the report to the stmgr."""
        self.end_turn(self.clock(), force=True)
        self.stateful.save(self.component, checkpoint_id)
        name = str(checkpoint_id).encode()
        for dest in self.plan.downstream_tasks(self.task_id):
            self.send(frames.data_frame(frames.CHECKPOINT_MARKER, self.task_id, dest, 0, name))
        self.control_message(stmgr_pb2.InstanceToStmgr(stored=tmaster_pb2.InstanceStateStored(
            task_id=self.task_id, checkpoint_id=checkpoint_id)))

    def restore(self, epoch: int, checkpoint_id: int) -> None:
        """Start over from ``checkpoint_id``'s state: drop what is buffered, build the
        component anew (``init_state``, ``initialize``); a spout holds until ``resume``."""
        self.logger.info("task %d restores checkpoint %d (epoch %d)", self.task_id,
                         checkpoint_id, epoch)
        paused = self.paused  # a restore does not change whether the topology is deactivated
        type(self).__init__(self, *self._init_args, **self._init_kwargs)
        self.paused = paused
        self.start(epoch, checkpoint_id, hold=True)

    def end_turn(self, now: float, force: bool = False) -> None:
        """The loop handled everything it had: send what was emitted (unless it lingers)."""
        if not self.lingers(now, force):
            self.collector.flush_all()

    def lingers(self, now: float, force: bool = False) -> bool:
        """True when the buffered tuples wait for more: a batch of this task left less than
        ``heron.batch.linger.ms`` ago (a busy task sends fewer, bigger batches)."""
        if force:
            return False
        due = self.collector.due()
        return due is not None and now < due

    def next_deadline(self, now: float) -> float:
        """When the loop must come back at the latest even with no input."""
        due = self.collector.due() if self.collector is not None else None
        return self._next_metrics if due is None else min(self._next_metrics, due)

    def on_time(self, now: float) -> None:
        """Run what is due: user metrics (subclasses add ticks and timeouts)."""
        if now >= self._next_metrics:
            self.gather_user_metrics(now)

    def close(self) -> None:
        """The task ends cleanly: hooks' ``clean_up``, last metrics (spouts also call ``close``)."""
        if self.started:
            if self.hooks is not None:
                self.hooks.clean_up()
            self.gather_user_metrics(self.clock(), force=True)

    def control_message(self, message) -> None:
        self.send(frames.control_frame(message))

    # ---- metrics ---------------------------------------------------------------------------
    def gather_user_metrics(self, now: float, force: bool = False) -> None:
        """Read the user's registered metrics (loop thread: they are not thread-safe)."""
        self._next_metrics = now + self.config.metrics_interval_ms / 1000.0
        values = dict(self.user_metrics)
        for name, metric, bucket in self.context.metrics:
            due = self._metric_due.get(name)
            if due is None and not force:  # first sample one bucket after we saw it, as Heron
                self._metric_due[name] = due = now + bucket
            if force or now >= due:
                self._metric_due[name] = now + bucket
                value = metric.get_value_and_reset()
                items = value.items() if isinstance(value, dict) else [(None, value)]
                for key, number in items:
                    if isinstance(number, (int, float)):
                        values[name if key is None else f"{name}/{key}"] = float(number)
        self.user_metrics = values

    def add_metrics(self, add) -> None:
        """Add this task's counters to a metrics publish (metrics thread: reads only)."""
        if self.collector is not None:
            for stream, count in list(self.collector.emitted().items()):
                add(name=f"__emit-count/{stream}", value=count)
        add(name="__execute-count", value=self.executed)
        for name, value in list(self.user_metrics.items()):
            add(name=name, value=value)


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
        self._slice_secs = self.config.batch_flush_interval_ms / 1000.0
        self.next_tuple_calls = 0  # Heron's __next-tuple-count
        self.next_tuple_ns = 0     # total time in next_tuple: __next-tuple-latency's numerator

    # delegate API
    def emit(self, values, stream, tup_id, anchors, direct_task, need_task_ids):
        roots = (self.trees.open(tup_id, stream),) if self.trees is not None and tup_id is not None \
            else ()
        return self.collector.emit(values, stream, direct_task, need_task_ids, roots)

    def declare_exhausted(self) -> None:
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
        if self.reliable:
            timeout = message_timeout_secs(config)
            if str(config.get(keys.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True)).lower() == "false":
                timeout = None
            pending = config.get(keys.TOPOLOGY_MAX_SPOUT_PENDING)
            self.trees = SpoutTrees(self.task_id, timeout, int(pending) if pending else None,
                                    clock=self.clock)
            self.collector.open_tree = self.trees.open
            self._bind(Spout, "emit", self.collector.spout_emit_tracked)
        else:
            self._bind(Spout, "emit", self.collector.spout_emit_plain)

    def _initialized(self, config: dict) -> None:
        if not self.paused:  # deployed deactivated: ``activate`` comes with the activation
            self.component.activate()

    def set_paused(self, paused: bool) -> None:
        """Deactivate (``paused``) or activate the spout, as Heron does: ``deactivate()`` once,
        then no ``next_tuple`` until ``activate()``; acks and fails still arrive meanwhile."""
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
        """True when ``next_tuple`` may run now."""
        if self.gated or self.exhausted or self.held or self.paused:
            return False
        if self.trees is not None and self.trees.full:
            return False
        return self.collector.sent + self.collector.buffered < self.routed + self._unrouted_max

    def run_slice(self, now: float) -> bool:
        """Call ``next_tuple`` until it emits nothing, the spout may not emit more, or the
        slice (``heron.batch.flush.interval.ms``) is over; return whether it emitted."""
        collector = self.collector
        next_tuple = self.component.next_tuple
        clock = self.clock
        end = now + self._slice_secs
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
                    (trees is not None and trees.full) or clock() >= end or self.output_full():
                break
        self.next_tuple_ns += _clock_ns() - started_ns
        self.next_tuple_calls += calls
        return emitted_any

    def end_turn(self, now: float, force: bool = False) -> None:
        done = self.exhausted and not self.announced and not self.trees
        if not self.lingers(now, force or done):
            self.collector.flush_all()
        if done:
            self.control_message(stmgr_pb2.InstanceToStmgr(
                exhausted=stmgr_pb2.InstanceExhausted(task_id=self.task_id)))
            self.announced = True
            self.logger.info("spout task %d exhausted", self.task_id)

    def wait_secs(self, now: float) -> float:
        """How long the loop may wait for input when ``next_tuple`` did not emit."""
        wait = max(0.0, self.next_deadline(now) - now)
        if self.may_emit():
            return min(wait, _IDLE_SPOUT_WAIT_SECS)
        if self.trees is not None and len(self.trees) and not self.announced:
            return min(wait, 0.01)  # trees open: wake for their timeouts
        return wait

    def on_frame(self, kind: int, frame: bytes) -> None:
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
        super().on_time(now)
        if self.trees is not None:
            fail = self.component.fail
            if self.hooks is not None:
                fail = self.hooks.spout_failing(fail, repeat((self.trees.timeout or 0.0) * 1000.0))
            for message_id in self.trees.expired():
                self.exhausted = False  # a bounded spout replays, then declares exhaustion again
                fail(message_id)

    def _close_trees(self, done: stmgr_pb2.TreesDone) -> None:
        if self.trees is None:
            return
        ack, fail = self.component.ack, self.component.fail
        if self.hooks is not None:  # the trees' ages, before close() forgets them
            ack = self.hooks.spout_acking(ack, self.trees.ages_ms(done.acked))
            fail = self.hooks.spout_failing(fail, self.trees.ages_ms(done.failed))
        acked, failed = self.trees.close(done.acked, done.failed)
        for message_id in acked:
            ack(message_id)
        for message_id in failed:
            self.exhausted = False
            fail(message_id)

    def close(self) -> None:
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
        super().add_metrics(add)
        trees = self.trees
        if trees is not None:
            add(name="__ack-count", value=trees.acked)
            add(name="__fail-count", value=trees.failed)
            add(name="__timeout-count", value=trees.timed_out)
            add(name="__pending-trees", value=len(trees))
            add(name="__complete-latency-ms-total", value=trees.latency_ms_total)
        task_metrics.add_spout_metrics(add, self.means, self)


class BoltExecutor(TaskExecutor):
    """Runs a bolt: ``process`` for every tuple of every batch the stmgr delivers."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        inputs = {(sub.component, sub.stream) for sub in self.decl.inputs}
        self.acks = AckBuffer(only_input=next(iter(inputs)) if len(inputs) == 1 else None)
        self.auto_ack = False
        self._current: HeronTuple | None = None  # auto-ack: the tuple in process()
        self._settled = False                     # auto-ack: process() acked or failed it
        self.upstream = set(self.plan.upstream_tasks(self.task_id))
        self.drained = False
        self._tick_secs = 0.0
        self._next_tick: float | None = None
        self._reported = 0
        self._next_progress = 0.0
        self._acks_due = 0.0  # acks with no emits to ride with leave at most once per linger
        self._held: list = []                     # data that came before start
        self.batch_mode = False                   # a BatchBolt: process_batch per batch
        self._input_roots = None                  # batch mode: the input batch's roots
        self._input_failed = False
        # (task, stream) -> (component, width, its input_stats entry)
        self._sources: dict[tuple, tuple[str, int, list]] = {}
        # (component, stream) -> [executed tuples, ns executing them]: Heron's
        # __execute-count / __execute-latency per input, every input at 0 from the start
        self.input_stats: dict[tuple[str, str], list] = {
            (sub.component, sub.stream): [0, 0] for sub in self.decl.inputs}

    # delegate API
    def emit(self, values, stream, tup_id, anchors, direct_task, need_task_ids):
        roots = ()
        if self.reliable:
            if anchors is None and self._current is not None:
                anchors = (self._current,)  # auto-ack bolts anchor to their input
            if anchors:
                roots = _roots_of(anchors)
        return self.collector.emit(values, stream, direct_task, need_task_ids, roots)

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
                str(config.get(keys.TOPOLOGY_BOLT_AUTO_ACK, False)).lower() == "true"
            if not self.auto_ack:  # auto-ack anchors to, and settles, the current input
                self._bind(Bolt, "emit", self.collector.emit_anchored)
                self._bind(Bolt, "ack", self.acks.acked.append)
                self._bind(Bolt, "fail", self.acks.failed.append)
        else:
            self._bind(Bolt, "emit", self.collector.emit_plain)
            self._bind(Bolt, "ack", _ignore)
            self._bind(Bolt, "fail", _ignore)
        self._tick_secs = float(config.get("topology.tick.tuple.freq.secs", 0) or 0)
        if self._tick_secs > 0:
            self._next_tick = self.clock() + self._tick_secs

    def _initialized(self, config: dict) -> None:
        ticks = float(config.get(keys.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 0) or 0)
        if ticks != self._tick_secs:  # set by initialize, as Heron's window bolts do
            self._tick_secs = ticks
            self._next_tick = self.clock() + ticks if ticks > 0 else None
        if self.reliable and not self.auto_ack and getattr(self.component, "auto_ack", False):
            self.auto_ack = True  # turned on in initialize: the settling path, not the fast one
            for name, fast in self._bound.items():
                if self.component.__dict__.get(name) is fast:
                    del self.component.__dict__[name]
        held, self._held = self._held, []
        for frame in held:
            self._on_data(frame)

    # the loop
    def on_frame(self, kind: int, frame: bytes) -> None:
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
            if data_kind == frames.END_OF_STREAM:
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
            self.executed += rows
            stats[1] += _clock_ns() - started_ns
            stats[0] += rows
            return
        values = tuple_batch.rows(batch, width)
        process = self.component.process
        if self.hooks is not None:
            process = self.hooks.executing(process)
        now = time.time()
        roots = tuple_batch.row_roots(batch) if self.reliable else None
        if self.reliable and (roots is None or
                              tuple_batch.ROOT_COLUMN not in batch.schema.names):
            self.acks.single_root = False  # some tuples belong to no tree, or to several
        if roots is None:
            # tuples built by C-level iteration: no Python frame per tuple before process()
            for tup in map(_new_tuple, repeat(HeronTuple), zip(
                    repeat(None), repeat(component), repeat(stream), repeat(src),
                    values, repeat(now), repeat(()))):
                process(tup)
        else:
            edge_ids = batch.column(tuple_batch.KEY_COLUMN).to_numpy().tolist()
            tuples = map(_new_tuple, repeat(HeronTuple), zip(
                edge_ids, repeat(component), repeat(stream), repeat(src), values, repeat(now),
                roots))
            if self.auto_ack:
                self._process_auto_acked(tuples)
            else:
                for tup in tuples:
                    process(tup)
        self.executed += rows
        stats[1] += _clock_ns() - started_ns  # Heron's __execute-latency: per batch, not per tuple
        stats[0] += rows

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
                keys = batch.column(tuple_batch.KEY_COLUMN).to_numpy()
                self.acks.ack_rows(flat, keys if counts is None else np.repeat(keys, counts),
                                   batch.num_rows)

    def _process_auto_acked(self, tuples) -> None:
        process = self.component.process
        ack = self.acks.ack
        if self.hooks is not None:
            process, ack = self.hooks.executing(process), self.hooks.acking(ack)
        try:
            for tup in tuples:
                self._current, self._settled = tup, False
                process(tup)
                if not self._settled:
                    ack(tup)
        finally:
            self._current = None

    def _on_end_of_stream(self, src: int) -> None:
        if src not in self.upstream:
            return  # replayed after a restart, or already seen
        self.upstream.discard(src)
        if not self.upstream:
            self.component.end_of_input()
            self._flush_with_acks(self.clock(), force=True)
            self.control_message(stmgr_pb2.InstanceToStmgr(
                exhausted=stmgr_pb2.InstanceExhausted(task_id=self.task_id)))
            self.drained = True
            self.logger.info("bolt task %d drained", self.task_id)

    def end_turn(self, now: float, force: bool = False) -> None:
        """Send this turn's emits with its acks (``collector.flush_all``), its fails, then
        the progress when due."""
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
            self.collector.flush_all()
            return
        if not force and now < self._acks_due and not self.collector.buffered:
            return  # acks alone: they wait for the linger, with any later emits and acks
        self._acks_due = now + self.collector.linger
        roots, edge_ids, failed = self.acks.take()
        self.collector.flush_all((roots, edge_ids))
        if failed.size:
            self.control_message(stmgr_pb2.InstanceToStmgr(
                fails=stmgr_pb2.FailBatch(roots=tree_ids.pack(failed))))

    def next_deadline(self, now: float) -> float:
        deadline = super().next_deadline(now)
        if self.executed != self._reported:
            deadline = min(deadline, self._next_progress)
        if self.acks:
            deadline = min(deadline, self._acks_due)
        if self._next_tick is not None:
            deadline = min(deadline, self._next_tick)
        return deadline

    def on_time(self, now: float) -> None:
        super().on_time(now)
        if self._next_tick is not None and now >= self._next_tick:
            self.component.process_tick(HeronTuple(
                None, TupleHelper.TICK_SOURCE_COMPONENT, TupleHelper.TICK_TUPLE_ID, -1,
                (), time.time(), ()))
            ticks = self._tick_secs
            self._next_tick += ticks * max(1, int((now - self._next_tick) / ticks) + 1)

    def add_metrics(self, add) -> None:
        super().add_metrics(add)
        if self.reliable:
            add(name="__ack-count", value=self.acks.acked_count + len(self.acks.acked))
            add(name="__fail-count", value=self.acks.failed_count + len(self.acks.failed))
        task_metrics.add_bolt_metrics(add, self.means, self)


def _ignore(tup) -> None:
    """``ack``/``fail`` at-most-once: there are no trees to settle."""


def _roots_of(anchors) -> tuple[int, ...]:
    """Return the union of the trees of ``anchors`` (tuples received by this bolt)."""
    if not isinstance(anchors, (list, tuple)) or isinstance(anchors, HeronTuple):
        anchors = (anchors,)
    if len(anchors) == 1:
        return getattr(anchors[0], "roots", None) or ()
    return tuple(dict.fromkeys(r for a in anchors for r in (getattr(a, "roots", None) or ())))
