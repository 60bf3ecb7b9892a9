"""Run a whole topology in this process: the same cores as on Spark, joined by memory.

``InProcessTopology`` builds every container's ``StmgrCore`` and every task's executor
(``instance.shell.build_executor``): the code that runs in a stmgr and an instance process
on Spark, minus their I/O shells. Frames go through in-memory queues instead of sockets (the
transport the control-plane simulator uses too, ``transport``): a stmgr core offers frames to
a task's executor (``offer``), a task's output waits in its queue to the stmgr (what its
socket would hold; the output gate watches its bytes). One
thread takes turns, round robin: every task's ``turn`` (the same one an instance process
takes: the input its gate allows, ticks and timeouts, a spout's slice, the turn's output),
then frames from instances to their stmgr and between stmgrs, then every stmgr's tick. When
nothing moved and no task is due, it sleeps until the first task's wake-up time (``sleep``,
which a test may make advance a fake ``clock``). The TMaster is the Spark TMaster's own core
(``tmaster.core.TMasterCore``): every stmgr registers with it, and it builds and sends the
physical plan, counts failures, ends the run once every task drained, and drives checkpoints.
The stmgr cores' frames to it go straight in; its frames reach them as each of its events
returns (``transport.Wires.tmaster_call``). It checks no heartbeats: the stmgrs live on this
thread.

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

from heron_spark.errors import TopologyRuntimeError
from heron_spark.instance.executor import Stop, TaskExecutor
from heron_spark.instance.shell import build_executor, report_failure
from heron_spark.metrics import aggregate
from heron_spark.plan.prepare import prepare
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, physical_plan_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.statemgr.checkpoints import CheckpointStore, checkpoint_root
from heron_spark.inprocess.transport import FrameQueue, StmgrLink, TMasterLink, Wires, as_frame
from heron_spark.stmgr.core import StmgrCore
from heron_spark.tmaster.checkpoints import CheckpointCoordinator
from heron_spark.tmaster.core import TMasterCore, TopologyState, build_physical_plan
from heron_spark.wire import frames

log = logging.getLogger(__name__)
_IDLE_WAIT_SECS = 0.01       # the longest nap when nothing is due (the stmgrs' ticks)
_LOG_PATH = "(in-process: the caller's logging)"


class _Task:
    """One task: its executor and the queue of its output to its stmgr.

    The executor queues what its stmgr offers it.
    """

    def __init__(self, task_id: int, container: int) -> None:
        self.task_id = task_id
        self.container = container
        self.executor: TaskExecutor | None = None
        self.to_stmgr = FrameQueue()
        self.reading = True     # the stmgr takes this task's frames (False: spout paused)
        self.stopped = False


class _Executors:
    """The runner's tasks as a stmgr core's ``InstanceEnds``: frames offered to executors."""

    def __init__(self, runner: "InProcessTopology") -> None:
        self.runner = runner

    def offer(self, task: int, frame) -> bool:
        entry = self.runner.tasks.get(task)
        if entry is None or entry.stopped or entry.executor is None:
            return False
        entry.executor.offer(*as_frame(frame))
        self.runner.offered = True
        return True

    def set_reading(self, task: int, reading: bool) -> None:
        self.runner.tasks[task].reading = reading

    def queued_bytes(self, task: int) -> int:
        executor = self.runner.tasks[task].executor
        return 0 if executor is None else executor.inbox_bytes


class InProcessTopology:
    """A topology run on this thread by its own stmgr and instance cores.

    See the module docstring. ``run`` it once; then read ``status``, ``metrics()``,
    ``physical_plan``.
    """

    def __init__(self, topology, conf: dict | None = None, name: str | None = None,
                 clock=time.monotonic, sleep=time.sleep) -> None:
        prepared = prepare(topology, conf, name)
        prepared.logical.resolve_classes()  # class paths import here, where the tasks run
        self.name = prepared.logical.name
        self.config = prepared.system
        self.clock = clock
        self.sleep = sleep  # sleep(secs): waits until clock() has advanced secs
        view = prepared.view
        topology_id = f"{self.name}-in-process"
        # What each stmgr tells the TMaster when it registers (``run``).
        self._registrations = {index: tmaster_pb2.RegisterStmgr(
            container_index=index, host="in-process", data_port=0, pid=os.getpid(),
            instances=[physical_plan_pb2.InstanceInfo(
                task_id=task, component=view.task_component[task],
                component_index=view.task_index[task], container_index=index, pid=os.getpid())
                for task in view.tasks_in(index)]) for index in range(view.container_count)}
        self.plan = PlanView(prepared.logical, prepared.packing, build_physical_plan(
            self.name, topology_id, 0, False, self._registrations))
        self.tasks = {task: _Task(task, container)
                      for task, container in sorted(view.task_container.items())}
        self.offered = False  # a stmgr offered a task frames since this turn began
        self.wires = Wires(view.container_count, clock)
        executors = _Executors(self)
        self.cores = [StmgrCore(view, self.config, index,
                                StmgrLink(self.wires, index, executors, _LOG_PATH), clock)
                      for index in range(view.container_count)]
        self.wires.cores = self.cores
        self._final_metrics: dict[str, dict[str, float]] | None = None
        self.checkpoint_store: CheckpointStore | None = None  # effectively once
        if prepared.logical.topology_config.effectively_once:
            self.checkpoint_store = CheckpointStore(
                checkpoint_root(self.config.checkpoint_root, self.config.work_dir), self.name)
            self.checkpoint_store.clear()
        self.tmaster = TMasterCore(
            self.plan, topology_id, TMasterLink(self.wires, self._checkpoint_committed),
            restart_max=self.config.instance_restart_max,
            restart_window_secs=self.config.restart_window_secs,
            wall_offset_secs=time.time() - clock())
        self.wires.tmaster = self.tmaster

    # ---- the TMaster's part ---------------------------------------------------------------
    def _checkpoint_committed(self, checkpoint_id: int, epoch: int, at: float) -> None:
        if self.checkpoint_store is not None:
            self.checkpoint_store.retain(checkpoint_id)

    @property
    def status(self) -> str:
        """The run's state: STARTING, RUNNING, then FINISHED, KILLED or FAILED."""
        return self.tmaster.state.value

    @property
    def detail(self) -> str:
        """Why the run ended."""
        return self.tmaster.detail

    @property
    def failure(self) -> tmaster_pb2.InstanceFailed | None:
        """The last task failure reported."""
        return self.tmaster.failure

    @property
    def failures(self) -> collections.Counter:
        """Failures reported per task id."""
        return self.tmaster.failures

    @property
    def started_at(self) -> float | None:
        """When the physical plan went out (epoch seconds)."""
        return self.tmaster.started_at

    @property
    def ended_at(self) -> float | None:
        """When the run ended (epoch seconds)."""
        return self.tmaster.ended_at

    @property
    def checkpoints(self) -> CheckpointCoordinator | None:
        """The TMaster's checkpoint coordinator (effectively once), else None."""
        return self.tmaster.checkpoints

    @property
    def physical_plan(self) -> physical_plan_pb2.PhysicalPlan:
        """The physical plan: the TMaster's once every stmgr registered."""
        return self.tmaster.physical_plan or self.plan.physical

    @property
    def ended(self) -> bool:
        """True once the run is FINISHED, KILLED or FAILED (shutdown sent to every stmgr)."""
        return self.tmaster.state.ended

    def kill(self, detail: str = "killed") -> None:
        """End the run as KILLED (from the running thread, e.g. a timeout)."""
        self.wires.tmaster_call(self.tmaster.kill, detail, self.clock())

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

    def _crashed(self, entry: _Task, executor: TaskExecutor, exc: BaseException) -> None:
        """Handle a crash of ``entry``'s user code (run by ``executor``).

        Report it as its instance would, close its connection, and start it again unless the
        topology ended.
        """
        report_failure(executor, exc, _LOG_PATH)
        core = self.cores[entry.container]
        while entry.to_stmgr.frames:  # what it sent before it died, as a socket would hold
            core.on_instance_frame(entry.task_id, *entry.to_stmgr.get())
        entry.stopped = True
        if executor.stateful is not None:  # its uploader thread and RocksDB database
            executor.stateful.close()
        entry.executor = None  # what was offered to it and not taken goes with it
        core.instance_closed(entry.task_id)
        if self.tmaster.state is TopologyState.RUNNING:
            self._launch(entry)

    def _guarded(self, entry: _Task, executor: TaskExecutor, call, *args):
        """Run one call of ``entry``'s executor; a Stop ends the task, any other exception is a crash."""
        try:
            executor.enter()  # global_metrics count for this task
            return call(*args)
        except Stop:
            entry.stopped = True
            executor.close()
        except Exception as exc:  # noqa: BLE001 - user code failed: restart it, count it
            self._crashed(entry, executor, exc)
        return None

    # ---- running --------------------------------------------------------------------------
    def run(self, timeout: float | None = None) -> str:
        """Run until the topology ends (or ``timeout`` seconds, then kill it); return its status.

        Raises ``TopologyRuntimeError`` when it failed.
        """
        deadline = None if timeout is None else self.clock() + timeout
        for entry in self.tasks.values():
            self._launch(entry)
        now = self.clock()
        # Every stmgr registers; the TMaster then rolls every task back to no state (effectively
        # once: spouts held) and sends the physical plan.
        for index, register in self._registrations.items():
            self.wires.tmaster_call(self.tmaster.on_stmgr_message,
                                    index, tmaster_pb2.StmgrToTmaster(register=register), now)
        timed_out = False
        while not self._all_stopped():
            if deadline is not None and self.clock() >= deadline and not timed_out:
                timed_out = True
                self.kill(f"not ended within {timeout:g} s")
            self.wires.tmaster_call(self.tmaster.tick, self.clock())  # checkpoints
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
            due = self._guarded(entry, executor, executor.turn, clock())
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
        if self.wires.deliver():  # stmgr -> stmgr, and the TMaster's
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
        return aggregate.by_component(per_task, self.tmaster.failures,
                                      self.plan.task_component)

    def metrics(self) -> dict[str, dict[str, float]]:
        """Every metric summed per component, as ``TopologyHandle.metrics`` gives them."""
        return self._final_metrics if self._final_metrics is not None \
            else self._collect_metrics()
