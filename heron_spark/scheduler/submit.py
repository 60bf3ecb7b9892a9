"""``submit``: validate, pack, start the TMaster and launch the containers. Driver only.

The run is shaped by two choices made once: the ``SessionBackend`` (classic or Spark Connect:
``scheduler.backend``) and the ``Placement`` (the TMaster in the driver or in container 0:
``scheduler.placement``). ``heron-spark submit``'s flags come in as ``SubmitOptions``
(``scheduler.options``).
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import uuid
import weakref

from heron_spark import _pickling
from heron_spark.config import TLS_CERT, TLS_ENABLED, SystemConfig, tls_enabled
from heron_spark.contract import execution_state
from heron_spark.contract.topology_view import TMasterLocation
from heron_spark.errors import TopologyStateError, WrongPlaceError
from heron_spark.plan.logical import LogicalPlan
from heron_spark.plan.packing import pack
from heron_spark.plan.prepare import prepare
from heron_spark.plan.view import PlanView
from heron_spark.proto import topology_pb2
from heron_spark.scheduler import options as cli_options
from heron_spark.scheduler import progress, update
from heron_spark.scheduler.backend import SessionBackend, open_submit_state_manager
from heron_spark.scheduler.handle import TopologyHandle
from heron_spark.scheduler.placement import Decided, placement_for
from heron_spark.scheduler.preflight import check_workers
from heron_spark.scheduler.remote_statemgr import RemoteStateManager, run_on
from heron_spark.scheduler.run import TopologyRun
from heron_spark.scheduler.session import driver_host
from heron_spark.scheduler.spark_scheduler import check_slots
from heron_spark.scheduler.spark_session import bridge_loaded, session_for
from heron_spark.statemgr.base import EXECUTION_STATE, TOPOLOGY
from heron_spark.wire.auth import new_secret
from heron_spark.wire.tls import (
    TlsMaterial,
    TopologyTls,
    new_topology_tls,
    shared_topology_tls,
    spark_wants_tls,
    user_material,
)

log = logging.getLogger(__name__)


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
    flags = cli_options.active()
    if flags is not None:  # `heron-spark submit` flags apply to submits in the file
        conf, name, master, deactivated = flags.apply(conf, name, master, deactivated)

    prepared = prepare(topology, conf, name)
    plan, system, packing, view = prepared.logical, prepared.system, prepared.packing, \
        prepared.view
    # The user's own TLS files are checked first, before any Spark job or state manager.
    tls_files = user_material(system)
    spark, statemgr = open_submit_state_manager(spark, master, system)
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
        spark = session_for(spark, master, system)
        definition = checked or _check_cluster(spark, plan, view, system)
        topology_tls = _topology_tls(spark, system, plan.name, view.container_count, tls_files)
    except BaseException:
        statemgr.close()
        raise

    topology_id = prior.id if resume and prior is not None else None
    topology_id = topology_id or f"{plan.name}-{uuid.uuid4().hex[:12]}"
    generation = prior.generation + 1 if resume and prior is not None else 0
    deactivated = deactivated or (resume and prior is not None and prior.paused)
    backend = SessionBackend.of(spark)
    decided = Decided(plan, view, packing, definition, topology_id, generation, deactivated,
                      new_secret(), resume, backend.connect, backend.master, backend.local,
                      prior.state if resume and prior is not None else "", topology_tls)
    placement = placement_for(system, backend.connect)
    topology_run = TopologyRun(spark, system, statemgr, topology_id, generation,
                               view.container_count, resume, placement.cancelled_detail)
    started = placement.start(spark, statemgr, system, decided, topology_run)
    tmaster = started.tmaster
    handle = TopologyHandle(plan.name, tmaster, system.kill_grace_secs, topology_run,
                            None if topology_tls is None else topology_tls.control.ca_pem)
    if backend.connect and system.spark_jvm_bridge != "false":
        log.info("topology %s: no Spark metrics or executor-loss events (the JVM bridge needs "
                 "a classic session's JVM; a Spark Connect client has none)", plan.name)
    elif placement.in_container and system.spark_jvm_bridge != "false" \
            and bridge_loaded(spark):
        log.info("topology %s: no Spark metrics or executor-loss events (the JVM bridge is fed "
                 "by a TMaster in the driver; heron.tmaster.placement driver has them)", plan.name)
    topology_run.launch(tmaster, started.task, started.closers)
    # Container 0's TMaster under Connect: each question is a Spark job, so gently.
    handle._progress = progress.watch(tmaster, system.submit_progress,
                                      progress.CONNECT_POLL_SECS
                                      if placement.in_container and backend.connect else None)
    _install_sigterm(handle)
    cli_options.record(handle)
    log.info("submitted %s: %d containers, %d tasks; %s", plan.name, view.container_count,
             len(view.task_component), "its TMaster runs in container 0"
             if placement.in_container else f"tracker {handle.tracker_url}")
    return handle


def _topology_tls(spark, system: SystemConfig, name: str, containers: int,
                  tls_files: TlsMaterial | None) -> TopologyTls | None:
    """Return the run's TLS material, or None when TLS is off (``heron.tls.*``).

    The user's own certificate, key and CA (``tls_files``, already checked), else a new CA
    for this run and a certificate per container (and the driver's tracker's).
    """
    spark_on = system.tls_enabled == "auto" \
        and spark_wants_tls(lambda key: spark.conf.get(key, None))
    if not tls_enabled(system, spark_on):
        if tls_files is not None:
            log.warning("topology %s: %s is given but TLS is off (%s %s, and the Spark session "
                        "has no spark.network.crypto.enabled or spark.ssl.enabled): set %s "
                        "true to use it", name, TLS_CERT, TLS_ENABLED, system.tls_enabled,
                        TLS_ENABLED)
        return None
    if tls_files is not None:
        return shared_topology_tls(tls_files, containers)
    # The driver's tracker is reached at the TMaster's host: its certificate names it.
    return new_topology_tls(name, containers, tracker_hosts=[
        system.tmaster_host or driver_host(spark), socket.gethostname()])


def _check_cluster(spark, plan: LogicalPlan, view: PlanView, system: SystemConfig) -> bytes:
    """Check the slots and the executors' Python for ``plan``; return its definition."""
    check_slots(spark, view.container_count, system.spark_slots_wait_secs)
    definition = _pickling.dumps(plan)
    check_workers(spark, definition, view.container_count)
    return definition


def submit_from_builder(topology: type):
    """``TopologyBuilder.build_and_submit``: under the CLI hand over; otherwise submit and wait."""
    handle = submit(topology)
    if cli_options.active() is not None:
        return handle  # the CLI waits for it
    handle.wait()
    return handle


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
