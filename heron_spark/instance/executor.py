"""One task's logic, without sockets: frames from the stmgr in, user code, frames out.

``SpoutExecutor`` (``spout_executor.py``) and ``BoltExecutor`` (``bolt_executor.py``) run a
task's user code on the instance's loop thread; ``TaskExecutor`` here is what they share.
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
from typing import Callable

from heron_spark.api import global_metrics
from heron_spark.api.metrics import MultiCountMetric
from heron_spark.api.serializer import load_serializer
from heron_spark.config import SystemConfig
from heron_spark.instance import hooks, task_metrics
from heron_spark.instance.collector import OutputCollector
from heron_spark.instance.context import InstanceContext
from heron_spark.instance.stateful import TaskState
from heron_spark.plan.view import PlanView
from heron_spark.proto import stmgr_pb2, tmaster_pb2
from heron_spark.wire import frames

_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
           "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR}


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
        self.reliable = plan.logical.topology_config.at_least_once
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
        if plan.logical.topology_config.effectively_once:
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
