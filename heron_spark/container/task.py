"""The container: the body of one Spark barrier task (Heron's executor).

It writes the files its children need, starts the metrics manager, the stmgr and one process
per instance, restarts those that die, and supervises them until the stmgr exits for good (the
TMaster said shut down, or went away); then it stops whatever is left. Children die with this
process even when Spark SIGKILLs it (see ``_process.become_child``). Runs on a Spark executor
only.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

from heron_spark import _process
from heron_spark._failure_window import FailureWindow
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
    supervisor = _Supervisor(task, index, host, files, config,
                             list(packing.containers[index].instances))
    started = time.monotonic()
    try:
        stmgr_code = supervisor.run()
        return {"container": index, "stmgr_exit": stmgr_code, "workdir": str(root),
                "instance_exits": {t: p.returncode for t, p in supervisor.instances.items()},
                "instance_restarts": dict(supervisor.instance_restarts),
                "stmgr_restarts": supervisor.stmgr_restarts,
                "seconds": round(time.monotonic() - started, 3), "pid": os.getpid()}
    finally:
        supervisor.stop_all()


class _Supervisor:
    """Starts the container's children and restarts those that die (Heron's executor).

    An instance that exits non-zero (user exception, ``kill -9``) is restarted with the same
    task id; its stmgr takes the new connection in. A stmgr that dies takes its instances'
    connections with it: it is restarted on a new port, then every instance is restarted
    against it. More than ``heron.stmgr.restart.max`` stmgr deaths within
    ``heron.restart.window.secs`` fail the barrier task, and so the Spark stage, which the
    driver resubmits. The TMaster bounds instance restarts (it sees each failure).
    """

    def __init__(self, task: ContainerTask, index: int, host: str, files: ContainerFiles,
                 config: SystemConfig, instances: list) -> None:
        self.task, self.index, self.host, self.files, self.config = task, index, host, files, config
        self.instance_plans = {inst.task_id: inst for inst in instances}
        self.common = ["--workdir", str(files.root), "--topology", task.topology]
        self.tmaster = f"{task.tmaster_host}:{task.tmaster_port}"
        self.metricsmgr: subprocess.Popen | None = None
        self.metrics_port = 0
        self.stmgr: subprocess.Popen | None = None
        self.stmgr_port = 0
        self.instances: dict[int, subprocess.Popen] = {}
        self.instance_restarts: collections.Counter = collections.Counter()
        self.stmgr_restarts = 0
        self._stmgr_deaths = FailureWindow(config.restart_window_secs)

    def run(self) -> int:
        """Start everything; return the stmgr's exit code once it ends for good."""
        self.metricsmgr = _process.spawn(
            "heron_spark.metrics", [*self.common, "--container", str(self.index),
                                    "--tmaster", self.tmaster],
            self.files.logs / "metricsmgr.log", self.files.root)
        self.metrics_port = _process.wait_json(self.files.ready("metricsmgr"), self.metricsmgr,
                                               self.config.startup_timeout_secs,
                                               "metrics manager")["port"]
        self._start_stmgr_and_instances()
        while True:
            code = self.stmgr.poll()
            if code is not None:
                if code in _STMGR_FINAL_CODES:
                    _process.wait_all(list(self.instances.values()), self.config.kill_grace_secs)
                    return code
                self._restart_stmgr(code)
                continue
            for task_id, proc in list(self.instances.items()):
                # Exit 2 means the stmgr went away: the branch above restarts everyone then.
                if proc.poll() not in (None, 0, _INSTANCE_LOST_STMGR):
                    self._restart_instance(task_id, proc.returncode)
            time.sleep(_SUPERVISE_POLL_SECS)

    def _start_stmgr_and_instances(self) -> None:
        self.files.ready("stmgr").unlink(missing_ok=True)
        self.stmgr = _process.spawn(
            "heron_spark.stmgr", [*self.common, "--container", str(self.index),
                                  "--tmaster", self.tmaster, "--metrics-port",
                                  str(self.metrics_port), "--host", self.host,
                                  "--generation", str(self.task.generation)],
            self.files.logs / "stmgr.log", self.files.root)
        self.stmgr_port = _process.wait_json(self.files.ready("stmgr"), self.stmgr,
                                             self.config.startup_timeout_secs, "stmgr")["port"]
        for task_id in self.instance_plans:
            self._spawn_instance(task_id)

    def _spawn_instance(self, task_id: int) -> None:
        inst = self.instance_plans[task_id]
        self.instances[task_id] = _process.spawn(
            "heron_spark.instance",
            [*self.common, "--component", inst.component, "--task-id", str(task_id),
             "--stmgr-port", str(self.stmgr_port), "--metrics-port", str(self.metrics_port)],
            self.files.instance_log(inst.component, task_id), self.files.root)

    def _restart_instance(self, task_id: int, code: int) -> None:
        self.instance_restarts[task_id] += 1
        log.warning("container %d: task %d exited with %d; restart %d", self.index, task_id,
                    code, self.instance_restarts[task_id])
        self._spawn_instance(task_id)

    def _restart_stmgr(self, code: int) -> None:
        deaths = self._stmgr_deaths.record()
        if deaths > self.config.stmgr_restart_max:
            raise RuntimeError(f"container {self.index}: the stmgr died {deaths} "
                               f"times within {self.config.restart_window_secs} s (last exit "
                               f"code {code}); see {self.files.logs / 'stmgr.log'}")
        self.stmgr_restarts += 1
        log.warning("container %d: stmgr exited with %d; restarting it and its instances",
                    self.index, code)
        _process.terminate(list(self.instances.values()), self.config.kill_grace_secs)
        self._start_stmgr_and_instances()

    def stop_all(self) -> None:
        """Stop every child still running: instances and stmgr first, metrics manager last."""
        procs = [p for p in (self.stmgr, *self.instances.values()) if p is not None]
        _process.terminate(procs, self.config.kill_grace_secs)
        if self.metricsmgr is not None:
            _process.terminate([self.metricsmgr], self.config.kill_grace_secs)


_STMGR_FINAL_CODES = (0, 2)  # shut down by the TMaster; TMaster gone
_INSTANCE_LOST_STMGR = 2
