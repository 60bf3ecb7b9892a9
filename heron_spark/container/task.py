"""The container: the body of one Spark barrier task (Heron's executor).

It writes the files its children need and hands them to the ``Supervisor`` (metrics
manager, stmgr, one process per instance; restarted when they die or stall) until the stmgr
exits for good (the TMaster said shut down, or went away); then it stops whatever is left.
Children die with this process even when Spark SIGKILLs it (see ``_process.become_child``).
Runs on a Spark executor only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time

from heron_spark.config import SystemConfig
from heron_spark.container.files import ContainerFiles
from heron_spark.container.supervisor import Supervisor
from heron_spark.contract.child_args import TMasterArgs, tmaster_from_statemgr
from heron_spark.contract.layout import TMASTER, container_root
from heron_spark.errors import WrongPlaceError
from heron_spark.proto import packing_pb2
from heron_spark.wire.tls import TlsMaterial


@dataclasses.dataclass
class ContainerTask:
    """Everything a barrier task needs, pickled into the Spark closure by the driver."""

    topology: str
    definition: bytes            # cloudpickled LogicalPlan
    packing_plan: bytes          # serialized PackingPlan
    config: dict                 # SystemConfig fields
    secret: str
    tmaster_host: str
    tmaster_port: int
    generation: int
    local_mode: bool
    # heron.tmaster.placement container: container 0 runs the TMaster (tmaster_host and
    # tmaster_port unused); every stmgr finds it through the state manager.
    tmaster_in_container: bool = False
    deactivated: bool = False    # a new run's TMaster in container 0 starts it paused
    # TLS on: each container's CA, certificate and key (wire.tls), like the secret private
    # to the Spark closure; written owner-only into the container's folder.
    tls: tuple[TlsMaterial, ...] | None = None

    def __call__(self, iterator):
        """Run one container (the ``mapPartitions`` function of the barrier stage)."""
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        if context is None:
            msg = "ContainerTask runs only inside a Spark barrier task"
            raise WrongPlaceError(msg)
        index = context.partitionId()
        list(iterator)
        # Unpickle here first: a missing module (say, a --py-files zip) surfaces as the real
        # ImportError in the driver instead of "a child exited before it was ready".
        from heron_spark import _pickling

        _pickling.loads(self.definition)
        yield run_container(self, index, self._host(context, index))

    def _host(self, context, index: int) -> str:
        configured = self.config.get("stmgr_host") or ""
        if configured:
            return configured
        if self.local_mode:
            return "127.0.0.1"
        # The executor's own address: Spark's SPARK_LOCAL_IP when the worker sets it (the
        # executor inherits the worker's environment), else the address the driver sees the
        # executor at (for executors that share a host's loopback, that is always 127.0.0.1).
        local_ip = os.environ.get("SPARK_LOCAL_IP", "").strip()
        if local_ip:
            return local_ip
        address = context.getTaskInfos()[index].address
        return address.rsplit(":", 1)[0] or "127.0.0.1"


def run_container(task: ContainerTask, index: int, host: str) -> dict:
    """Start and supervise container ``index``; return a summary for the driver."""
    config = SystemConfig(**task.config)
    root = container_root(config.work_dir, task.topology, task.generation, index)
    shutil.rmtree(root, ignore_errors=True)
    files = ContainerFiles(root)
    packing = packing_pb2.PackingPlan()
    packing.ParseFromString(task.packing_plan)
    files.write(task.definition, packing, config, task.secret,
                None if task.tls is None else task.tls[index])
    instances = {inst.task_id: inst.component for inst in packing.containers[index].instances}
    hosts_tmaster = task.tmaster_in_container and index == 0
    tmaster = tmaster_from_statemgr(task.generation) if task.tmaster_in_container \
        else f"{task.tmaster_host}:{task.tmaster_port}"
    supervisor = Supervisor(files, config, index, host, tmaster, task.generation, instances,
                            TMasterArgs(root, task.generation, host, int(task.deactivated))
                            if hosts_tmaster else None)
    started = time.monotonic()
    try:
        stmgr_code = supervisor.run()
        summary = {"container": index, "stmgr_exit": stmgr_code, "workdir": str(root),
                   **supervisor.summary(),
                   "seconds": round(time.monotonic() - started, 3), "pid": os.getpid()}
        if hosts_tmaster:  # its last word, for the submitter: stop it now, then read it
            supervisor.stop_all()
            summary["tmaster"] = _read_json(files.tmaster_final)
            if summary["tmaster"] is None:  # it died: the stmgrs exited for lack of it
                msg = (f"container {index}: the TMaster died (see {files.log(TMASTER)}); "
                       f"the stage is resubmitted and the next TMaster resumes")
                raise RuntimeError(msg)
        return summary
    finally:
        supervisor.stop_all()


def _read_json(path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
