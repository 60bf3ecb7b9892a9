"""The container: the body of one Spark barrier task (Heron's executor).

It writes the files its children need, starts the metrics manager, the stmgr and one process
per instance, and supervises them until the stmgr exits (the TMaster said shut down, or went
away); then it stops whatever is left. Children die with this process even when Spark
SIGKILLs it (see ``_process.become_child``). Runs on a Spark executor only.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from heron_spark import _process
from heron_spark.config import SystemConfig
from heron_spark.container.files import ContainerFiles
from heron_spark.errors import WrongPlaceError
from heron_spark.proto import packing_pb2

log = logging.getLogger(__name__)
_SUPERVISE_POLL_SECS = 0.1


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

    def __call__(self, iterator):
        """The ``mapPartitions`` function of the barrier stage: run one container."""
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        if context is None:
            raise WrongPlaceError("ContainerTask runs only inside a Spark barrier task")
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
        address = context.getTaskInfos()[index].address
        return address.rsplit(":", 1)[0] or "127.0.0.1"


def run_container(task: ContainerTask, index: int, host: str) -> dict:
    """Start and supervise container ``index``; return a summary for the driver."""
    config = SystemConfig(**task.config)
    root = Path(config.work_dir) / task.topology / f"gen-{task.generation}" / f"container-{index}"
    shutil.rmtree(root, ignore_errors=True)
    files = ContainerFiles(root)
    packing = packing_pb2.PackingPlan()
    packing.ParseFromString(task.packing_plan)
    files.write(task.definition, packing, config, task.secret)
    tmaster = f"{task.tmaster_host}:{task.tmaster_port}"
    common = ["--workdir", str(root), "--topology", task.topology]
    children: list[subprocess.Popen] = []
    started = time.monotonic()
    try:
        metricsmgr = _process.spawn("heron_spark.metrics",
                                    [*common, "--container", str(index), "--tmaster", tmaster],
                                    files.logs / "metricsmgr.log", root)
        children.append(metricsmgr)
        metrics_port = _process.wait_json(files.ready("metricsmgr"), metricsmgr,
                                          config.startup_timeout_secs, "metrics manager")["port"]
        stmgr = _process.spawn("heron_spark.stmgr",
                               [*common, "--container", str(index), "--tmaster", tmaster,
                                "--metrics-port", str(metrics_port), "--host", host,
                                "--generation", str(task.generation)],
                               files.logs / "stmgr.log", root)
        children.append(stmgr)
        stmgr_port = _process.wait_json(files.ready("stmgr"), stmgr,
                                        config.startup_timeout_secs, "stmgr")["port"]
        instances = {}
        for inst in packing.containers[index].instances:
            instances[inst.task_id] = _process.spawn(
                "heron_spark.instance",
                [*common, "--component", inst.component, "--task-id", str(inst.task_id),
                 "--stmgr-port", str(stmgr_port), "--metrics-port", str(metrics_port)],
                files.instance_log(inst.component, inst.task_id), root)
        children.extend(instances.values())
        stmgr_code = _supervise(stmgr)
        _process.wait_all(list(instances.values()), config.kill_grace_secs)
        _process.terminate(children[1:], config.kill_grace_secs)
        _process.terminate([metricsmgr], config.kill_grace_secs)  # last: it forwards final values
        return {"container": index, "stmgr_exit": stmgr_code, "workdir": str(root),
                "instance_exits": {t: p.returncode for t, p in instances.items()},
                "seconds": round(time.monotonic() - started, 3), "pid": os.getpid()}
    finally:
        _process.terminate(children, config.kill_grace_secs)


def _supervise(stmgr: subprocess.Popen) -> int:
    """Wait for the stmgr to exit (instances are watched by the stmgr itself)."""
    while True:
        code = stmgr.poll()
        if code is not None:
            return code
        time.sleep(_SUPERVISE_POLL_SECS)
