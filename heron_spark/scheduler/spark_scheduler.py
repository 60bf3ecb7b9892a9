"""The scheduler: runs a topology's containers as one Spark barrier stage. Driver only.

The stage runs in a background thread under a Spark job group named after the topology, so
the caller (notebook, CLI, Airflow task) stays responsive and cancelling the group kills the
topology.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from typing import Callable

from heron_spark.container.task import ContainerTask
from heron_spark.errors import ClusterCapacityError, HeronSparkError

log = logging.getLogger(__name__)
_LOCAL = re.compile(r"^local(?:\[(\*|\d+)(?:,\s*\d+)?\])?$")


def job_group(topology: str) -> str:
    """Return the Spark job group of ``topology``'s barrier stage."""
    return f"heron_spark:{topology}"


def job_description(topology: str, generation: int, containers: int, attempt: int) -> str:
    """Return the Spark job description of one submission of ``topology``'s barrier stage.

    Spark copies a job's description (the ``spark.job.description`` local property) into the
    job when the job is submitted and never reads it again, so a running job's description
    cannot change: each submission (a resubmission after a failure is a new job) gets its own.
    """
    state = "STARTING" if attempt == 1 else "RESUBMITTED"
    return (f"heron_spark topology {topology} \u2014 {state}, generation {generation}, "
            f"{containers} containers")


def is_local_master(master: str) -> bool:
    """Return True for ``local``, ``local[N]``, ``local[*]`` and ``local[N,F]``."""
    return bool(_LOCAL.match(master))


def available_slots(spark) -> int:
    """Return how many tasks the cluster can run at once right now."""
    sc = spark.sparkContext
    match = _LOCAL.match(sc.master)
    if match:
        cores = match.group(1)
        if cores is None:
            return 1
        return os.cpu_count() or 1 if cores == "*" else int(cores)
    jsc = sc._jsc.sc()
    return int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))


def check_slots(spark, needed: int, wait_secs: float) -> None:
    """Wait up to ``wait_secs`` for ``needed`` slots; raise ClusterCapacityError otherwise."""
    deadline = time.monotonic() + wait_secs
    while True:
        slots = available_slots(spark)
        if slots >= needed:
            return
        if is_local_master(spark.sparkContext.master) or time.monotonic() >= deadline:
            raise ClusterCapacityError(needed, slots, spark.sparkContext.master)
        time.sleep(0.5)  # executors of a standalone cluster register after the driver starts


def is_cancellation(error: BaseException) -> bool:
    """Return True when Spark ended the stage on purpose.

    That is when its job group or every job was cancelled, or the SparkContext is shutting
    down (Ctrl-C reaches the JVM too).
    """
    text = str(error)
    return any(marker in text for marker in (
        "SPARK_JOB_CANCELLED", "cancelled job group", "cancellation of all jobs",
        "SparkContext was shut down", "cancelled because SparkContext was shut down"))


_DETERMINISTIC = ("ModuleNotFoundError", "ImportError", "PYTHON_VERSION_MISMATCH",
                  "Python in worker has different version")


def deterministic_failure(error: BaseException) -> str | None:
    """Return the line of a stage failure that would recur on every attempt, or None.

    Such a failure is, e.g., a module the executors cannot import; None means the failure is
    worth resubmitting.
    """
    for line in str(error).splitlines():
        if any(marker in line for marker in _DETERMINISTIC):
            return line.strip()
    return None


class StageRecovery(HeronSparkError, RuntimeError):
    """The driver cancelled a running barrier stage to replace its containers now.

    Causes: a lost executor, a stmgr that stopped heartbeating. The resubmission policy
    handles it like a failed stage, not like a kill.
    """

    def __init__(self, topology: str, reason: str) -> None:
        self.topology = topology
        self.reason = reason
        super().__init__(f"topology {topology!r}: the driver restarted its containers: {reason}")


class BarrierStage:
    """The container stage, run (and re-run after failures) in a background thread.

    When a run fails, ``retry(error, task)`` decides: it returns the ``ContainerTask`` of the
    next attempt (a new generation), or None to stop and report ``error`` to ``on_exit``.
    ``recover(reason)`` (any thread) cancels the running attempt and hands a ``StageRecovery``
    to ``retry``. Each attempt is submitted with its own job description (``job_description``).
    ``relaunch`` (an update) queues the next run: when the current one ends, its ``switch``
    callback runs and, if it returns True, the new task runs on its container count.
    """

    def __init__(self, spark, task: ContainerTask, containers: int,
                 on_exit: Callable[[list | None, BaseException | None], None],
                 retry: Callable[[BaseException, ContainerTask], ContainerTask | None]
                 | None = None,
                 planned: Callable[[BaseException], bool] = is_cancellation) -> None:
        self.spark = spark
        self.task = task
        self.containers = containers
        self.group = job_group(task.topology)
        self.result: list | None = None
        self.error: BaseException | None = None
        self.attempts = 0
        self._on_exit = on_exit
        self._retry = retry
        self._planned = planned
        self._recovery: tuple[int, str] | None = None  # (attempt, reason), set by recover()
        self._recovery_lock = threading.Lock()
        self._relaunch: tuple[ContainerTask, int, Callable[[], bool]] | None = None
        self._relaunch_lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=f"barrier-{task.topology}",
                                       daemon=True)

    def start(self) -> "BarrierStage":
        """Start the thread that runs (and resubmits) the barrier stage; return self."""
        self.thread.start()
        return self

    def _run(self) -> None:
        sc = self.spark.sparkContext
        try:
            sc.setJobGroup(self.group, f"heron_spark topology {self.task.topology}",
                           interruptOnCancel=True)
            while True:
                with self._recovery_lock:
                    self.attempts += 1
                    self._recovery = None  # asked during the last attempt's backoff: done now
                sc.setJobDescription(job_description(self.task.topology, self.task.generation,
                                                     self.containers, self.attempts))
                try:
                    rdd = sc.parallelize(range(self.containers), self.containers)
                    self.result = rdd.barrier().mapPartitions(self.task).collect()
                    if not self._next_run():
                        return
                    continue
                except Exception as exc:  # noqa: BLE001 - retried, or reported to the handle
                    with self._recovery_lock:
                        asked, self._recovery = self._recovery, None
                    if asked is not None and asked[0] == self.attempts and is_cancellation(exc):
                        recovery = StageRecovery(self.task.topology, asked[1])
                        recovery.__cause__ = exc
                        exc = recovery
                    if self._planned(exc):  # a kill or Ctrl-C: the end asked for, not a fault
                        log.info("barrier stage of %s (generation %d) stopped as asked",
                                 self.task.topology, self.task.generation)
                        raise exc
                    if self._next_run():  # an update stopped it: its containers may fail
                        continue
                    log.error("barrier stage of %s (generation %d) failed: %s",
                              self.task.topology, self.task.generation,
                              str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                    following = self._retry(exc, self.task) if self._retry is not None else None
                    if following is None:
                        raise exc
                    self.task = following
        except BaseException as exc:  # noqa: BLE001 - reported to the handle, not swallowed
            self.error = exc
        finally:
            self._on_exit(self.result, self.error)

    def recover(self, reason: str) -> None:
        """Cancel the running attempt so the resubmission policy replaces every container now.

        This is instead of waiting for Spark to notice. Safe from any thread.
        """
        with self._recovery_lock:
            if self._recovery is not None or not self.thread.is_alive():
                return  # one recovery per attempt; none once the stage has ended
            self._recovery = (self.attempts, reason)
        log.warning("topology %s: restarting its containers: %s", self.task.topology, reason)
        self.spark.sparkContext.cancelJobGroup(self.group)

    def relaunch(self, task: ContainerTask, containers: int, switch: Callable[[], bool]) -> None:
        """Run ``task`` on ``containers`` once the current run ends (any thread)."""
        with self._relaunch_lock:
            self._relaunch = (task, containers, switch)

    def _next_run(self) -> bool:
        """Take a queued relaunch: True when the loop must run the new task now."""
        with self._relaunch_lock:
            queued, self._relaunch = self._relaunch, None
        if queued is None:
            return False
        task, containers, switch = queued
        if not switch():
            return False
        log.info("barrier stage of %s: generation %d on %d containers", task.topology,
                 task.generation, containers)
        self.task, self.containers, self.result = task, containers, None
        return True

    def cancel(self) -> None:
        """Cancel the Spark job group: Spark kills the barrier tasks (and so their children)."""
        self.spark.sparkContext.cancelJobGroup(self.group)

    def join(self, timeout: float | None) -> bool:
        """Wait for the stage; return True once it has ended."""
        self.thread.join(timeout)
        return not self.thread.is_alive()
