"""The Topology Master's shell: runs in the Spark driver around a ``core.TMasterCore``.

The core holds the rules (the physical plan once every stmgr registered, heartbeats and
liveness, the end of the topology, failures per task, checkpoints, the management verbs,
metrics history); this shell gives it sockets, threads and the state manager. It accepts
stmgrs, metrics managers and control clients (``tmaster.control``: kill and the management
verbs; ``tmaster.live_queries``: a tracker's metrics, exceptions, pids, container files
fetched through the stmgrs), feeds the core every frame under ``_lock``, sends the frames it
asks for on the matching connections and stores what it saves. Threads: the listener, one
reader per connection, the liveness check (``check_liveness``, about once a second) and, under
effectively once, the checkpoint clock (every 50 ms); the tracker HTTP server runs apart
(``heron_spark.tracker``). ``running`` is set once the first plan went out, ``done`` once the
topology has ended.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable, Protocol

from heron_spark.config import SystemConfig
from heron_spark.contract import execution_state, roles
from heron_spark.errors import TopologyStateError
from heron_spark.metrics import aggregate
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, physical_plan_pb2, tmaster_pb2
from heron_spark.statemgr.base import StateManager
from heron_spark.statemgr.checkpoints import CheckpointStore, checkpoint_root
from heron_spark.tmaster import control, live_queries, views
from heron_spark.tmaster.core import TMasterCore, TopologyState
from heron_spark.tmaster.metrics_cache import MetricsCache
from heron_spark.wire import frames
from heron_spark.wire.connection import Connection, ConnectionClosed, Listener

__all__ = ["Scheduler", "TMaster", "TopologyState"]

log = logging.getLogger(__name__)


class Scheduler(Protocol):
    """What a TMaster asks of the scheduler that runs its containers (Heron's scheduler client).

    The submitter's is ``scheduler.run.TopologyRun``; container 0's TMaster hands both verbs
    to the submitter by exiting (``entry.tmaster``). Called outside the TMaster's lock.
    """

    def recover(self, reason: str) -> None:
        """Replace every container now (a lost executor, a stmgr that stays away)."""

    def update(self, parallelism: dict[str, int]) -> int:
        """Rescale to ``parallelism`` (checked and accepted); return the generation to run it."""


class _Links:
    """The core's ``TMasterTransport``: the TMaster's connections and its state manager.

    Called by the core under the TMaster's lock. What must not run under it (closing a
    connection, restarting the stage) waits in ``to_close`` / ``recoveries`` for the event's end.
    """

    def __init__(self, tmaster: "TMaster", statemgr: StateManager,
                 checkpoint_store: CheckpointStore | None) -> None:
        self.tmaster = tmaster
        self.statemgr = statemgr
        self.checkpoint_store = checkpoint_store
        self.to_close: list[Connection] = []
        self.recoveries: list[str] = []

    def to_stmgr(self, index: int, frame: bytes) -> None:
        conn = self.tmaster.stmgrs.get(index)
        if conn is not None:
            _send(conn, frame)

    def to_stmgrs(self, frame: bytes) -> None:
        for conn in list(self.tmaster.stmgrs.values()):
            _send(conn, frame)

    def drop_stmgr(self, index: int) -> None:
        conn = self.tmaster.stmgrs.pop(index, None)
        if conn is not None:
            self.to_close.append(conn)

    def recover(self, reason: str) -> None:
        self.recoveries.append(reason)

    def save_plan(self, plan: physical_plan_pb2.PhysicalPlan) -> None:
        self.statemgr.set_physical_plan(self.tmaster.name, plan)

    def save_state(self, state: execution_state.ExecutionState) -> None:
        self.statemgr.set_execution_state(self.tmaster.name, state)

    def checkpoint_committed(self, checkpoint_id: int, epoch: int, at: float) -> None:
        store = self.checkpoint_store
        assert store is not None  # a core has checkpoints only under effectively once
        self.statemgr.set_committed_checkpoint(self.tmaster.name, {
            "id": checkpoint_id, "epoch": epoch, "root": store.root, "time": at})
        try:
            store.retain(checkpoint_id)
        except Exception as exc:  # noqa: BLE001 - cleaning up old checkpoints is best effort
            log.warning("could not delete checkpoints older than %d: %s", checkpoint_id, exc)

    def file_response(self, response: tmaster_pb2.FileResponse) -> None:
        self.tmaster.files.on_response(response)


def _send(conn: Connection, frame: bytes) -> None:
    try:
        conn.send(frame)
    except ConnectionClosed:
        pass


class TMaster:
    """See the module docstring."""

    def __init__(self, plan: PlanView, statemgr: StateManager, secret: str, host: str,
                 topology_id: str, frame_max_bytes: int, generation: int = 0,
                 restart_max: int = 5, restart_window_secs: float = 60.0,
                 checkpoint_root: str = "", committed_checkpoint: int = 0,
                 stmgr_heartbeat_timeout_secs: float = 30.0,
                 history: MetricsCache | None = None, exceptions_per_instance: int = 20,
                 deactivated: bool = False, scheduler: Scheduler | None = None) -> None:
        self.name = plan.logical.name
        self.topology_id = topology_id
        self.statemgr = statemgr
        self._frame_max = frame_max_bytes
        self._lock = threading.RLock()
        self.stmgrs: dict[int, Connection] = {}  # container index -> its stmgr's connection
        store = CheckpointStore(checkpoint_root, self.name) \
            if plan.logical.topology_config.effectively_once else None
        self._links = _Links(self, statemgr, store)
        self.core = TMasterCore(
            plan, topology_id, self._links, generation=generation, restart_max=restart_max,
            restart_window_secs=restart_window_secs, committed_checkpoint=committed_checkpoint,
            stmgr_heartbeat_timeout_secs=stmgr_heartbeat_timeout_secs, history=history,
            exceptions_per_instance=exceptions_per_instance, deactivated=deactivated,
            wall_offset_secs=time.time() - time.monotonic())
        # Liveness: stmgrs silent too long are dropped; if they stay away, the scheduler's
        # ``recover`` restarts the stage. ``heron update`` goes to its ``update``. None: the
        # containers cannot be replaced and updates are refused.
        self.scheduler = scheduler
        self.done = threading.Event()
        self.running = threading.Event()
        self.closed = threading.Event()  # containers gone, final metrics in
        self._connections: list[Connection] = []
        self._metrics_hung_up = threading.Condition(self._lock)  # a metrics manager closed
        # Frames and payload bytes received per peer role (``stmgr``: registrations,
        # heartbeats, ...; ``metricsmgr``: metrics snapshots), shown by ``status``.
        self._received: collections.Counter = collections.Counter()
        self.listener = Listener(host, 0, secret, self.name, self._on_peer, name="tmaster")
        self.host = host
        self.port = self.listener.port
        # A TMaster in container 0: only its submitter can run the next generation, so an
        # update it did not queue (``heron-spark update``) is refused with this fix.
        self.unqueued_update_fix: str | None = None
        self.files = live_queries.FileFetcher()  # the tracker's container file requests
        # The tracker serving beside this TMaster in container 0 (placement container): its
        # URL and a function minting a one-time login link to it (``live_queries``' ``ui_link``
        # view). None in the driver, whose tracker the handle holds itself, or with the tracker
        # off (``heron.tracker.port`` -1).
        self.tracker_url: str | None = None
        self.login_link: Callable[[], str] | None = None

    # ---- the core's state, read by the handle, the scheduler and the tracker -------------
    @property
    def state(self) -> TopologyState:
        """The topology's lifecycle state."""
        return self.core.state

    @property
    def plan(self) -> PlanView:
        """The plan of the current generation."""
        return self.core.plan

    @property
    def generation(self) -> int:
        """The current generation of containers (0, then one more per resubmission or update)."""
        return self.core.generation

    @property
    def physical_plan(self) -> physical_plan_pb2.PhysicalPlan | None:
        """The current physical plan (None until every stmgr of the generation registered)."""
        return self.core.physical_plan

    @property
    def detail(self) -> str:
        """Why the topology ended (empty while it runs)."""
        return self.core.detail

    @property
    def failure(self) -> tmaster_pb2.InstanceFailed | None:
        """The last task failure reported."""
        return self.core.failure

    @property
    def started_at(self) -> float | None:
        """When the first physical plan went out (epoch seconds)."""
        return self.core.started_at

    @property
    def ended_at(self) -> float | None:
        """When the topology ended (epoch seconds)."""
        return self.core.ended_at

    @property
    def updating(self) -> bool:
        """Whether an update stopped the old generation and its new plan is not out yet."""
        return self.core.updating

    @property
    def paused(self) -> bool:
        """Whether the topology is deactivated."""
        return self.core.paused

    @property
    def registrations(self) -> dict[int, tmaster_pb2.RegisterStmgr]:
        """The registrations of the current generation's stmgrs, by container index."""
        return self.core.registrations

    @property
    def metrics(self) -> dict[tuple[str, int], dict[str, float]]:
        """The latest value of each metric, by (component, task)."""
        return self.core.metrics

    @property
    def submission(self) -> dict:
        """Heron's execution state metadata (cluster, environ, role, ...), set by submit."""
        return self.core.submission

    @submission.setter
    def submission(self, value: dict) -> None:
        self.core.submission = value

    @classmethod
    def from_system(cls, plan: PlanView, statemgr: StateManager, secret: str, host: str,
                    topology_id: str, generation: int, system: SystemConfig,
                    committed_checkpoint: int, deactivated: bool,
                    scheduler: Scheduler | None) -> "TMaster":
        """Build a TMaster with the limits, timeouts and history sizes of ``system``."""
        return cls(plan, statemgr, secret, host, topology_id, system.frame_max_bytes,
                   generation, system.instance_restart_max, system.restart_window_secs,
                   checkpoint_root=checkpoint_root(system.checkpoint_root, system.work_dir),
                   committed_checkpoint=committed_checkpoint,
                   stmgr_heartbeat_timeout_secs=system.tmaster_stmgr_heartbeat_timeout_secs,
                   history=MetricsCache(system.tmaster_metrics_bucket_secs,
                                        system.tmaster_metrics_retention_secs,
                                        system.tmaster_metrics_max_series),
                   exceptions_per_instance=system.tmaster_exceptions_per_instance,
                   deactivated=deactivated, scheduler=scheduler)

    def start(self) -> "TMaster":
        """Start accepting stmgrs, metrics managers and control clients."""
        self.listener.start()
        self._event(self.core.save_state, time.monotonic())
        threading.Thread(target=self._liveness_loop, daemon=True,
                         name=f"liveness-{self.name}").start()
        if self.core.checkpoints is not None:
            threading.Thread(target=self._checkpoint_loop, daemon=True,
                             name=f"checkpoints-{self.name}").start()
        return self

    def _event(self, event: Callable, *args):
        """Run one core event under the lock; then close, recover and signal what it asked."""
        with self._lock:
            result = event(*args)
            if self.core.started_at is not None:
                self.running.set()
            if self.core.state.ended:
                self.done.set()
            links = self._links
            to_close, links.to_close = links.to_close, []
            recoveries, links.recoveries = links.recoveries, []
        for conn in to_close:
            conn.close()  # overdue: the stage restarts; the stmgr, if alive, exits
        for reason in recoveries:
            if self.scheduler is not None:
                self.scheduler.recover(reason)
        return result

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
            if conn.peer_role == roles.STMGR and self.stmgrs.get(conn.peer_id) is conn:
                self.core.on_stmgr_closed(conn.peer_id)
            elif conn.peer_role == roles.METRICSMGR:
                self._metrics_hung_up.notify_all()

    def await_final_metrics(self, timeout_secs: float) -> bool:
        """Wait until every metrics manager connected here hung up; return whether all did.

        A metrics manager sends its last snapshot, then closes its connection, and this side
        reads every frame before it sees the close: once all are closed, every container's
        final values are in. The TMaster of container 0 calls this when the topology ended,
        before it writes what the submitter reads, since the other containers stop on their
        own clock.
        """
        with self._metrics_hung_up:
            return self._metrics_hung_up.wait_for(
                lambda: not any(c.peer_role == roles.METRICSMGR and not c.closed
                                for c in self._connections), timeout_secs)

    def _count(self, role: str, payload: bytes) -> None:
        with self._lock:
            self._received[role + ".frames"] += 1
            self._received[role + ".bytes"] += len(payload)

    def _on_stmgr_frame(self, conn: Connection, kind: int, payload: bytes) -> None:
        self._count("stmgr", payload)
        message = tmaster_pb2.StmgrToTmaster()
        message.ParseFromString(payload)

        def deliver() -> None:
            if self.stmgrs.get(conn.peer_id) is conn:  # not one of an earlier generation,
                self.core.on_stmgr_message(conn.peer_id, message, time.monotonic())  # nor replaced

        self._event(deliver)

    def _on_metrics_frame(self, conn: Connection, kind: int, payload: bytes) -> None:
        self._count("metricsmgr", payload)
        snapshot = metrics_pb2.MetricsSnapshot()
        snapshot.ParseFromString(payload)
        self._event(self.core.on_metrics, snapshot)

    def _on_control_frame(self, conn: Connection, kind: int, payload: bytes) -> None:
        request = tmaster_pb2.ControlRequest()
        request.ParseFromString(payload)
        if request.WhichOneof("body") == "query":  # a tracker asking for live data
            _send(conn, frames.control_frame(live_queries.answer(self, request.query)))
            return
        _send(conn, frames.control_frame(control.handle(self, request)))

    # ---- generations ---------------------------------------------------------------------
    def begin_generation(self, generation: int, plan: PlanView | None = None) -> None:
        """Forget the containers of the failed (or stopped) stage.

        A new stage (``generation``) starts now, on ``plan`` when an update changed it.
        """
        with self._lock:
            self._event(self.core.begin_generation, generation, plan, time.monotonic())
            old = list(self.stmgrs.values())
            self.stmgrs.clear()
        for conn in old:
            conn.close()  # any stmgr of the old stage still alive exits on its own

    def stop_generation(self, detail: str) -> None:
        """Tell every stmgr of this generation to shut down for an update.

        The topology does not end; the driver launches the next generation once the
        containers are gone.
        """
        self._event(self.core.stop_generation, detail, time.monotonic())

    # ---- the clock -----------------------------------------------------------------------
    def _checkpoint_loop(self) -> None:
        while not self.done.wait(0.05):
            self._event(self.core.tick, time.monotonic())

    def _liveness_loop(self) -> None:
        period = min(1.0, self.core.liveness.timeout_secs / 4)
        while not self.done.wait(period):
            self.check_liveness(time.monotonic())

    def check_liveness(self, now: float) -> None:
        """Drop stmgrs silent for longer than the heartbeat timeout.

        Restart the stage when one stays away for another timeout (its container is stopped or
        its executor gone).
        """
        self._event(self.core.check_liveness, now)

    def executor_lost(self, executor: str, containers: tuple[int, ...], reason: str,
                      generation: int) -> None:
        """Restart the stage now: Spark removed ``executor``, which hosted ``containers`` of it.

        Nothing happens if ``generation`` has been replaced already (Spark failed the stage
        itself and the resubmission policy ran first).
        """
        self._event(self.core.executor_lost, executor, containers, reason, generation,
                    time.monotonic())

    # ---- management verbs (heron deactivate / activate / restart / update) ---------------
    def set_paused(self, paused: bool) -> None:
        """Deactivate (``paused``) or activate the topology: every stmgr tells its spouts.

        Raises TopologyStateError when it has ended or is already in that state.
        """
        self._event(self.core.set_paused, paused, time.monotonic())

    def restart(self, container: int | None = None) -> list[int]:
        """Restart every process of ``container`` (None: of every container).

        Return the containers asked. Their supervisors restart the stmgr and instances; the
        stage stays.
        """
        return self._event(self.core.restart, container)

    def update(self, parallelism: dict[str, int], queued: bool = False) -> int:
        """Rescale components to ``parallelism``; return the generation that runs the new plan.

        The scheduler validates and relaunches (``Scheduler.update``). ``queued``: the
        submitter of a TMaster in container 0 did that already and asks only for the stop.
        """
        with self._lock:
            self.core.check_update()
        if self.scheduler is None:
            raise TopologyStateError(self.name, self.state.value, "update it",
                                     "only a topology submitted to Spark can be updated")
        if not queued and self.unqueued_update_fix is not None:
            raise TopologyStateError(self.name, self.state.value,
                                     f"update it to {dict(parallelism)} from outside its submitter",
                                     self.unqueued_update_fix)
        return self.scheduler.update(parallelism)

    # ---- lifecycle -----------------------------------------------------------------------
    def kill(self, detail: str = "killed") -> None:
        """Tell every stmgr to stop now (idempotent)."""
        self._event(self.core.kill, detail, time.monotonic())

    def fail(self, detail: str) -> None:
        """End the topology as failed (the Spark job died, ...); idempotent."""
        self._event(self.core.fail, detail, time.monotonic())

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
            return aggregate.by_component(self.core.metrics, self.core.failures,
                                          self.plan.task_component)

    def metrics_view(self, component: str, names: list[str] | None,
                     instances: list[str] | None, interval_secs: int) -> dict:
        """Answer Heron's ``/topologies/metrics``: each metric of each instance.

        Values are over the last ``interval_secs`` (<= 0: all kept). See ``tmaster.views``;
        raises MetricsQueryError.
        """
        with self._lock:
            return views.metrics_view(self.plan, self.core.history, time.time(), component, names,
                                      instances, interval_secs)

    def timeline_view(self, component: str, names: list[str] | None,
                      instances: list[str] | None, start_secs: int, end_secs: int) -> dict:
        """Heron's ``/topologies/metrics/timeline``: per-minute values in [start, end]."""
        with self._lock:
            return views.timeline_view(self.plan, self.core.history, component, names, instances,
                                       start_secs, end_secs)

    def query_view(self, query: str, start_secs: int, end_secs: int) -> list:
        """Heron's ``/topologies/metrics/query``: evaluate a metrics query (``TS(...)``, ...)."""
        with self._lock:
            return views.query_view(self.plan, self.core.history, query, start_secs, end_secs)

    def exceptions_view(self, component: str, instances: list[str] | None = None) -> list:
        """Answer Heron's ``/topologies/exceptions``: what instances of ``component`` died of.

        ``component`` ``*`` means any. One entry per distinct stack trace.
        """
        with self._lock:
            return views.exceptions_view(self.plan, self.core.exceptions, component, instances)

    def exception_summary_view(self, component: str,
                               instances: list[str] | None = None) -> list:
        """Heron's ``/topologies/exceptionsummary``: those exceptions per class name."""
        with self._lock:
            return views.exception_summary_view(self.plan, self.core.exceptions, component,
                                                instances)

    def status(self) -> dict:
        """Return a JSON-ready summary: state, times, stmgrs and their last heartbeat.

        Also ``received``: frames and payload bytes received so far from stmgrs
        (``stmgr.frames``, ``stmgr.bytes``) and metrics managers (``metricsmgr.*``).
        """
        with self._lock:
            status = self.core.status(time.monotonic())
            status["received"] = dict(self._received)
            return status
