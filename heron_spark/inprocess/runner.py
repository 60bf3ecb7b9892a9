"""Run a whole topology in this process: the same cores as on Spark, joined by memory.

``InProcessTopology`` builds every container's ``StmgrCore`` and every task's executor
(``instance.shell.build_executor``): the code that runs in a stmgr and an instance process
on Spark, minus their I/O shells. Frames go through in-memory queues instead of sockets: a
stmgr core offers frames to a task's executor (``offer``), a task's output waits in its
queue to the stmgr (what its socket would hold; the output gate watches its bytes). One
thread takes turns, round robin: every task's ``turn`` (the same one an instance process
takes: the input its gate allows, ticks and timeouts, a spout's slice, the turn's output),
then frames from instances to their stmgr and between stmgrs, then every stmgr's tick. When
nothing moved and no task is due, it sleeps until the first task's wake-up time (``sleep``,
which a test may make advance a fake ``clock``). What the TMaster does for a running
topology is done here too: the physical plan, the end once every task has drained,
counting failures.

What stays true: groupings, batching and linger, at-least-once trees, acks, fails and
timeouts, backpressure (the queues' bytes and tuples are watched against the same water
marks; a paused spout's frames wait), the instances' output gates, end of input, ticks, user
metrics. A task whose user code raises reports it (``instance.shell.report_failure``) and is
restarted, as its container would restart it, until it fails more than
``heron.instance.restart.max`` times within ``heron.restart.window.secs``. What needs real
processes (kills, stalls, Spark stages, the tracker) is not here: those are Spark's runner's.

Everything runs on the caller's thread: user code that blocks holds up every task.
"""

from __future__ import annotations

import collections
import logging
import os
import time

from heron_spark._failure_window import FailureWindow
from heron_spark.errors import TopologyRuntimeError
from heron_spark.instance.executor import Stop, TaskExecutor
from heron_spark.instance.shell import build_executor, report_failure
from heron_spark.metrics import aggregate
from heron_spark.plan.prepare import prepare
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, physical_plan_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.statemgr.checkpoints import CheckpointStore, checkpoint_root
from heron_spark.stmgr.core import StmgrCore
from heron_spark.tmaster.checkpoints import CheckpointCoordinator
from heron_spark.wire import frames

log = logging.getLogger(__name__)
_PREFIX_BYTES = frames.PREFIX_BYTES
_unpack_prefix = frames.PREFIX.unpack_from
_IDLE_WAIT_SECS = 0.01       # the longest nap when nothing is due (the stmgrs' ticks)
_LOG_PATH = "(in-process: the caller's logging)"


def _as_frame(frame) -> tuple[int, bytes]:
    """Return (kind, the frame as one bytes object) of what an executor or core sent."""
    if type(frame) is list:
        frame = b"".join(frame)
    return _unpack_prefix(frame, 0)[1], frame


class _Queue:
    """Frames on their way to one receiver, and their bytes (what a socket would hold)."""

    __slots__ = ("frames", "bytes")

    def __init__(self) -> None:
        self.frames: collections.deque = collections.deque()
        self.bytes = 0

    def put(self, frame) -> None:
        kind, data = _as_frame(frame)
        self.frames.append((kind, data))
        self.bytes += len(data)

    def get(self) -> tuple[int, bytes]:
        kind, data = self.frames.popleft()
        self.bytes -= len(data)
        return kind, data


class _Task:
    """One task: its executor and the queue of its output to its stmgr.

    The executor queues what its stmgr offers it.
    """

    def __init__(self, task_id: int, container: int) -> None:
        self.task_id = task_id
        self.container = container
        self.executor: TaskExecutor | None = None
        self.to_stmgr = _Queue()
        self.reading = True     # the stmgr takes this task's frames (False: spout paused)
        self.stopped = False


class _CoreLink:
    """The ``StmgrTransport`` of one container's core: queues instead of sockets."""

    def __init__(self, runner: "InProcessTopology", index: int) -> None:
        self.runner = runner
        self.index = index

    def to_instance(self, task: int, frame) -> bool:
        entry = self.runner.tasks.get(task)
        if entry is None or entry.stopped or entry.executor is None:
            return False
        entry.executor.offer(*_as_frame(frame))
        self.runner.offered = True
        return True

    def to_peer(self, container: int, frame) -> None:
        self.runner.peer_queues[(self.index, container)].put(frame)

    def to_tmaster(self, frame) -> None:
        self.runner.on_tmaster_frame(_as_frame(frame)[1])

    def set_reading(self, task: int, reading: bool) -> None:
        self.runner.tasks[task].reading = reading

    def instance_queued_bytes(self, task: int) -> int:
        executor = self.runner.tasks[task].executor
        return 0 if executor is None else executor.inbox_bytes

    def peer_queued_bytes(self) -> int:
        return max((q.bytes for (src, _), q in self.runner.peer_queues.items()
                    if src == self.index), default=0)

    def retarget_peers(self, addresses) -> None:
        """Peers are in this process: nothing to dial."""

    def announce_stop(self) -> None:
        """Nothing to tell: no supervisor watches an in-process stmgr."""

    def failure_note(self, task: int) -> str | None:
        """None: a failed task reported its failure itself, before its queue closed."""
        return None

    def instance_log(self, task: int) -> str:
        return _LOG_PATH


class InProcessTopology:
    """A topology run on this thread by its own stmgr and instance cores.

    See the module docstring. ``run`` it once; then read ``status``, ``metrics()``,
    ``physical_plan``.
    """

    def __init__(self, topology, conf: dict | None = None, name: str | None = None,
                 clock=time.monotonic, sleep=time.sleep) -> None:
        prepared = prepare(topology, conf, name)
        self.name = prepared.logical.name
        self.config = prepared.system
        self.clock = clock
        self.sleep = sleep  # sleep(secs): waits until clock() has advanced secs
        physical = physical_plan_pb2.PhysicalPlan(topology_name=self.name,
                                                  topology_id=f"{self.name}-in-process")
        view = prepared.view
        for index in range(view.container_count):
            physical.stmgrs.add(container_index=index, host="in-process", data_port=0,
                                pid=os.getpid())
            for task in view.tasks_in(index):
                physical.instances.add(task_id=task, component=view.task_component[task],
                                       component_index=view.task_index[task],
                                       container_index=index, pid=os.getpid())
        self.physical_plan = physical
        self.plan = PlanView(prepared.logical, prepared.packing, physical)
        self.tasks = {task: _Task(task, container)
                      for task, container in sorted(view.task_container.items())}
        self.peer_queues = {(a, b): _Queue() for a in range(view.container_count)
                            for b in range(view.container_count) if a != b}
        self.offered = False  # a stmgr offered a task frames since this turn began
        self.cores = [StmgrCore(view, self.config, index, _CoreLink(self, index), clock)
                      for index in range(view.container_count)]
        self.status = "STARTING"
        self.detail = ""
        self.failure: tmaster_pb2.InstanceFailed | None = None
        self.failures: collections.Counter = collections.Counter()
        self._failure_windows: dict[int, FailureWindow] = {}
        self.drained: set[int] = set()
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self._final_metrics: dict[str, dict[str, float]] | None = None
        self.checkpoints: CheckpointCoordinator | None = None  # effectively once
        if prepared.logical.topology_config.effectively_once:
            self._checkpoint_store = CheckpointStore(
                checkpoint_root(self.config.checkpoint_root, self.config.work_dir), self.name)
            self._checkpoint_store.clear()
            self.checkpoints = CheckpointCoordinator(
                set(self.tasks), prepared.logical.topology_config.checkpoint_interval_secs, 0,
                self._broadcast, lambda checkpoint, _: self._checkpoint_store.retain(checkpoint),
                clock)

    # ---- the TMaster's part ---------------------------------------------------------------
    def on_tmaster_frame(self, frame: bytes) -> None:
        """Handle what a stmgr core sends its TMaster."""
        message = tmaster_pb2.StmgrToTmaster()
        message.ParseFromString(memoryview(frame)[_PREFIX_BYTES:])
        body = message.WhichOneof("body")
        if body == "stored" and self.checkpoints is not None:
            self.checkpoints.on_stored(message.stored.task_id, message.stored.checkpoint_id)
        elif body == "restored" and self.checkpoints is not None:
            self.checkpoints.on_restored(message.restored.task_id, message.restored.epoch)
        elif body == "drained":
            if self.checkpoints is not None and self.checkpoints.restoring:
                return  # from the epoch being rolled back
            self.drained.update(message.drained.task_ids)
            if self.drained >= set(self.tasks):
                self._end("FINISHED", "every spout exhausted, every task drained")
        elif body == "instance_failed":
            failed = message.instance_failed
            self.failure = failed
            self.failures[failed.task_id] += 1
            window = self._failure_windows.setdefault(
                failed.task_id, FailureWindow(self.config.restart_window_secs, self.clock))
            recent = window.record()
            if recent > self.config.instance_restart_max:
                self._end("FAILED", f"task {failed.task_id} of component {failed.component!r} "
                                    f"failed {recent} times within "
                                    f"{self.config.restart_window_secs:g} s")
            elif self.checkpoints is not None and not self.ended:
                self.drained.clear()
                self.checkpoints.restore(f"task {failed.task_id} failed")

    def _broadcast(self, message: tmaster_pb2.TmasterToStmgr) -> None:
        frame = frames.control_frame(message)
        for core in self.cores:
            core.on_tmaster_frame(frame)

    @property
    def ended(self) -> bool:
        """True once the run is FINISHED, KILLED or FAILED (shutdown sent to every stmgr)."""
        return self.status in ("FINISHED", "KILLED", "FAILED")

    def _end(self, status: str, detail: str) -> None:
        if self.ended:
            return
        self.status, self.detail = status, detail
        self.ended_at = time.time()
        log.info("topology %s %s: %s", self.name, status, detail)
        reason = getattr(tmaster_pb2, status)
        frame = frames.control_frame(tmaster_pb2.TmasterToStmgr(
            shutdown=tmaster_pb2.Shutdown(reason=reason, detail=detail)))
        for core in self.cores:
            core.on_tmaster_frame(frame)

    def kill(self, detail: str = "killed") -> None:
        """End the run as KILLED (from the running thread, e.g. a timeout)."""
        self._end("KILLED", detail)

    # ---- instances ------------------------------------------------------------------------
    def _launch(self, entry: _Task) -> None:
        """Create a task's executor and register it with its stmgr core.

        As a new process dialling in and sending its pid would.
        """
        to_stmgr = entry.to_stmgr
        entry.executor = build_executor(self.plan, entry.task_id, self.config, to_stmgr.put,
                                        clock=self.clock, output_queued=lambda: to_stmgr.bytes)
        entry.stopped = False
        entry.reading = True
        core = self.cores[entry.container]
        core.instance_connected(entry.task_id)
        core.on_instance_frame(entry.task_id, frames.CONTROL, frames.control_frame(
            stmgr_pb2.InstanceToStmgr(register=stmgr_pb2.RegisterInstance(
                task_id=entry.task_id, pid=os.getpid()))))

    def _crashed(self, entry: _Task, exc: BaseException) -> None:
        """Handle a crash of ``entry``'s user code.

        Report it as its instance would, close its connection, and start it again unless the
        topology ended.
        """
        report_failure(entry.executor, exc, _LOG_PATH)
        core = self.cores[entry.container]
        while entry.to_stmgr.frames:  # what it sent before it died, as a socket would hold
            core.on_instance_frame(entry.task_id, *entry.to_stmgr.get())
        entry.stopped = True
        entry.executor = None  # what was offered to it and not taken goes with it
        core.instance_closed(entry.task_id)
        if self.status == "RUNNING":
            self._launch(entry)

    def _guarded(self, entry: _Task, call, *args):
        """Run one executor call; a Stop ends the task, any other exception is a crash."""
        try:
            entry.executor.enter()  # global_metrics count for this task
            return call(*args)
        except Stop:
            entry.stopped = True
            entry.executor.close()
        except Exception as exc:  # noqa: BLE001 - user code failed: restart it, count it
            self._crashed(entry, exc)
        return None

    # ---- running --------------------------------------------------------------------------
    def run(self, timeout: float | None = None) -> str:
        """Run until the topology ends (or ``timeout`` seconds, then kill it); return its status.

        Raises ``TopologyRuntimeError`` when it failed.
        """
        deadline = None if timeout is None else self.clock() + timeout
        for entry in self.tasks.values():
            self._launch(entry)
        plan_frame = frames.control_frame(tmaster_pb2.TmasterToStmgr(plan=self.physical_plan))
        self.status = "RUNNING"
        self.started_at = time.time()
        if self.checkpoints is not None:
            self.checkpoints.restore("start")  # every task starts from no state, spouts held
        for core in self.cores:
            core.on_tmaster_frame(plan_frame)
        timed_out = False
        while not self._all_stopped():
            if deadline is not None and self.clock() >= deadline and not timed_out:
                timed_out = True
                self.kill(f"not ended within {timeout:g} s")
            if self.checkpoints is not None and not self.ended:
                self.checkpoints.tick(self.clock())
            wake_at = self._turn()
            now = self.clock()
            if wake_at is None or wake_at > now:  # nothing moved, no task is due yet
                self.sleep(_IDLE_WAIT_SECS if wake_at is None
                           else min(_IDLE_WAIT_SECS, wake_at - now))
        self._final_metrics = self._collect_metrics()
        if timed_out and self.status == "KILLED":
            msg = f"topology {self.name!r} did not end within {timeout} s"
            raise TimeoutError(msg)
        if self.status == "FAILED":
            if self.failure is not None:  # no log file: its log went to the caller's logging
                raise TopologyRuntimeError.from_instance_failure(self.failure, log_path="")
            raise TopologyRuntimeError(self.detail or "topology failed")
        return self.status

    def _all_stopped(self) -> bool:
        return self.ended and all(
            entry.stopped or entry.executor is None for entry in self.tasks.values())

    def _turn(self) -> float | None:
        """Run one turn of every task, then of the queues to the stmgrs, then of every stmgr.

        Return when the next is due: now when frames moved, else the first task's wake-up time
        (None: every task only waits for input).
        """
        wake_at = None
        clock = self.clock
        self.offered = False
        for entry in self.tasks.values():
            executor = entry.executor
            if executor is None or entry.stopped:
                continue
            due = self._guarded(entry, executor.turn, clock())
            if due is not None and (wake_at is None or due < wake_at):
                wake_at = due
        moved = False
        for entry in self.tasks.values():  # instances -> their stmgr
            core = self.cores[entry.container]
            queue = entry.to_stmgr
            while queue.frames and entry.reading:
                kind, frame = queue.get()
                core.on_instance_frame(entry.task_id, kind, frame)
                moved = True
        for (_, dest), queue in self.peer_queues.items():  # stmgr -> stmgr
            core = self.cores[dest]
            while queue.frames:
                kind, frame = queue.get()
                core.on_peer_frame(kind, frame)
                moved = True
        now = clock()
        for core in self.cores:
            core.tick(now)
        return now if moved or self.offered else wake_at

    # ---- results --------------------------------------------------------------------------
    def _collect_metrics(self) -> dict[str, dict[str, float]]:
        per_task: dict[tuple[str, int], dict[str, float]] = {}
        for entry in self.tasks.values():
            if entry.executor is None:
                continue
            values = per_task.setdefault((entry.executor.component_name, entry.task_id), {})
            entry.executor.add_metrics(lambda name, value, v=values: v.__setitem__(name, value))
        for core in self.cores:
            publish: metrics_pb2.MetricsPublish = core.metrics_snapshot(0)
            values = per_task.setdefault((publish.component, publish.task_id), {})
            for metric in publish.metrics:
                values[metric.name] = metric.value
        return aggregate.by_component(per_task, self.failures, self.plan.task_component)

    def metrics(self) -> dict[str, dict[str, float]]:
        """Every metric summed per component, as ``TopologyHandle.metrics`` gives them."""
        return self._final_metrics if self._final_metrics is not None \
            else self._collect_metrics()
