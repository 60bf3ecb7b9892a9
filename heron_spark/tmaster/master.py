"""The Topology Master: runs in the Spark driver.

It waits for every stmgr to register, builds the physical plan, stores and broadcasts it,
tracks heartbeats, drained tasks and metrics, and drives the end of the topology (finished,
killed or failed). It also runs the management verbs (deactivate, activate, restart, update:
``tmaster.control``) and answers a tracker's live queries (``tmaster.live_queries``: metrics,
exceptions, pids, container files fetched through the stmgrs). Threads: the listener, one
reader per connection (they call the handlers below under ``_lock``) and the liveness check
(``check_liveness``, about once a second); the tracker HTTP server runs apart
(``heron_spark.tracker``). ``done`` is set once the topology has ended.
"""

from __future__ import annotations

import collections
import enum
import logging
import threading
import time
from typing import Callable

from heron_spark._failure_window import FailureWindow
from heron_spark.contract import execution_state, roles
from heron_spark.errors import TopologyStateError, TopologyValueError
from heron_spark.metrics import aggregate
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, physical_plan_pb2, tmaster_pb2
from heron_spark.statemgr.base import StateManager
from heron_spark.statemgr.checkpoints import CheckpointStore
from heron_spark.tmaster import control, live_queries, views
from heron_spark.tmaster.checkpoints import CheckpointCoordinator
from heron_spark.tmaster.liveness import StmgrLiveness
from heron_spark.tmaster.exception_log import ExceptionLog
from heron_spark.tmaster.metrics_cache import MetricsCache
from heron_spark.wire import frames
from heron_spark.wire.connection import Connection, ConnectionClosed, Listener

log = logging.getLogger(__name__)


class TopologyState(enum.Enum):
    """Lifecycle of a topology as the TMaster sees it."""

    STARTING = "STARTING"      # waiting for every stmgr to register
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"          # deactivated: spouts are not asked for tuples (Heron's PAUSED)
    FINISHED = "FINISHED"      # every spout exhausted and every task drained
    KILLED = "KILLED"
    FAILED = "FAILED"

    @property
    def ended(self) -> bool:
        """True in a final state: FINISHED, KILLED or FAILED."""
        return self in (TopologyState.FINISHED, TopologyState.KILLED, TopologyState.FAILED)

    @property
    def processing(self) -> bool:
        """True while the containers run the physical plan (RUNNING or PAUSED)."""
        return self in (TopologyState.RUNNING, TopologyState.PAUSED)


_REASON = {TopologyState.FINISHED: tmaster_pb2.FINISHED, TopologyState.KILLED: tmaster_pb2.KILLED,
           TopologyState.FAILED: tmaster_pb2.FAILED}


class TMaster:
    """See the module docstring."""

    def __init__(self, plan: PlanView, statemgr: StateManager, secret: str, host: str,
                 topology_id: str, frame_max_bytes: int, generation: int = 0,
                 restart_max: int = 5, restart_window_secs: float = 60.0,
                 checkpoint_root: str = "", committed_checkpoint: int = 0,
                 stmgr_heartbeat_timeout_secs: float = 30.0,
                 history: MetricsCache | None = None, exceptions_per_instance: int = 20,
                 deactivated: bool = False) -> None:
        self.plan = plan
        self.name = plan.logical.name
        self.topology_id = topology_id
        self.statemgr = statemgr
        self.generation = generation
        self._frame_max = frame_max_bytes
        self._lock = threading.RLock()
        self.state = TopologyState.STARTING
        self.detail = ""
        self.failure: tmaster_pb2.InstanceFailed | None = None
        self.physical_plan: physical_plan_pb2.PhysicalPlan | None = None
        self.registrations: dict[int, tmaster_pb2.RegisterStmgr] = {}
        self.stmgrs: dict[int, Connection] = {}
        self.heartbeats: dict[int, float] = {}
        # Liveness: stmgrs silent too long are dropped; if they stay away, ``recover_containers``
        # (set by submit: the barrier stage's ``recover``) restarts the stage.
        self.liveness = StmgrLiveness(stmgr_heartbeat_timeout_secs)
        self.recover_containers: Callable[[str], None] | None = None
        self.executor_losses: list[dict] = []  # Spark executors lost with containers on them
        self.drained: set[int] = set()
        self.all_tasks = set(plan.task_component)
        self.metrics: dict[tuple[str, int], dict[str, float]] = {}
        self.history = history or MetricsCache()   # per-minute metrics for the views
        self.exceptions = ExceptionLog(exceptions_per_instance)
        self.restart_max = restart_max
        self.restart_window_secs = restart_window_secs
        self.failures: collections.Counter = collections.Counter()  # task id -> failures
        self._recent_failures: dict[int, FailureWindow] = {}
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.done = threading.Event()
        self.running = threading.Event()
        self.closed = threading.Event()  # containers gone, final metrics in
        self._connections: list[Connection] = []
        self.listener = Listener(host, 0, secret, self.name, self._on_peer, name="tmaster")
        self.host = host
        self.port = self.listener.port
        self.paused = deactivated  # deactivated: spouts emit nothing (state PAUSED once running)
        # ``heron update``: set by the submitter; takes {component: parallelism} and starts the
        # next generation (see scheduler.update). None: updates are refused.
        self.updater: Callable[[dict[str, int]], int] | None = None
        self.updating = False  # between an update's stop of the old generation and the new plan
        self._update_detail = ""
        self._stopped_generation: int | None = None  # the generation an update stopped
        self.checkpoints: CheckpointCoordinator | None = None  # effectively once
        self.files = live_queries.FileFetcher()  # the tracker's container file requests
        # Heron's execution state metadata (cluster, environ, role, submission_time/_user),
        # set by submit; shown by the tracker.
        self.submission: dict = {}
        self._checkpoint_store: CheckpointStore | None = None
        if plan.logical.topology_config.effectively_once:
            self._checkpoint_store = CheckpointStore(checkpoint_root, self.name)
            self.checkpoints = CheckpointCoordinator(
                self.all_tasks, plan.logical.topology_config.checkpoint_interval_secs,
                committed_checkpoint, self._broadcast, self._on_commit, time.monotonic)

    def start(self) -> "TMaster":
        """Start accepting stmgrs, metrics managers and control clients."""
        self.listener.start()
        self._save_state()
        threading.Thread(target=self._liveness_loop, daemon=True,
                         name=f"liveness-{self.name}").start()
        if self.checkpoints is not None:
            threading.Thread(target=self._checkpoint_loop, daemon=True,
                             name=f"checkpoints-{self.name}").start()
        return self

    # ---- connections ---------------------------------------------------------------------
    def _on_peer(self, sock, response) -> None:
        handlers = {roles.STMGR: self._on_stmgr_frame, roles.METRICSMGR: self._on_metrics_frame,
                    roles.CONTROL: self._on_control_frame}
        handler = handlers.get(response.role)
        if handler is None:
            sock.close()
            return
        conn = Connection(sock, f"tmaster<-{roles.role_name(response.role)}-{response.id}", handler,
                          self._on_conn_closed, max_frame_bytes=self._frame_max)
        conn.peer_role, conn.peer_id = response.role, response.id
        with self._lock:
            self._connections.append(conn)
            if response.role == roles.STMGR:
                self.stmgrs[response.id] = conn
        conn.start()

    def _on_conn_closed(self, conn: Connection) -> None:
        with self._lock:
            if conn.peer_role == roles.STMGR and self.stmgrs.get(conn.peer_id) is conn \
                    and not self.state.ended:
                # Its container restarts it (it registers again), or the Spark stage fails and
                # the driver resubmits it: either way the topology goes on.
                log.warning("stmgr of container %d disconnected; waiting for it to register "
                            "again", conn.peer_id)

    def _on_stmgr_frame(self, conn: Connection, kind: int, payload: bytes) -> None:
        message = tmaster_pb2.StmgrToTmaster()
        message.ParseFromString(payload)
        body = message.WhichOneof("body")
        with self._lock:
            if self.stmgrs.get(conn.peer_id) is not conn:
                return  # a stmgr of an earlier generation, or one replaced since
            if body == "heartbeat":
                self.heartbeats[message.heartbeat.container_index] = time.time()
                self.liveness.beat(message.heartbeat.container_index, time.monotonic())
            elif body == "register":
                self._on_register(message.register)
            elif body == "drained":
                if self.checkpoints is not None and self.checkpoints.restoring:
                    return  # from the epoch being rolled back
                self.drained.update(message.drained.task_ids)
                if self.drained >= self.all_tasks and not self.state.ended:
                    self._end(TopologyState.FINISHED, "every spout exhausted, every task drained")
            elif body == "instance_failed":
                self._on_instance_failed(message.instance_failed)
            elif body == "stored" and self.checkpoints is not None:
                self.checkpoints.on_stored(message.stored.task_id, message.stored.checkpoint_id)
            elif body == "restored" and self.checkpoints is not None:
                self.checkpoints.on_restored(message.restored.task_id, message.restored.epoch)
            elif body == "file_response":
                self.files.on_response(message.file_response)

    def _on_instance_failed(self, failed: tmaster_pb2.InstanceFailed) -> None:
        """Count a task's failure; fail the topology once it fails too often.

        Until then its container restarts it.
        """
        self.failures[failed.task_id] += 1
        register = self.registrations.get(self.plan.task_container.get(failed.task_id, -1))
        self.exceptions.record(failed.task_id, failed.component,
                               register.host if register is not None else "",
                               failed.error, failed.log_path, time.time())
        log.error("task %d of %s failed (%d so far): %s", failed.task_id, failed.component,
                  self.failures[failed.task_id], failed.error.strip().splitlines()[-1:] or "")
        self.failure = failed
        window = self._recent_failures.setdefault(failed.task_id,
                                                  FailureWindow(self.restart_window_secs))
        recent = window.record()
        if recent > self.restart_max and not self.state.ended:
            self._end(TopologyState.FAILED,
                      f"task {failed.task_id} of component {failed.component!r} failed "
                      f"{recent} times within {self.restart_window_secs:g} s")
        elif self.physical_plan is not None:
            self._restore(f"task {failed.task_id} failed")

    def begin_generation(self, generation: int, plan: PlanView | None = None) -> None:
        """Forget the containers of the failed (or stopped) stage.

        A new stage (``generation``) starts now, on ``plan`` when an update changed it.
        """
        with self._lock:
            self.generation = generation
            if plan is not None:
                self.plan = plan
                self.all_tasks = set(plan.task_component)
                self.metrics = {key: value for key, value in self.metrics.items()
                                if plan.task_component.get(key[1]) == key[0]}
            old = list(self.stmgrs.values())
            self.stmgrs.clear()
            self.registrations.clear()
            self.heartbeats.clear()
            self.liveness.reset()
            self.drained.clear()  # every task runs again: bounded spouts replay, bolts re-drain
            self.physical_plan = None
            self._save_state()
        for conn in old:
            conn.close()  # any stmgr of the old stage still alive exits on its own
        log.info("topology %s: containers resubmitted as generation %d", self.name, generation)

    def _on_register(self, register: tmaster_pb2.RegisterStmgr) -> None:
        if register.generation != self.generation:
            log.warning("ignoring stmgr %d of generation %d (current %d)",
                        register.container_index, register.generation, self.generation)
            return
        if self._stopped_generation == self.generation:
            # It (re)started after an update stopped its generation: stop it too.
            self._send(self.stmgrs[register.container_index], self._updating_frame())
            return
        previous = self.registrations.get(register.container_index)
        self.registrations[register.container_index] = register
        self.heartbeats[register.container_index] = time.time()
        self.liveness.beat(register.container_index, time.monotonic())
        log.info("stmgr %d registered at %s:%d", register.container_index, register.host,
                 register.data_port)
        if len(self.registrations) < self.plan.container_count:
            return
        moved = previous is not None and (previous.host, previous.data_port) != \
            (register.host, register.data_port)
        if self.physical_plan is None or moved:
            self._broadcast_plan()
        elif self.physical_plan is not None:  # restarted at its old address: it needs the plan
            self._restore(f"stmgr {register.container_index} restarted")
            self._send(self.stmgrs[register.container_index], frames.control_frame(
                tmaster_pb2.TmasterToStmgr(plan=self.physical_plan)))
        if self.drained and self.physical_plan is not None:
            # Tasks that ended before this stmgr (re)started: it replays their end of stream.
            self._send(self.stmgrs[register.container_index], frames.control_frame(
                tmaster_pb2.TmasterToStmgr(drained=tmaster_pb2.TaskDrained(
                    task_ids=sorted(self.drained)))))

    def _broadcast_plan(self) -> None:
        if self.state.ended:
            return
        plan = physical_plan_pb2.PhysicalPlan(topology_name=self.name,
                                              topology_id=self.topology_id,
                                              generation=self.generation,
                                              state=self._plan_state())
        for index in sorted(self.registrations):
            reg = self.registrations[index]
            plan.stmgrs.add(container_index=index, host=reg.host, data_port=reg.data_port,
                            pid=reg.pid)
            plan.instances.extend(reg.instances)
        self.physical_plan = plan
        self.statemgr.set_physical_plan(self.name, plan)
        self._restore(f"physical plan generation {self.generation}")  # before the plan
        frame = frames.control_frame(tmaster_pb2.TmasterToStmgr(plan=plan))
        for conn in self.stmgrs.values():
            self._send(conn, frame)
        self.updating = False
        if self.state == TopologyState.STARTING:
            self.state = TopologyState.PAUSED if self.paused else TopologyState.RUNNING
            self.started_at = time.time()
            self.running.set()
        self._save_state()
        log.info("physical plan broadcast to %d stmgrs", len(self.stmgrs))

    # ---- effectively once ------------------------------------------------------------------
    def _restore(self, reason: str) -> None:
        """Effectively once: roll every task back to the last committed checkpoint."""
        if self.checkpoints is None or self.state.ended:
            return
        self.drained.clear()  # every task runs again from the checkpoint
        self.checkpoints.restore(reason)

    def _broadcast(self, message: tmaster_pb2.TmasterToStmgr) -> None:
        frame = frames.control_frame(message)
        for conn in list(self.stmgrs.values()):
            self._send(conn, frame)

    def _on_commit(self, checkpoint_id: int, epoch: int) -> None:
        self.statemgr.set_committed_checkpoint(self.name, {
            "id": checkpoint_id, "epoch": epoch, "root": self._checkpoint_store.root,
            "time": time.time()})
        try:
            self._checkpoint_store.retain(checkpoint_id)
        except Exception as exc:  # noqa: BLE001 - cleaning up old checkpoints is best effort
            log.warning("could not delete checkpoints older than %d: %s", checkpoint_id, exc)
        log.debug("checkpoint %d committed", checkpoint_id)

    def _checkpoint_loop(self) -> None:
        while not self.done.wait(0.05):
            with self._lock:
                if self.state.processing:  # checkpoints go on while deactivated
                    self.checkpoints.tick(time.monotonic())

    # ---- liveness --------------------------------------------------------------------------
    def _liveness_loop(self) -> None:
        period = min(1.0, self.liveness.timeout_secs / 4)
        while not self.done.wait(period):
            self.check_liveness(time.monotonic())

    def check_liveness(self, now: float) -> None:
        """Drop stmgrs silent for longer than the heartbeat timeout.

        Restart the stage when one stays away for another timeout (its container is stopped or
        its executor gone).
        """
        with self._lock:
            if self.state.ended:
                return
            newly, overdue = self.liveness.check(now)
            dropped = [self.stmgrs.pop(index) for index in newly if index in self.stmgrs]
            for index in newly:
                log.error("topology %s: stmgr of container %d sent no heartbeat for %g s "
                          "(heron.tmaster.stmgr.heartbeat.timeout.secs): treating it as dead",
                          self.name, index, self.liveness.timeout_secs)
            recover = self.recover_containers
        for conn in dropped:
            conn.close()  # a stmgr that was only slow reconnects and registers again
        if overdue:
            reason = (f"the stmgr of container(s) {overdue} did not come back within "
                      f"{self.liveness.timeout_secs:g} s of being found dead")
            log.error("topology %s: %s", self.name, reason)
            if recover is not None:
                recover(reason)

    def executor_lost(self, executor: str, containers: tuple[int, ...], reason: str,
                      generation: int) -> None:
        """Restart the stage now: Spark removed ``executor``, which hosted ``containers`` of it.

        Nothing happens if ``generation`` has been replaced already (Spark failed the stage
        itself and the resubmission policy ran first).
        """
        with self._lock:
            if self.state.ended:
                return
            current = generation == self.generation
            self.executor_losses.append({
                "executor": executor, "containers": list(containers), "reason": reason,
                "time": time.time(), "generation": generation,
                "action": "restart" if current else f"none: generation {self.generation} runs"})
            del self.executor_losses[:-20]
            recover = self.recover_containers
        detail = (f"Spark removed executor {executor}, which hosted container(s) "
                  f"{list(containers)} of generation {generation}: {reason}")
        if not current:
            log.warning("topology %s: %s; already replaced by generation %d", self.name, detail,
                        self.generation)
            return
        log.error("topology %s: %s; restarting its containers now", self.name, detail)
        if recover is not None:
            recover(detail)

    def _on_metrics_frame(self, conn: Connection, kind: int, payload: bytes) -> None:
        snapshot = metrics_pb2.MetricsSnapshot()
        snapshot.ParseFromString(payload)
        with self._lock:
            for publish in snapshot.publishes:
                values = self.metrics.setdefault((publish.component, publish.task_id), {})
                for metric in publish.metrics:
                    values[metric.name] = metric.value
                self.history.add(publish.component, publish.task_id,
                                 [(m.name, m.value) for m in publish.metrics],
                                 publish.timestamp_ms)

    def _on_control_frame(self, conn: Connection, kind: int, payload: bytes) -> None:
        request = tmaster_pb2.ControlRequest()
        request.ParseFromString(payload)
        if request.WhichOneof("body") == "query":  # a tracker asking for live data
            self._send(conn, frames.control_frame(live_queries.answer(self, request.query)))
            return
        self._send(conn, frames.control_frame(control.handle(self, request)))

    # ---- management verbs (heron deactivate / activate / restart / update) ---------------
    def _plan_state(self) -> int:
        return physical_plan_pb2.PAUSED if self.paused else physical_plan_pb2.RUNNING

    def _refuse_unless_live(self, action: str) -> None:
        if self.state.ended:
            raise TopologyStateError(self.name, self.state.value, action,
                                     "it has ended; submit it again to run it")
        if self.updating:
            raise TopologyStateError(self.name, "UPDATING", action,
                                     "wait until the update's new containers run")

    def set_paused(self, paused: bool) -> None:
        """Deactivate (``paused``) or activate the topology: every stmgr tells its spouts.

        Raises TopologyStateError when it has ended or is already in that state.
        """
        action = "deactivate it" if paused else "activate it"
        with self._lock:
            self._refuse_unless_live(action)
            if paused == self.paused:
                word = "deactivated" if paused else "active"
                state = self.state.value if self.state.processing else \
                    f"{self.state.value} ({word})"
                raise TopologyStateError(
                    self.name, state, action, f"it is already {word}; use heron-spark "
                    f"{'activate' if paused else 'deactivate'} {self.name}")
            self.paused = paused
            if self.state.processing:
                self.state = TopologyState.PAUSED if paused else TopologyState.RUNNING
            if self.physical_plan is not None:
                self.physical_plan.state = self._plan_state()
                self.statemgr.set_physical_plan(self.name, self.physical_plan)
            self._broadcast(tmaster_pb2.TmasterToStmgr(
                activation=tmaster_pb2.SetTopologyState(state=self._plan_state())))
            self._save_state()
        log.info("topology %s %s", self.name, "deactivated" if paused else "activated")

    def restart(self, container: int | None = None) -> list[int]:
        """Restart every process of ``container`` (None: of every container).

        Return the containers asked. Their supervisors restart the stmgr and instances; the
        stage stays.
        """
        with self._lock:
            self._refuse_unless_live("restart it")
            if not self.state.processing:
                raise TopologyStateError(self.name, self.state.value, "restart it",
                                         "wait until it is RUNNING (every stmgr registered)")
            count = self.plan.container_count
            if container is not None and not 0 <= container < count:
                msg = "no such container"
                raise TopologyValueError(msg, value=container,
                                         kind="container",
                                         fix=f"pass a container index from 0 to {count - 1}")
            targets = list(range(count)) if container is None else [container]
            frame = frames.control_frame(tmaster_pb2.TmasterToStmgr(shutdown=tmaster_pb2.Shutdown(
                reason=tmaster_pb2.RESTARTING, detail="restart asked")))
            for index in targets:
                conn = self.stmgrs.get(index)
                if conn is not None:
                    self._send(conn, frame)
        log.info("topology %s: restarting containers %s", self.name, targets)
        return targets

    def update(self, parallelism: dict[str, int]) -> int:
        """Rescale components to ``parallelism``; return the generation that runs the new plan.

        The submitter's ``updater`` validates and relaunches (Spark driver).
        """
        with self._lock:
            self._refuse_unless_live("update it")
            if not self.state.processing:
                raise TopologyStateError(self.name, self.state.value, "update it",
                                         "wait until it is RUNNING (every stmgr registered)")
            updater = self.updater
        if updater is None:
            raise TopologyStateError(self.name, self.state.value, "update it",
                                     "only a topology submitted to Spark can be updated")
        return updater(parallelism)

    def stop_generation(self, detail: str) -> None:
        """Tell every stmgr of this generation to shut down for an update.

        The topology does not end; the driver launches the next generation once the
        containers are gone.
        """
        with self._lock:
            self.updating = True
            self._stopped_generation = self.generation
            self._update_detail = detail
            frame = self._updating_frame()
            for conn in list(self.stmgrs.values()):
                self._send(conn, frame)
            self._save_state()

    def _updating_frame(self) -> bytes:
        return frames.control_frame(tmaster_pb2.TmasterToStmgr(shutdown=tmaster_pb2.Shutdown(
            reason=tmaster_pb2.UPDATING, detail=self._update_detail)))

    # ---- lifecycle -----------------------------------------------------------------------
    def kill(self, detail: str = "killed") -> None:
        """Tell every stmgr to stop now (idempotent)."""
        with self._lock:
            if not self.state.ended:
                self._end(TopologyState.KILLED, detail)

    def fail(self, detail: str) -> None:
        """End the topology as failed (the Spark job died, ...); idempotent."""
        with self._lock:
            if not self.state.ended:
                self._end(TopologyState.FAILED, detail)

    def _end(self, state: TopologyState, detail: str) -> None:
        self.state = state
        self.detail = detail
        self.ended_at = time.time()
        log.info("topology %s %s: %s", self.name, state.value, detail)
        shutdown = tmaster_pb2.Shutdown(reason=_REASON[state], detail=detail)
        frame = frames.control_frame(tmaster_pb2.TmasterToStmgr(shutdown=shutdown))
        for conn in self.stmgrs.values():
            self._send(conn, frame)
        self._save_state()
        self.done.set()

    def close(self) -> None:
        """Stop listening and drop every connection (after the containers are gone)."""
        self.closed.set()
        self.listener.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            conn.close()

    # ---- views ---------------------------------------------------------------------------
    def metrics_by_component(self) -> dict[str, dict[str, float]]:
        """Sum every metric over the tasks of each component (``*-max-*`` metrics: the maximum)."""
        with self._lock:
            return aggregate.by_component(self.metrics, self.failures,
                                          self.plan.task_component)

    def metrics_view(self, component: str, names: list[str] | None,
                     instances: list[str] | None, interval_secs: int) -> dict:
        """Answer Heron's ``/topologies/metrics``: each metric of each instance.

        Values are over the last ``interval_secs`` (<= 0: all kept). See ``tmaster.views``;
        raises MetricsQueryError.
        """
        with self._lock:
            return views.metrics_view(self.plan, self.history, time.time(), component, names,
                                      instances, interval_secs)

    def timeline_view(self, component: str, names: list[str] | None,
                      instances: list[str] | None, start_secs: int, end_secs: int) -> dict:
        """Heron's ``/topologies/metrics/timeline``: per-minute values in [start, end]."""
        with self._lock:
            return views.timeline_view(self.plan, self.history, component, names, instances,
                                       start_secs, end_secs)

    def query_view(self, query: str, start_secs: int, end_secs: int) -> list:
        """Heron's ``/topologies/metrics/query``: evaluate a metrics query (``TS(...)``, ...)."""
        with self._lock:
            return views.query_view(self.plan, self.history, query, start_secs, end_secs)

    def exceptions_view(self, component: str, instances: list[str] | None = None) -> list:
        """Answer Heron's ``/topologies/exceptions``: what instances of ``component`` died of.

        ``component`` ``*`` means any. One entry per distinct stack trace.
        """
        with self._lock:
            return views.exceptions_view(self.plan, self.exceptions, component, instances)

    def exception_summary_view(self, component: str,
                               instances: list[str] | None = None) -> list:
        """Heron's ``/topologies/exceptionsummary``: those exceptions per class name."""
        with self._lock:
            return views.exception_summary_view(self.plan, self.exceptions, component,
                                                instances)

    def status(self) -> dict:
        """Return a JSON-ready summary: state, times, stmgrs and their last heartbeat."""
        with self._lock:
            return {"name": self.name, "id": self.topology_id, "state": self.state.value,
                    "detail": self.detail, "started_at": self.started_at,
                    "ended_at": self.ended_at, "containers": self.plan.container_count,
                    "registered": sorted(self.registrations),
                    "heartbeats": {str(k): v for k, v in self.heartbeats.items()},
                    "heartbeat_ages_secs": {str(k): v for k, v in
                                            self.liveness.ages(time.monotonic()).items()},
                    "dead_stmgrs": sorted(self.liveness.dead_since),
                    "executor_losses": list(self.executor_losses),
                    "drained_tasks": len(self.drained), "tasks": len(self.all_tasks),
                    "generation": self.generation, "paused": self.paused,
                    "updating": self.updating,
                    "instance_failures": {str(k): v for k, v in self.failures.items()},
                    "checkpoint": self.checkpoints.status() if self.checkpoints else None,
                    "submission": self.submission}

    def _save_state(self) -> None:
        self.statemgr.set_execution_state(self.name, execution_state.from_status(self.status()))

    @staticmethod
    def _send(conn: Connection, frame: bytes) -> None:
        try:
            conn.send(frame)
        except ConnectionClosed:
            pass

