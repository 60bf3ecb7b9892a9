"""One task's logic, without sockets: frames from the stmgr in, user code, frames out.

``SpoutExecutor`` (``spout_executor.py``) and ``BoltExecutor`` (``bolt_executor.py``) run a
task's user code; ``TaskExecutor`` here is what they share, including the one scheduling loop
both shells drive: the instance process (``runtime``, on its epoll loop) and the in-process
runner (``inprocess.runner``, every task on one thread). A shell hands the executor every
frame from the stmgr with ``offer`` and calls ``turn(now)``, which returns when the task next
needs a turn (``None``: only when input comes). One turn:

1. takes the input the gate allows (a spout takes all of it: acks, its gate, control; a bolt
   ``process``-es data frames for at most ``heron.batch.flush.interval.ms``, and none while
   its output gate is closed);
2. runs what is due (user metrics; a bolt's ticks; a spout's message timeouts);
3. lets a spout call ``next_tuple`` for one slice, when its output gate is open and the stmgr
   lets it emit;
4. ends the turn (``end_turn``): emitted tuples leave ("batch when busy, send when idle": a
   busy task fills big batches and lingers ``heron.batch.linger.ms`` for more, an idle one
   sends each tuple at the end of the turn that produced it), with the acks and fails of the
   turn and, now and then, the bolt's progress.

The output gate (``OutputGate``) watches the bytes the stmgr has not taken from this task
(``output_queued``, read from the shell's socket or queue): past
``heron.instance.out.queue.bytes`` it closes (a bolt takes no input, a spout calls no
``next_tuple``) until they drain to half of it. ``accepting`` tells the shell whether to read
more frames. The executor answers only through ``send(frame)`` and reads time only from
``clock``, so it is tested without processes or sockets.

Event time: every task tells its downstream tasks its watermark in band (WATERMARK frames,
``send_watermark``), after what it emitted before; a spout makes its own
(``instance.watermarks.SourceWatermarks``), a bolt merges its upstream tasks'
(``InputWatermarks``). Under effectively once they are saved with each checkpoint.

The executor is also the delegate behind the user's ``Spout``/``Bolt`` methods. When a
component does not override ``emit``, the executor binds the collector's fast path as the
component's ``emit``: per tuple, one Python call and one list append.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any, Callable

from heron_spark.api import global_metrics
from heron_spark.api.metrics import MultiCountMetric
from heron_spark.api.serializer import load_serializer
from heron_spark.api.event_time import WATERMARK_MAX, WATERMARK_MIN
from heron_spark.api.event_time import timestamp_ms as event_time_ms
from heron_spark.api.state import TwoPhaseStatefulComponent
from heron_spark.config import SystemConfig, own_state_config, state_settings
from heron_spark.contract import metric_names
from heron_spark.contract.exit_codes import ExitCode
from heron_spark.errors import TopologyValueError
from heron_spark.instance import hooks, task_metrics, watermarks
from heron_spark.instance.collector import OutputCollector
from heron_spark.instance.context import InstanceContext
from heron_spark.instance.stateful import KeyLayout, TaskState
from heron_spark.plan.view import PlanView
from heron_spark.proto import stmgr_pb2, tmaster_pb2
from heron_spark.wire import frames

# Without a wake-up from the uploader thread (the in-process runner), a task with uploads in
# flight looks for finished ones this often.
UPLOAD_POLL_SECS = 0.005

_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
           "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR}


class Stop(Exception):
    """Leave the task: the stmgr said shut down (code 0) or went away (code 2)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code



class OutputGate:
    """Hysteresis on the bytes of a task's output the stmgr has not taken yet.

    ``check(queued)`` closes the gate when ``queued`` passes ``high``
    (``heron.instance.out.queue.bytes``) and opens it again once ``queued`` is down to
    ``high // 2``; ``closings`` counts how often it closed. One thread (the task's).
    """

    __slots__ = ("high", "low", "open", "closings")

    def __init__(self, high_bytes: int) -> None:
        self.high = high_bytes
        self.low = high_bytes // 2
        self.open = True
        self.closings = 0

    def check(self, queued: int) -> bool:
        """Update the gate with the bytes queued now; return whether it is open."""
        if self.open:
            if queued > self.high:
                self.open = False
                self.closings += 1
        elif queued <= self.low:
            self.open = True
        return self.open


def _nothing_queued() -> int:
    return 0


class TaskExecutor:
    """What spout and bolt executors share: the turn, the delegate API, control frames, metrics.

    Loop thread only (``add_metrics`` excepted: it only reads counters).
    """

    gates_input = False  # a bolt's input waits while its output gate is closed

    def __init__(self, plan: PlanView, task_id: int, config: SystemConfig,
                 send: Callable[[bytes | list], None], logger: logging.Logger,
                 clock: Callable[[], float] = time.monotonic,
                 push: Callable[[], None] | None = None,
                 output_queued: Callable[[], int] = _nothing_queued,
                 wake: Callable[[], None] | None = None) -> None:
        # kept to start over on an effectively-once restore
        self._init_args = (plan, task_id, config, send, logger)
        self._init_kwargs: dict[str, Any] = {"clock": clock, "push": push,
                                             "output_queued": output_queued, "wake": wake}
        self.plan = plan
        self.task_id = task_id
        self.config = config
        self.send = send
        self.push = push
        self.output_queued = output_queued  # bytes of our output the stmgr has not taken
        self.gate = OutputGate(config.instance_out_queue_bytes)
        self._inbox: collections.deque = collections.deque()  # (kind, frame) from the stmgr
        self.inbox_bytes = 0
        self._turn_secs = config.batch_flush_interval_ms / 1000.0  # user code per turn
        self.logger = logger
        self.clock = clock
        self.component_name = plan.task_component[task_id]
        self.decl = plan.logical.components[self.component_name]
        self.context = InstanceContext(plan, task_id)
        self.reliable = plan.logical.topology_config.at_least_once
        # Both set by ``start``: every call that uses them comes after it (``next_deadline`` and
        # ``add_metrics`` excepted, which check), so they are typed as set; a check on the
        # per-tuple paths would cost every tuple.
        self.collector: OutputCollector = None  # type: ignore[assignment]
        self.component: Any = None  # the user's Spout or Bolt (duck-typed, as in Heron)
        self.started = False
        self.executed = 0
        self._next_metrics = 0.0
        self._metric_due: dict[str, float] = {}
        self.user_metrics: dict[str, float] = {}  # latest values, gathered on the loop thread
        self._bound: dict[str, Callable] = {}     # fast paths bound onto the component
        self.statemgr_url = config.statemgr
        self.committed_id = 0  # effectively once: the newest checkpoint known committed
        self.stateful: TaskState | None = None  # effectively once
        # any thread may call wake: it brings the loop back for a finished checkpoint upload
        self._woken = wake is not None
        if plan.logical.topology_config.effectively_once:
            settings = state_settings(config, own_state_config(self.decl.config,
                                                               plan.logical.config),
                                      self.component_name)
            tasks = tuple(plan.component_tasks[self.component_name])
            layout = KeyLayout(tasks.index(task_id), tasks,
                               plan.logical.topology_config.max_parallelism)
            self.stateful = TaskState(config, plan.logical.name, task_id, self.component_name,
                                      settings, wake, layout=layout)
        self.held = False  # effectively once: a spout waits for the end of a restore
        self.paused = False  # the topology is deactivated: a spout does not emit
        # event time: what this task last told downstream (None: nothing yet), and when it
        # tells it again unchanged (a restarted downstream task learns it so)
        self.watermark_sent: watermarks.Status | None = None
        self._watermark_resend_at = 0.0
        self.late_tuples = 0  # event time: tuples this task found late (``__late-tuples``)
        self.context.event_time = self
        self.hooks: hooks.TaskHooks | None = None  # set once the task has a task hook
        self.global_counts = MultiCountMetric()    # this task's global_metrics (``__auto__``)
        self.means = task_metrics.IntervalMean()   # the metrics thread's, for latencies

    # ---- the turn (the shells call these) ---------------------------------------------------
    def offer(self, kind: int, frame: bytes | bytearray) -> None:
        """Queue a frame from the stmgr (prefix included) for the next turn."""
        self._inbox.append((kind, frame))
        self.inbox_bytes += len(frame)

    def accepting(self) -> bool:
        """Return whether the shell should read more frames for this task now.

        A spout always, a bolt once it took what it has and while its output gate is open (so it
        reads at most one socket read ahead).
        """
        return True

    def turn(self, now: float) -> float | None:
        """Run one turn of this task; return when it needs the next.

        Take the input the gate allows, run what is due and (a spout) a slice of ``next_tuple``,
        send what the turn produced; return the monotonic time of the next turn this task needs
        (``now``: at once), or None when it only waits for input.
        """
        if self._inbox:
            self._take_input(now)
        if not self.started:
            return None
        if self.stateful is not None and self.stateful.uploading:
            self._report_saves()
        self.on_time(now)
        busy = self._run(now)
        now = self.clock()
        self.end_turn(now)
        return self._wake_at(now, busy)

    def take_all_input(self) -> None:
        """Hand every queued frame to the task, gate or not.

        The stmgr went away, and what it sent before is all the task will get (a shutdown among
        it ends the task cleanly).
        """
        self._take_input(self.clock(), gated=False)

    def _take_input(self, now: float, gated: bool = True) -> None:
        """Hand queued frames to ``on_frame``.

        All of them (spouts), or (bolts) while the output gate is open, for at most one turn's
        time of data frames.
        """
        inbox, on_frame = self._inbox, self.on_frame
        if not (gated and self.gates_input):
            while inbox:
                kind, frame = inbox.popleft()
                self.inbox_bytes -= len(frame)
                on_frame(kind, frame)
            return
        check, queued = self.gate.check, self.output_queued
        if not check(queued()):
            return
        clock, until = self.clock, now + self._turn_secs
        while inbox:
            kind, frame = inbox.popleft()
            self.inbox_bytes -= len(frame)
            on_frame(kind, frame)
            if kind == frames.DATA and (clock() >= until or not check(queued())):
                break

    def on_frame(self, kind: int, frame: bytes) -> None:
        """Handle one frame from the stmgr (subclasses)."""
        raise NotImplementedError

    def emit(self, values, stream, tup_id, anchors, direct_task, need_task_ids,
             timestamp=None, partition=None):
        """Emit one tuple: the delegate's general ``emit`` behind the fast paths (subclasses)."""
        raise NotImplementedError

    # ---- event time --------------------------------------------------------------------------
    def current_watermark(self) -> int:
        """Return this task's watermark in ms (``WATERMARK_MIN`` before any; subclasses)."""
        return WATERMARK_MIN

    def record_late_tuples(self, count: int = 1) -> None:
        """Count ``count`` late tuples (``__late-tuples``)."""
        self.late_tuples += count

    def time_state(self) -> dict | None:
        """Return the event-time progress a checkpoint keeps (subclasses)."""
        return None

    def restore_time_state(self, saved: dict) -> None:
        """Start from a checkpoint's event-time progress (subclasses)."""

    def send_watermark(self, status: watermarks.Status, now: float) -> None:
        """Tell every downstream task ``status``, after everything emitted before it."""
        self.watermark_sent = status  # first: the end of turn below may look at it
        self.end_turn(now, force=True)
        self.watermark_frames(status, now)

    def watermark_frames(self, status: watermarks.Status, now: float) -> None:
        """Send ``status`` to every downstream task now (what was emitted must have left)."""
        self.watermark_sent = status
        slot = watermarks.encode(status)
        for dest in self.plan.downstream_tasks(self.task_id):
            self.send(frames.data_frame(frames.WATERMARK, self.task_id, dest, 0, slot))
        self._watermark_resend_at = now + self.decl.topology_config.watermark_interval_ms / 1000.0

    def _validated_timestamp(self, timestamp) -> int:
        """Return an emit's ``timestamp`` as int ms; raise when it is not one."""
        value = event_time_ms(timestamp)
        if value is None:
            msg = "emit(timestamp=...) takes the event time as int milliseconds since the epoch"
            raise TopologyValueError(msg, component=self.component_name, value=timestamp,
                                     kind="timestamp", fix="pass an int of ms, or None")
        return value

    def _run(self, now: float) -> bool:
        """Do the turn's own work after its input (a spout's ``next_tuple`` slice).

        Return whether the task wants another turn at once.
        """
        return False

    def _wake_at(self, now: float, busy: bool) -> float | None:
        """When this task needs its next turn, the turn having ended at ``now``."""
        return now if busy else self.next_deadline(now)

    # ---- delegate API (user code calls these) ----------------------------------------------
    def log(self, message: str, level: str | None = None) -> None:
        """Log ``message`` at ``level`` (a name, default info) to the instance log."""
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
            self.committed_id = max(self.committed_id, checkpoint_id)  # restored: committed
            self.stateful.load(self.component, epoch, checkpoint_id, self.collector.serializer)
            if self.stateful.time_state is not None:
                self.restore_time_state(self.stateful.time_state)
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
        # Only now the data that came before the start: what it makes must follow the
        # restored report, or the stmgr drops it as the rolled-back epoch's (the first
        # watermark after a restore may fire windows the checkpoint holds complete).
        self._take_held()

    def drop_held_input(self, epoch: int) -> None:
        """Forget the data held until the start: a restore to ``epoch`` came before it.

        A restarted task's process is sent data once it has connected, before it starts; when
        the rollback reaches the stmgr after that, what came before the restore is of the
        rolled-back epoch (the stmgr passes only the new epoch's after it). Subclasses that
        hold data do so.
        """

    def _configure(self, config: dict) -> None:
        """Set up acking and bind the fast ``emit``/``ack`` (subclasses)."""

    def _initialized(self, config: dict) -> None:
        """Finish starting after the user's ``initialize`` (subclasses)."""

    def _take_held(self) -> None:
        """Handle the data that came before the start (subclasses that hold it)."""

    def _hooked(self) -> None:
        """Route this task's events through the hooked paths from now on (it got a task hook)."""
        if self.hooks is None:
            self.hooks = hooks.TaskHooks(self.context.task_hooks, self.task_id)
            self.hooks.install(self)

    def enter(self) -> None:
        """Point process-wide user state (``global_metrics``) at this task.

        A runner hosting several tasks in one process calls this before each call into the task.
        """
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
            elif not self.started:  # its StartProcessing follows, naming the restore's epoch
                self.drop_held_input(message.restore.epoch)
        elif body == "resume":
            if self.stateful is not None and message.resume.epoch == self.stateful.epoch:
                self.held = False
        elif body == "committed":
            if self.started and self.stateful is not None:
                self.committed(message.committed.checkpoint_id)
        elif body == "shutdown":
            reason = tmaster_pb2.ShutdownReason.Name(message.shutdown.reason)
            self.logger.info("shutdown (%s) %s", reason, message.shutdown.detail)
            if self.started:
                self.end_turn(self.clock(), force=True)
            raise Stop(ExitCode.OK)

    # ---- effectively once --------------------------------------------------------------------
    def checkpoint(self, checkpoint_id: int) -> None:
        """Snapshot state for ``checkpoint_id``; its upload runs in the background.

        What was emitted before goes first, then the local snapshot, then the markers to every
        downstream task. The report to the stmgr waits for the upload (``_report_saves``).
        """
        assert self.stateful is not None, "checkpoints are sent to effectively-once tasks only"
        self.end_turn(self.clock(), force=True)
        self.stateful.snapshot(self.component, checkpoint_id, self.time_state())
        name = str(checkpoint_id).encode()
        for dest in self.plan.downstream_tasks(self.task_id):
            self.send(frames.data_frame(frames.CHECKPOINT_MARKER, self.task_id, dest, 0, name))
        self._report_saves()

    def _report_saves(self) -> None:
        """Report every save whose upload is done; a failed upload fails the task."""
        assert self.stateful is not None
        for checkpoint_id, error in self.stateful.finished():
            if error is not None:
                raise error
            self.control_message(stmgr_pb2.InstanceToStmgr(
                stored=tmaster_pb2.InstanceStateStored(task_id=self.task_id,
                                                       checkpoint_id=checkpoint_id)))

    def committed(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is committed: a two-phase component's ``post_save``.

        Once per checkpoint id at most, in increasing order (a notice older than the newest
        one seen, or than the checkpoint the task restored, is dropped).
        """
        if checkpoint_id <= self.committed_id:
            return
        self.committed_id = checkpoint_id
        if isinstance(self.component, TwoPhaseStatefulComponent):
            self.component.post_save(checkpoint_id)

    def restore(self, epoch: int, checkpoint_id: int) -> None:
        """Start over from ``checkpoint_id``'s state.

        A two-phase component hears ``pre_restore`` first; then drop what is buffered, build the
        component anew (``init_state``, ``initialize``); a spout holds until ``resume``.
        """
        self.logger.info("task %d restores checkpoint %d (epoch %d)", self.task_id,
                         checkpoint_id, epoch)
        if isinstance(self.component, TwoPhaseStatefulComponent):
            self.component.pre_restore(checkpoint_id)
        paused = self.paused  # a restore does not change whether the topology is deactivated
        kept = self._inbox, self.inbox_bytes, self.gate  # frames not taken yet stay queued
        if self.stateful is not None:  # uploads of the abandoned epoch are never reported
            self.stateful.close()
        type(self).__init__(self, *self._init_args, **self._init_kwargs)
        self.paused = paused
        self._inbox, self.inbox_bytes, self.gate = kept
        self.start(epoch, checkpoint_id, hold=True)

    def end_turn(self, now: float, force: bool = False) -> None:
        """Send what was emitted (unless it lingers): the loop handled everything it had."""
        if not self.lingers(now, force):
            self.collector.flush_all()

    def lingers(self, now: float, force: bool = False) -> bool:
        """Return whether the buffered tuples wait for more.

        They do when a batch of this task left less than ``heron.batch.linger.ms`` ago (a busy
        task sends fewer, bigger batches).
        """
        if force:
            return False
        due = self.collector.due()
        return due is not None and now < due

    def next_deadline(self, now: float) -> float:
        """When the loop must come back at the latest even with no input."""
        due = self.collector.due() if self.collector is not None else None
        if not self._woken and self.stateful is not None and self.stateful.uploading:
            due = now + UPLOAD_POLL_SECS if due is None else min(due, now + UPLOAD_POLL_SECS)
        return self._next_metrics if due is None else min(self._next_metrics, due)

    def on_time(self, now: float) -> None:
        """Run what is due: user metrics (subclasses add ticks and timeouts)."""
        if now >= self._next_metrics:
            self.gather_user_metrics(now)

    def close(self) -> None:
        """End the task cleanly: hooks' ``clean_up``, last metrics (spouts also call ``close``)."""
        if self.stateful is not None:
            self.stateful.close()
        if self.started:
            if self.hooks is not None:
                self.hooks.clean_up()
            self.gather_user_metrics(self.clock(), force=True)

    def control_message(self, message) -> None:
        """Send ``message`` (an ``InstanceToStmgr``) to the stmgr as a control frame."""
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
            if force or (due is not None and now >= due):  # not forced: due is set above
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
                add(name=metric_names.scoped(metric_names.EMIT_COUNT, stream), value=count)
        add(name=metric_names.EXECUTE_COUNT, value=self.executed)
        for name, value in list(self.user_metrics.items()):
            add(name=name, value=value)
        if self.stateful is not None:
            self.stateful.stats.add_metrics(add)
        watermark = self.current_watermark()
        if watermark != WATERMARK_MIN:
            add(name=metric_names.WATERMARK, value=watermark)
            if watermark != WATERMARK_MAX:
                add(name=metric_names.WATERMARK_LAG_MS, value=time.time() * 1000.0 - watermark)
        if self.late_tuples:
            add(name=metric_names.LATE_TUPLES, value=self.late_tuples)
