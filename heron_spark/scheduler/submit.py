"""``submit``: validate, pack, start the TMaster and launch the containers. Driver only."""

from __future__ import annotations

import dataclasses
import getpass
import logging
import os
import signal
import sys
import threading
import time
import uuid
import weakref
from typing import Any

from heron_spark import _pickling
from heron_spark.config import SystemConfig, tmaster_placement
from heron_spark.container.task import ContainerTask
from heron_spark.contract import execution_state
from heron_spark.contract.topology_view import CommittedCheckpoint, TMasterLocation
from heron_spark.errors import (ConnectExtrasError, HeronSparkError, TopologyStateError,
                                WrongPlaceError)
from heron_spark.plan.logical import LogicalPlan
from heron_spark.plan.packing import pack
from heron_spark.plan.prepare import prepare
from heron_spark.plan.view import PlanView
from heron_spark.proto import topology_pb2
from heron_spark.scheduler.handle import TopologyHandle
from heron_spark.scheduler import gauges, progress
from heron_spark.scheduler.preflight import check_workers
from heron_spark.scheduler.remote import Asker, RemoteTMaster
from heron_spark.scheduler.session import driver_host, is_connect, is_local_master
from heron_spark.scheduler.session import master as session_master
from heron_spark.scheduler import update
from heron_spark.scheduler.remote_statemgr import RemoteStateManager, run_on
from heron_spark.scheduler.run import TopologyRun
from heron_spark.scheduler.spark_scheduler import check_slots
from heron_spark.statemgr import open_state_manager
from heron_spark.statemgr.base import EXECUTION_STATE, PACKING_PLAN, TMASTER_LOCATION, TOPOLOGY
from heron_spark.statemgr.checkpoints import CheckpointStore, checkpoint_root
from heron_spark.tmaster.master import TMaster
from heron_spark.wire.auth import new_secret

log = logging.getLogger(__name__)
_CLI_CONTEXT: dict[str, Any] | None = None  # set by `heron-spark submit` while it runs a file


def submit(topology, spark=None, conf: dict | None = None, name: str | None = None,
           master: str | None = None, deactivated: bool = False) -> TopologyHandle:
    """Submit ``topology`` (a ``Topology`` subclass or a ``TopologyBuilder``) and return a handle.

    ``conf`` holds ``heron.*`` runtime keys and ``topology.*`` keys that override the
    topology's own config. ``spark`` defaults to the active session, else a new one on
    ``master`` (default ``local[*]``). ``deactivated`` deploys it paused (Heron's
    ``--deploy-deactivated``): nothing is emitted until ``handle.activate()``. Runs on the
    driver only.
    """
    _check_driver()
    if _CLI_CONTEXT is not None:  # `heron-spark submit` flags apply to submits in the file
        options = _CLI_CONTEXT["options"]
        conf = {**(options.get("conf") or {}), **(conf or {})}
        name = name or options.get("name")
        master = master or options.get("master")
        deactivated = deactivated or bool(options.get("deactivated"))

    prepared = prepare(topology, conf, name)
    plan, system, packing, view = prepared.logical, prepared.system, prepared.packing, \
        prepared.view
    spark, statemgr = _open_state_manager(spark, master, system)
    try:
        checked = None
        if isinstance(statemgr, RemoteStateManager):  # its jobs need workers that can run them
            checked = _check_cluster(spark, plan, view, system)
        raw_prior, raw_stored = run_on(statemgr, _prior_run, plan.name)
        prior = None if raw_prior is None else execution_state.decode(raw_prior)
        stored = None if raw_stored is None else topology_pb2.Topology.FromString(raw_stored)
        resume = execution_state.is_live(prior)  # its driver died without ending it
        if resume:  # resuming: keep what `heron update` set
            updated = update.rescaled_to_stored(stored, plan)
            if updated is not None:
                plan = updated
                packing = pack(plan, system.packing_algorithm)
                view = PlanView(plan, packing)
                checked = None
        spark = _spark_session(spark, master, system)
        definition = checked or _check_cluster(spark, plan, view, system)
    except BaseException:
        statemgr.close()
        raise

    topology_id = prior.id if resume else None
    topology_id = topology_id or f"{plan.name}-{uuid.uuid4().hex[:12]}"
    generation = prior.generation + 1 if resume else 0
    deactivated = deactivated or (resume and prior.paused)  # stays deactivated
    connect = is_connect(spark)
    spark_master = session_master(spark)
    decided = _Decided(plan, view, packing, definition, topology_id, generation, deactivated,
                       new_secret(), resume, connect, spark_master,
                       is_local_master(spark_master), prior.state if resume else "")
    container = tmaster_placement(system, connect) == "container"
    topology_run = TopologyRun(spark, system, statemgr, topology_id, generation,
                               view.container_count, resume,
                               "the Spark job was cancelled" if container
                               else "the Spark job group was cancelled")
    start = _start_tmaster_in_container if container else _start_tmaster_in_driver
    tmaster, task, closers, tracker = start(spark, statemgr, system, decided, topology_run)
    handle = TopologyHandle(plan.name, tmaster, system.kill_grace_secs, topology_run)
    if connect and system.spark_jvm_bridge != "false":
        log.info("topology %s: no Spark metrics or executor-loss events (the JVM bridge needs "
                 "a classic session's JVM; a Spark Connect client has none)", plan.name)
    elif container and system.spark_jvm_bridge != "false" and _bridge_loaded(spark):
        log.info("topology %s: no Spark metrics or executor-loss events (the JVM bridge is fed "
                 "by a TMaster in the driver; heron.tmaster.placement driver has them)", plan.name)
    topology_run.launch(tmaster, task, closers)
    # Container 0's TMaster under Connect: each question is a Spark job, so gently.
    handle._progress = progress.watch(tmaster, system.submit_progress,
                                      progress.CONNECT_POLL_SECS if container and connect
                                      else None)
    _install_sigterm(handle)
    if _CLI_CONTEXT is not None:
        _CLI_CONTEXT["handles"].append(handle)
    log.info("submitted %s: %d containers, %d tasks; %s", plan.name, view.container_count,
             len(view.task_component), "its TMaster runs in container 0" if container
             else f"tracker {handle.tracker_url}")
    return handle


@dataclasses.dataclass
class _Decided:
    """What ``submit`` decided about this run before it starts a TMaster."""

    plan: LogicalPlan
    view: PlanView
    packing: Any
    definition: bytes
    topology_id: str
    generation: int
    deactivated: bool
    secret: str
    resume: bool
    connect: bool
    spark_master: str
    local: bool
    prior_state: str  # the state its last driver left it in (a resume)


def _start_tmaster_in_driver(spark, statemgr, system: SystemConfig, decided: _Decided,
                             run: TopologyRun):
    """Start the TMaster (and the tracker) here; return its containers' task and closers.

    Every stmgr dials it: under Connect this is the client, which the server's executors must
    reach (on a local master, the same host as the server). Returns ``(tmaster, task,
    closers, tracker)``; the closers copy the final gauges and release the tracker and the
    TMaster's location at the end of the run.
    """
    plan, name = decided.plan, decided.plan.name
    host = system.tmaster_host or ("127.0.0.1" if decided.local and not decided.connect else
                                   driver_host(spark))
    root = checkpoint_root(system.checkpoint_root, system.work_dir)
    committed = CommittedCheckpoint.from_stored(statemgr.get_committed_checkpoint(name)) \
        if decided.resume else None
    tmaster = TMaster.from_system(decided.view, statemgr, decided.secret, host,
                                  decided.topology_id, decided.generation, system,
                                  committed.id if committed else 0, decided.deactivated, run)
    tmaster.submission = _submission(decided.spark_master, decided.local)
    tracker = None
    if system.tracker_port >= 0:  # one per driver and state manager, for all its topologies
        from heron_spark.tracker import service as tracker_service

        tracker = tracker_service.acquire(system.statemgr, host, system.tracker_port,
                                          max_connections=system.tracker_max_connections,
                                          idle_timeout_secs=system.tracker_idle_timeout_secs)
    try:
        statemgr.claim_tmaster(name, TMasterLocation(
            host, tmaster.port, os.getpid(), decided.secret,
            tracker.server_address[1] if tracker else -1).as_dict())
    except BaseException:
        tmaster.close()
        if tracker is not None:
            tracker_service.release(tracker)
        statemgr.close()
        raise
    if decided.resume:
        log.warning("resuming topology %s (%s) from %s as generation %d: its last driver "
                    "stopped while it was %s", name, decided.topology_id, statemgr.location,
                    decided.generation, decided.prior_state)
    else:
        statemgr.clear_spout_states(name)  # a new run reads its sources from the start
        if statemgr.get_committed_checkpoint(name) is not None:  # and starts from no state
            statemgr.clear_committed_checkpoint(name)
            CheckpointStore(root, name).clear()
    statemgr.set_topology(update.topology_proto(plan, decided.topology_id, decided.definition))
    statemgr.set_packing_plan(name, decided.packing)
    tmaster.start()
    task = ContainerTask(name, decided.definition, decided.packing.SerializeToString(),
                         _config_fields(system), decided.secret, host, tmaster.port,
                         decided.generation, decided.local)
    closers = []
    if system.spark_jvm_bridge != "false" and not decided.connect and _bridge_loaded(spark):
        threading.Thread(target=gauges.publish, args=(spark, tmaster, system), daemon=True,
                         name=f"gauges-{name}").start()
        closers.append(lambda: gauges.copy(spark, tmaster))  # the final values
    if tracker is not None:
        from heron_spark.tracker.auth import login_link

        url, auth = tracker.url, tracker.app.auth
        tmaster.tracker_url = url
        tmaster.login_link = lambda: login_link(url, auth.token)
        closers.append(lambda: tracker_service.release(tracker))
    closers.append(lambda: statemgr.release_tmaster(name))
    return tmaster, task, closers, tracker


def _start_tmaster_in_container(spark, statemgr, system: SystemConfig, decided: _Decided,
                                run: TopologyRun):
    """Prepare a run whose TMaster lives in container 0 (``heron.tmaster.placement`` container).

    Write the topology to the state manager; container 0 starts the TMaster, which claims its
    location there, and the stmgrs find it there. The submitter asks that TMaster through the
    control port (``RemoteTMaster``): directly on a classic session, through a one-task Spark
    job under Spark Connect (``scheduler.remote``). Returns ``(tmaster, task, closers,
    tracker)``: no closers, no tracker here.
    """
    name = decided.plan.name
    root = checkpoint_root(system.checkpoint_root, system.work_dir)
    try:
        if decided.resume:
            log.warning("resuming topology %s (%s) from %s as generation %d (TMaster in "
                        "container 0)", name, decided.topology_id, statemgr.location,
                        decided.generation)
            starting = None
        else:  # what container 0's TMaster starts from: the id, submission and paused state
            starting = execution_state.from_status({
                "name": name, "id": decided.topology_id, "state": "STARTING",
                "generation": decided.generation, "paused": decided.deactivated,
                "containers": decided.view.container_count,
                "submission": _submission(decided.spark_master, decided.local)})
        run_on(statemgr, _write_container_run, name, root,
               None if starting is None else execution_state.encode(starting),
               update.topology_proto(decided.plan, decided.topology_id,
                                     decided.definition).SerializeToString(),
               decided.packing.SerializeToString())
    except BaseException:
        statemgr.close()
        raise
    tmaster = RemoteTMaster(decided.view, decided.topology_id,
                            Asker(spark, system.statemgr, name, through_spark=decided.connect),
                            decided.generation, statemgr, scheduler=run)
    task = ContainerTask(name, decided.definition, decided.packing.SerializeToString(),
                         _config_fields(system), decided.secret, "", 0, decided.generation,
                         decided.local, tmaster_in_container=True, deactivated=decided.deactivated)
    return tmaster, task, [], None


def _check_cluster(spark, plan: LogicalPlan, view: PlanView, system: SystemConfig) -> bytes:
    """Check the slots and the executors' Python for ``plan``; return its definition."""
    check_slots(spark, view.container_count, system.spark_slots_wait_secs)
    definition = _pickling.dumps(plan)
    check_workers(spark, definition, view.container_count)
    return definition


def _write_container_run(statemgr, name: str, root: str, starting: bytes | None,
                         topology: bytes, packing: bytes) -> None:
    """Store what container 0 starts from (one Spark job through a ``RemoteStateManager``).

    A new run (``starting``: its encoded STARTING execution state) forgets the spout
    checkpoints and the committed checkpoint (and its files under ``root``). Either way, a
    dead TMaster's location goes, and the serialized topology and packing plan are stored
    (protobuf messages do not pickle, so every argument and result is plain bytes).
    """
    if starting is not None:
        statemgr.clear_spout_states(name)
        if statemgr.get_committed_checkpoint(name) is not None:
            statemgr.clear_committed_checkpoint(name)
            CheckpointStore(root, name).clear()
        statemgr.put(name, EXECUTION_STATE, starting)
    statemgr.delete(name, TMASTER_LOCATION)  # a dead TMaster's record, if any
    statemgr.put(name, TOPOLOGY, topology)
    statemgr.put(name, PACKING_PLAN, packing)


def _open_state_manager(spark, master: str | None, system: SystemConfig):
    """Return ``(spark, statemgr)``: the state manager submit reads and writes.

    Under Spark Connect with the TMaster in container 0 the client may reach nothing but the
    Connect endpoint, so the state manager is used through one-task Spark jobs
    (``RemoteStateManager``; the session is made here). Otherwise it is opened here directly
    and ``spark`` is returned as given.
    """
    if tmaster_placement(system, True) == "container" and _connect_requested(spark):
        spark = _spark_session(spark, master, system)
        if is_connect(spark):
            return spark, RemoteStateManager(spark, system.statemgr)
    return spark, open_state_manager(system.statemgr)


def _connect_requested(spark) -> bool:
    """Return whether submit runs on a Spark Connect session (without making one)."""
    if spark is not None:
        return is_connect(spark)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return is_connect(active)
    return bool(os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_CONNECT_MODE_ENABLED"))


def _submission(master: str, local: bool) -> dict:
    """Return Heron's execution-state metadata for this submission.

    Cluster (``local`` or the Spark master URL), environ (``default``), role and submission
    user (who submits), submission time (epoch secs).
    """
    from heron_spark._version import __version__

    user = getpass.getuser()
    return {"cluster": "local" if local else master, "environ": "default", "role": user,
            "submission_user": user, "submission_time": int(time.time()),
            "release_version": __version__}


def submit_from_builder(topology: type):
    """``TopologyBuilder.build_and_submit``: under the CLI hand over; otherwise submit and wait."""
    handle = submit(topology)
    if _CLI_CONTEXT is not None:
        return handle  # the CLI waits for it
    handle.wait()
    return handle


def _bridge_loaded(spark) -> bool:
    from heron_spark.scheduler import jvm_bridge

    return jvm_bridge.loaded(spark)


def _prior_run(statemgr, name: str) -> tuple[bytes | None, bytes | None]:
    """Refuse a running topology; return its prior execution state and stored topology.

    Both serialized (protobuf messages do not pickle); the stored topology only when the
    prior run is live (a resume keeps its parallelism). One Spark job through a
    ``RemoteStateManager`` (the TMaster is then asked from the executor).
    """
    _refuse_if_running(statemgr, name)  # fast path; the TMaster claim decides
    prior = statemgr.get(name, EXECUTION_STATE)
    live = prior is not None and execution_state.is_live(execution_state.decode(prior))
    return prior, statemgr.get(name, TOPOLOGY) if live else None


def _refuse_if_running(statemgr, name: str) -> None:
    state = statemgr.get_execution_state(name)
    location = TMasterLocation.from_stored(statemgr.get_tmaster_location(name))
    if execution_state.is_live(state) and location is not None and location.port:
        from heron_spark.tmaster.client import tmaster_status

        if tmaster_status(statemgr, name) is not None:
            raise TopologyStateError(name, state.state, "submit it again",
                                     f"kill it first: heron-spark kill {name}")


def _spark_session(spark, master: str | None, system: SystemConfig):
    from pyspark.sql import SparkSession

    existing = spark if spark is not None else SparkSession.getActiveSession()
    if existing is not None:
        if is_connect(existing):
            _check_connect_client()
            return existing
        if system.spark_jvm_bridge == "true" and not _bridge_loaded(existing):
            log.warning("heron.spark.jvm.bridge applies only to a session submit() creates; "
                        "add jvm_bridge.spark_conf(jvm_bridge.build_jar()) to your session")
        return existing
    # Executors run the driver's interpreter unless told otherwise (a venv's python, not PATH's).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("heron_spark")
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: embedded default
        builder = builder.master("local[*]")
    if os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_CONNECT_MODE_ENABLED"):
        try:  # pyspark makes a Connect session here: it needs the connect extras
            return builder.getOrCreate()
        except ImportError as exc:
            raise ConnectExtrasError(exc.name, str(exc)) from exc
    for key, value in {**_SESSION_CONF, **_bridge_conf(system.spark_jvm_bridge)}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _check_connect_client() -> None:
    """Raise ConnectExtrasError if the Connect client lacks a package the stage needs."""
    try:
        from pyspark.sql.connect import utils

        for check in ("require_minimum_pandas_version", "require_minimum_pyarrow_version",
                      "require_minimum_grpc_version", "require_minimum_grpcio_status_version",
                      "require_minimum_googleapis_common_protos_version",
                      "require_minimum_zstandard_version"):
            getattr(utils, check, lambda: None)()
    except ImportError as exc:
        raise ConnectExtrasError(exc.name, str(exc).splitlines()[0]) from exc


# Set on a session submit() creates: topology gauges (jvm_bridge) on the driver UI's
# /metrics/prometheus/ (Spark's PrometheusServlet sink), executor metrics on
# /metrics/executors/prometheus, and no console progress bar drawing over submit's own output.
_SESSION_CONF = {
    "spark.ui.prometheus.enabled": "true",
    "spark.metrics.conf.*.sink.prometheusServlet.class":
        "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    "spark.ui.showConsoleProgress": "false",
}


def _bridge_conf(mode: str) -> dict[str, str]:
    """Return the Spark settings that load the JVM bridge, as ``mode`` asks.

    "true" fails loudly if it cannot be built, "auto" goes on without it (one info line),
    "false" never tries.
    """
    if mode == "false":
        return {}
    from heron_spark.scheduler import jvm_bridge

    try:
        jar = jvm_bridge.build_jar()
        jvm_bridge.check_jvm_not_started()
        return jvm_bridge.spark_conf(jar)
    except (HeronSparkError, OSError) as exc:
        if mode == "true":
            raise
        log.info("Spark metrics of the topology are off (heron.spark.jvm.bridge=auto could "
                 "not load the JVM bridge: %s)", str(exc).splitlines()[0])
        return {}


def _config_fields(system: SystemConfig) -> dict:
    return dataclasses.asdict(system)


def _check_driver() -> None:
    try:
        from pyspark import TaskContext
    except ImportError:
        return
    if TaskContext.get() is not None:
        msg = "submit() runs on the Spark driver, not inside a Spark task"
        raise WrongPlaceError(msg)


_LIVE_HANDLES: "weakref.WeakSet[TopologyHandle]" = weakref.WeakSet()
_SIGTERM_INSTALLED = False


def _install_sigterm(handle: TopologyHandle) -> None:
    """Make SIGTERM (Airflow, `kill`) kill every live topology of this driver, then chain on."""
    global _SIGTERM_INSTALLED
    _LIVE_HANDLES.add(handle)
    if _SIGTERM_INSTALLED or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum, frame) -> None:
        for live in list(_LIVE_HANDLES):
            if live.status in execution_state.LIVE_STATES:
                live.kill()
        if callable(previous):
            previous(signum, frame)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    _SIGTERM_INSTALLED = True
