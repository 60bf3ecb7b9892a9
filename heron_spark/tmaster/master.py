"""The Topology Master's shell: runs in the Spark driver around a ``core.TMasterCore``.

The core holds the rules (the physical plan once every stmgr registered, heartbeats and
liveness, the end of the topology, failures per task, checkpoints, the management verbs,
metrics history); this shell gives it sockets, threads and the state manager. It accepts
stmgrs, metrics managers and control clients (``control``: kill and the management verbs;
``query``: a tracker's live views, parsed by ``tmaster.live_queries``), feeds the core every
frame under ``_lock``, sends the frames it asks for on the matching connections
(``tmaster.links``) and, once the lock is released, stores what it saves and deletes
checkpoints the last commit made obsolete. Nothing outside this class takes the lock: every
view reads under it here and returns plain values. Threads: the listener, one
reader per connection, the liveness check (``check_liveness``, about once a second) and, under
effectively once, the checkpoint clock (every 50 ms); the tracker HTTP server runs apart
(``heron_spark.tracker``). ``running`` is set once the first plan went out, ``done`` once the
topology has ended.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from heron_spark import errors
from heron_spark.config import TRACKER_PORT, SystemConfig
from heron_spark.contract import ids, roles
from heron_spark.contract.topology_view import HandleView, TopologyStatus
from heron_spark.errors import ConfigError, TopologyStateError, TrackerRequestError
from heron_spark.metrics import aggregate
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, physical_plan_pb2, tmaster_pb2
from heron_spark.statemgr.base import StateManager
from heron_spark.statemgr.checkpoints import CheckpointStore, checkpoint_root
from heron_spark.tmaster import live_queries, views
from heron_spark.tmaster.core import TMasterCore, TopologyState
from heron_spark.tmaster.links import Links, send
from heron_spark.tmaster.metrics_cache import MetricsCache
from heron_spark.wire import frames
from heron_spark.wire.connection import Connection, Listener
from heron_spark.wire.tls import TlsContexts

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


class TMaster:
    """See the module docstring."""

    def __init__(self, plan: PlanView, statemgr: StateManager, secret: str, host: str,
                 topology_id: str, frame_max_bytes: int, generation: int = 0,
                 restart_max: int = 5, restart_window_secs: float = 60.0,
                 checkpoint_root: str = "", committed_checkpoint: int = 0,
                 stmgr_heartbeat_timeout_secs: float = 30.0,
                 history: MetricsCache | None = None, exceptions_per_instance: int = 20,
                 deactivated: bool = False, scheduler: Scheduler | None = None,
                 tls: TlsContexts | None = None) -> None:
        self.name = plan.logical.name
        self.topology_id = topology_id
        self.statemgr = statemgr
        self._frame_max = frame_max_bytes
        self._lock = threading.RLock()
        store = CheckpointStore(checkpoint_root, self.name) \
            if plan.logical.topology_config.effectively_once else None
        self.files = live_queries.FileFetcher()  # the tracker's container file requests
        self._links = Links(self.name, statemgr, store, self.files)
        self.stmgrs = self._links.stmgrs  # container index -> its stmgr's connection
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
        self.listener = Listener(host, 0, secret, self.name, self._on_peer, name="tmaster",
                                 tls=tls)
        self.host = host
        self.port = self.listener.port
        # A TMaster in container 0: only its submitter can run the next generation, so an
        # update it did not queue (``heron-spark update``) is refused with this fix.
        self.unqueued_update_fix: str | None = None
        # The tracker serving this topology (the driver's, or the one beside this TMaster in
        # container 0): its URL and a function minting a one-time login link to it (``ui_link``).
        # None with the tracker off (``heron.tracker.port`` -1).
        self.tracker_url: str | None = None
        self.login_link: Callable[[], str] | None = None

    poll_secs = 0.05  # read here: a waiter may look often

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
                    scheduler: Scheduler | None, tls: TlsContexts | None = None) -> "TMaster":
        """Build a TMaster with the limits, timeouts and history sizes of ``system``.

        ``tls``: the contexts its listener uses (TLS on), else None.
        """
        return cls(plan, statemgr, secret, host, topology_id, system.frame_max_bytes,
                   generation, system.instance_restart_max, system.restart_window_secs,
                   checkpoint_root=checkpoint_root(system.checkpoint_root, system.work_dir),
                   committed_checkpoint=committed_checkpoint,
                   stmgr_heartbeat_timeout_secs=system.tmaster_stmgr_heartbeat_timeout_secs,
                   history=MetricsCache(system.tmaster_metrics_bucket_secs,
                                        system.tmaster_metrics_retention_secs,
                                        system.tmaster_metrics_max_series),
                   exceptions_per_instance=system.tmaster_exceptions_per_instance,
                   deactivated=deactivated, scheduler=scheduler, tls=tls)

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
        links.run_writes()
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
        def closed() -> None:
            if conn.peer_role == roles.STMGR and self.stmgrs.get(conn.peer_id) is conn:
                self.core.on_stmgr_closed(conn.peer_id)
            elif conn.peer_role == roles.METRICSMGR:
                self._metrics_hung_up.notify_all()

        self._event(closed)

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
            send(conn, frames.control_frame(live_queries.answer(self, request.query)))
            return
        send(conn, frames.control_frame(self.control(request)))

    # ---- generations ---------------------------------------------------------------------
    def begin_generation(self, generation: int, plan: PlanView | None = None) -> None:
        """Forget the containers of the failed (or stopped) stage.

        A new stage (``generation``) starts now, on ``plan`` when an update changed it.
        """
        def begin(now: float) -> None:
            self.core.begin_generation(generation, plan, now)
            self._links.to_close.extend(self.stmgrs.values())  # any still alive exits itself
            self.stmgrs.clear()

        self._event(begin, time.monotonic())

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

    def end_with_stage(self, summaries: Sequence[dict] | None, error: BaseException | None,
                       cancelled: bool, detail: str) -> None:
        """Record the end of the barrier stage: KILLED when ``cancelled``, else FAILED.

        Nothing changes if the topology ended already (its own end is the one kept).
        """
        if cancelled:
            self.kill(detail)
        else:
            self.fail(detail)

    def close(self) -> None:
        """Stop listening and drop every connection (after the containers are gone)."""
        self.closed.set()
        self.listener.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            conn.close()

    def refresh(self, max_age: float = 0.0) -> None:
        """Do nothing: this TMaster is read directly."""

    # ---- the control port ----------------------------------------------------------------
    def control(self, request: tmaster_pb2.ControlRequest) -> tmaster_pb2.ControlResponse:
        """Run a control request (kill, status, a management verb); never raises for a refusal.

        A refusal answers ``ok=False`` with the error's code and fields, which
        ``tmaster.client`` raises again as the same error.
        """
        body = request.WhichOneof("body")
        detail = ""
        try:
            if body == "kill":
                self.kill("killed through the control port")
            elif body in ("activate", "deactivate"):
                self.set_paused(body == "deactivate")
            elif body == "restart":
                restart = request.restart
                targets = self.restart(None if restart.all else restart.container)
                detail = f"restarting containers {targets}"
            elif body == "update":
                generation = self.update(dict(request.update.parallelism),
                                         queued=request.update.queued)
                detail = f"updating: generation {generation} starts with the new parallelism"
        except tuple(errors.REFUSALS.values()) as exc:
            log.warning("control request %s refused: %s", body, exc)
            return tmaster_pb2.ControlResponse(
                ok=False, state=self.state.value, detail=str(exc), error=type(exc).__name__,
                error_code=exc.code, error_fields_json=json.dumps(exc.fields(), default=repr))
        with self._lock:
            return tmaster_pb2.ControlResponse(ok=True, state=self.core.state.value,
                                               detail=detail or self.core.detail)

    # ---- views ---------------------------------------------------------------------------
    def status(self) -> TopologyStatus:
        """Return the live status; ``received`` counts the frames and bytes read so far."""
        with self._lock:
            return self.core.status(time.monotonic()).replace(received=dict(self._received))

    def metrics_by_component(self) -> dict[str, dict[str, float]]:
        """Sum every metric over the tasks of each component (``*-max-*`` metrics: the maximum)."""
        with self._lock:
            return aggregate.by_component(self.core.metrics, self.core.failures,
                                          self.plan.task_component)

    def handle_view(self) -> HandleView:
        """Return what a topology handle shows, read at one moment."""
        with self._lock:
            return HandleView(self.status(), self.metrics_by_component(), self.physical_plan,
                              self.failure, self.tracker_url)

    def ui_link(self) -> str | None:
        """Return a fresh one-time login link to the tracker serving this topology.

        Raises ConfigError when none runs (``heron.tracker.port`` -1).
        """
        if self.login_link is None:
            raise ConfigError(TRACKER_PORT, -1, "set heron.tracker.port to 0 (any free port) "
                                                "or a port number to run the tracker")
        return self.login_link()

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

    def runtime_state_view(self) -> dict:
        """Heron's ``/topologies/runtimestate``: which stmgrs registered."""
        with self._lock:
            registered = set(self.core.registrations)
            count = self.plan.container_count
            has_plan = self.core.physical_plan is not None
        return {"has_physical_plan": has_plan, "has_packing_plan": True,
                "has_tmanager_location": True, "has_scheduler_location": False,
                "stmgrs": {ids.stmgr_id(i): {"is_registered": i in registered}
                           for i in range(count)}}

    def pid_view(self, wanted: str) -> dict:
        """Heron's ``/topologies/pid``: the pid of an instance or stmgr id; 404 if unknown."""
        with self._lock:
            plan = self.core.physical_plan
            instances = list(plan.instances) if plan is not None else []
            stmgrs = list(plan.stmgrs) if plan is not None else []
        pids = {ids.instance_id(i.container_index, i.component, i.task_id): i.pid
                for i in instances}
        pids.update((ids.stmgr_id(s.container_index), s.pid) for s in stmgrs)
        if wanted not in pids:
            raise TrackerRequestError(404, "no such instance in the physical plan",
                                      param="instance", value=wanted,
                                      fix="use an id from /topologies/physicalplan")
        return {"command": f"pid of {wanted}", "stdout": f"{pids[wanted]}\n", "stderr": ""}

    def container_file(self, container: int, op: str, path: str, offset: int,
                       length: int) -> Any:
        """Fetch a container file view (``op`` data or stats) through the container's stmgr.

        Waits for the stmgr's answer outside the lock; raises TrackerRequestError (404 no
        such container, 503 its stmgr is not connected, 504 no answer, or the stmgr's code).
        """
        with self._lock:
            conn = self.stmgrs.get(container)
            count = self.plan.container_count
        if conn is None:
            raise TrackerRequestError(404 if not 0 <= container < count else 503,
                                      "no stmgr connected for this container",
                                      param="container", value=container,
                                      fix="use an index from /topologies/physicalplan")
        response = self.files.fetch(lambda frame: send(conn, frame), op, path, offset, length)
        if response.code != 200:
            raise TrackerRequestError(response.code, response.error)
        return json.loads(response.json)

    def prometheus_view(self) -> list:
        """Every instance's latest metrics: ``[[component, instance id, metric, value], ...]``."""
        with self._lock:
            rows: list[list] = []
            for (component, task), values in sorted(self.core.metrics.items()):
                if ids.is_stmgr_metrics_task(task):  # a stmgr's own metrics
                    ident = ids.stmgr_id(ids.stmgr_container(task))
                elif task in self.plan.task_container:
                    ident = self.plan.instance_id(task)
                else:
                    continue  # a task of an earlier plan
                rows.extend([component, ident, name, value]
                            for name, value in sorted(values.items()))
        return rows


if TYPE_CHECKING:
    from heron_spark.tmaster.protocol import TMasterView

    def _implements(view: TMaster) -> TMasterView:
        """Let mypy check that ``TMaster`` implements ``TMasterView``."""
        return view
