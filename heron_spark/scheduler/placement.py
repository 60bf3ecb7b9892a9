"""Where the TMaster runs (``heron.tmaster.placement``), chosen once per submit: a ``Placement``.

``DriverPlacement``: the TMaster and the tracker start in this process; the stmgrs dial it
here. ``ContainerPlacement``: container 0 starts the TMaster (and its tracker) as a child;
this process stores what it starts from and sees it as a ``RemoteTMaster``. Either way
``start`` returns a ``Started``: the TMaster's view (a ``tmaster.protocol.TMasterView``), the
containers' task, the closers to run at the end of the run and the driver's tracker, if any.
Driver only.
"""

from __future__ import annotations

import dataclasses
import getpass
import logging
import os
import threading
import time
from typing import Any, Callable, Protocol

from heron_spark.config import SystemConfig, tmaster_placement
from heron_spark.container.task import ContainerTask
from heron_spark.contract import execution_state
from heron_spark.contract.topology_view import CommittedCheckpoint, TMasterLocation
from heron_spark.plan.logical import LogicalPlan
from heron_spark.plan.view import PlanView
from heron_spark.scheduler import gauges, update
from heron_spark.scheduler.ask import Asker
from heron_spark.scheduler.remote import RemoteTMaster
from heron_spark.scheduler.remote_statemgr import run_on
from heron_spark.scheduler.run import TopologyRun
from heron_spark.scheduler.session import driver_host
from heron_spark.scheduler.spark_session import bridge_loaded
from heron_spark.statemgr.base import EXECUTION_STATE, PACKING_PLAN, TMASTER_LOCATION, TOPOLOGY
from heron_spark.statemgr.checkpoints import CheckpointStore, checkpoint_root
from heron_spark.tmaster.master import TMaster
from heron_spark.tmaster.protocol import TMasterView
from heron_spark.wire.tls import TopologyTls, contexts

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Decided:
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
    tls: TopologyTls | None = None  # TLS on: the material of its containers and the driver


@dataclasses.dataclass
class Started:
    """What a placement started: the TMaster's view, the containers' task, closers, tracker."""

    tmaster: TMasterView
    task: ContainerTask
    closers: list[Callable[[], None]]
    tracker: Any = None  # the driver's tracker server (DriverPlacement, tracker on)


class Placement(Protocol):
    """Where the TMaster runs (see the module docstring)."""

    in_container: bool
    cancelled_detail: str  # why the run ended when Spark cancelled its stage

    def start(self, spark, statemgr, system: SystemConfig, decided: Decided,
              run: TopologyRun) -> Started:
        """Start (or prepare) the TMaster of ``decided``'s run."""


class DriverPlacement:
    """The TMaster in this process (``heron.tmaster.placement`` driver)."""

    in_container = False
    cancelled_detail = "the Spark job group was cancelled"

    def start(self, spark, statemgr, system: SystemConfig, decided: Decided,
              run: TopologyRun) -> Started:
        """Start the TMaster (and the tracker) here."""
        return Started(*_start_tmaster_in_driver(spark, statemgr, system, decided, run))


class ContainerPlacement:
    """The TMaster in container 0 (``heron.tmaster.placement`` container)."""

    in_container = True
    cancelled_detail = "the Spark job was cancelled"

    def start(self, spark, statemgr, system: SystemConfig, decided: Decided,
              run: TopologyRun) -> Started:
        """Store what container 0's TMaster starts from; return the view that asks it."""
        return Started(*_start_tmaster_in_container(spark, statemgr, system, decided, run))


def placement_for(system: SystemConfig, connect: bool) -> Placement:
    """Return the placement ``heron.tmaster.placement`` names (``auto``: by session kind)."""
    if tmaster_placement(system, connect) == "container":
        return ContainerPlacement()
    return DriverPlacement()


def _start_tmaster_in_driver(spark, statemgr, system: SystemConfig, decided: Decided,
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
                                  committed.id if committed else 0, decided.deactivated, run,
                                  tls=None if decided.tls is None else contexts(decided.tls.control))
    tmaster.submission = _submission(decided.spark_master, decided.local)
    tracker: Any = None
    if system.tracker_port >= 0:  # one per driver and state manager, for all its topologies
        from heron_spark.tracker import service as tracker_service

        tracker = tracker_service.acquire(system.statemgr, host, system.tracker_port,
                                          max_connections=system.tracker_max_connections,
                                          idle_timeout_secs=system.tracker_idle_timeout_secs,
                                          tls=None if decided.tls is None  # TLS on: HTTPS
                                          else decided.tls.tracker or decided.tls.control)
    try:
        statemgr.claim_tmaster(name, TMasterLocation(
            host, tmaster.port, os.getpid(), decided.secret,
            tracker.server_address[1] if tracker else -1,
            control_tls="" if decided.tls is None else decided.tls.control.to_json()).as_dict())
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
                         decided.generation, decided.local,
                         tls=None if decided.tls is None else decided.tls.containers)
    closers = []
    if system.spark_jvm_bridge != "false" and not decided.connect and bridge_loaded(spark):
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


def _start_tmaster_in_container(spark, statemgr, system: SystemConfig, decided: Decided,
                                run: TopologyRun):
    """Prepare a run whose TMaster lives in container 0 (``heron.tmaster.placement`` container).

    Write the topology to the state manager; container 0 starts the TMaster, which claims its
    location there, and the stmgrs find it there. The submitter asks that TMaster through the
    control port (``RemoteTMaster``): directly on a classic session, through a one-task Spark
    job under Spark Connect (``scheduler.ask``). Returns ``(tmaster, task, closers,
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
        run_on(statemgr, write_container_run, name, root,
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
                         decided.local, tmaster_in_container=True, deactivated=decided.deactivated,
                         tls=None if decided.tls is None else decided.tls.containers)
    return tmaster, task, [], None


def write_container_run(statemgr, name: str, root: str, starting: bytes | None,
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


def _config_fields(system: SystemConfig) -> dict:
    return dataclasses.asdict(system)
