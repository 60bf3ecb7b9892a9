"""The scheduler: runs a topology's containers as one Spark barrier stage. Driver only.

The stage is ``spark.range(n, numPartitions=n).mapInArrow(container, schema, barrier=True)``:
one barrier task per container, the same DataFrame call on a classic and on a Spark Connect
session (which has no RDDs). It runs in a background thread so the caller (notebook, CLI,
Airflow task) stays responsive. On a classic session its jobs run in the Spark job group
``heron_spark:<name>`` (``sc.cancelJobGroup`` stops the topology), each with a job description;
under Spark Connect (no job groups, no job descriptions) they carry the job tag of that name
(``spark.interruptTag`` stops it).
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
import threading
import time
from typing import Callable, Iterator

from heron_spark.container.task import ContainerTask
from heron_spark.errors import ClusterCapacityError, HeronSparkError
from heron_spark.scheduler.session import available_slots, is_connect, is_local_master, master

log = logging.getLogger(__name__)
__all__ = ["BarrierStage", "ArrowContainer", "StageRecovery", "available_slots", "check_slots",
           "deterministic_failure", "is_cancellation", "is_local_master", "job_description",
           "job_group", "job_tag"]
_SUMMARY_SCHEMA = "summary binary"  # one row per container: its pickled summary dict


def job_group(topology: str) -> str:
    """Return the Spark job group of ``topology``'s barrier stage."""
    return f"heron_spark:{topology}"


def job_tag(topology: str) -> str:
    """Return the Spark job tag of ``topology``'s barrier stage under Connect (the group's name).

    Classic sessions use the job group instead: on pyspark 4.3 a classic ``spark.interruptTag``
    did not reach a tagged ``mapInArrow`` job started in another thread (it returned ``[]``).
    """
    return job_group(topology)


def job_description(topology: str, generation: int, containers: int, attempt: int) -> str:
    """Return the Spark job description of one submission of ``topology``'s barrier stage.

    Spark copies a job's description (the ``spark.job.description`` local property) into the
    job when the job is submitted and never reads it again, so a running job's description
    cannot change: each submission (a resubmission after a failure is a new job) gets its own.
    """
    state = "STARTING" if attempt == 1 else "RESUBMITTED"
    return (f"heron_spark topology {topology} \u2014 {state}, generation {generation}, "
            f"{containers} containers")


def check_slots(spark, needed: int, wait_secs: float) -> None:
    """Wait up to ``wait_secs`` for ``needed`` slots; raise ClusterCapacityError otherwise.

    When the session cannot count the cluster's slots (a Connect client of a cluster whose
    conf does not size its executors), say so once and leave it to Spark's own barrier check.
    """
    deadline = time.monotonic() + wait_secs
    url = master(spark)
    while True:
        slots = available_slots(spark)
        if slots is None:
            log.info("cannot count the task slots of Spark master %r from a Spark Connect "
                     "client (set spark.executor.instances and spark.executor.cores on the "
                     "server to have them checked); Spark refuses a barrier stage of %d tasks "
                     "if the cluster cannot run them at once", url, needed)
            return
        if slots >= needed:
            return
        if is_local_master(url) or time.monotonic() >= deadline:
            raise ClusterCapacityError(needed, slots, url)
        time.sleep(0.5)  # executors of a standalone cluster register after the driver starts


def is_cancellation(error: BaseException) -> bool:
    """Return True when Spark ended the stage on purpose.

    That is when its job group, job tag or every job was cancelled, or the SparkContext is
    shutting down (Ctrl-C reaches the JVM too); under Spark Connect, when its operation was
    interrupted (``interruptTag``) or its session closed (the client stopped it or went away).
    """
    text = str(error)
    return any(marker in text for marker in (
        "SPARK_JOB_CANCELLED", "cancelled job group", "cancellation of all jobs",
        "SparkContext was shut down", "cancelled because SparkContext was shut down",
        "OPERATION_CANCELED", "INVALID_HANDLE.SESSION_CLOSED"))


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


@dataclasses.dataclass
class ArrowContainer:
    """The ``mapInArrow`` function of the barrier stage: runs one container. Executor only.

    Its partition of ``spark.range`` only says which container this task is (the barrier
    context's partition id); the one row it yields holds the container's summary, pickled.
    """

    task: ContainerTask

    def __call__(self, batches: Iterator) -> Iterator:
        """Run the container of this barrier task; yield its summary as one Arrow batch."""
        import pyarrow as pa

        rows = (row for batch in batches for row in range(batch.num_rows))
        for summary in self.task(rows):
            yield pa.RecordBatch.from_pydict({"summary": [pickle.dumps(summary)]},
                                             schema=pa.schema([("summary", pa.binary())]))


def run_barrier_stage(spark, task: ContainerTask, containers: int) -> list:
    """Run ``containers`` barrier tasks of ``task`` and return their summaries (blocks)."""
    frame = spark.range(containers, numPartitions=containers)
    rows = frame.mapInArrow(ArrowContainer(task), _SUMMARY_SCHEMA, barrier=True).collect()
    return [pickle.loads(row["summary"]) for row in rows]  # noqa: S301 - our own executors'


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
        self.tag = job_tag(task.topology)
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
        connect = is_connect(self.spark)
        sc = None if connect else self.spark.sparkContext
        try:
            if sc is not None:
                sc.setJobGroup(self.group, f"heron_spark topology {self.task.topology}",
                               interruptOnCancel=True)
            else:
                self.spark.addTag(self.tag)  # per thread: this one submits every attempt
                log.info("topology %s runs from a Spark Connect session: its barrier stage is "
                         "tagged %r (Spark Connect has no job descriptions)",
                         self.task.topology, self.tag)
            while True:
                with self._recovery_lock:
                    self.attempts += 1
                    self._recovery = None  # asked during the last attempt's backoff: done now
                if sc is not None:
                    sc.setJobDescription(job_description(self.task.topology,
                                                         self.task.generation,
                                                         self.containers, self.attempts))
                try:
                    self.result = run_barrier_stage(self.spark, self.task, self.containers)
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
            if sc is None:
                try:
                    self.spark.removeTag(self.tag)
                except Exception:  # noqa: BLE001 - a closed session has no tags left to remove
                    pass
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
        self._interrupt()

    def relaunch(self, task: ContainerTask, containers: int, switch: Callable[[], bool]) -> None:
        """Run ``task`` on ``containers`` once the current run ends (any thread)."""
        with self._relaunch_lock:
            self._relaunch = (task, containers, switch)

    def drop_relaunch(self) -> None:
        """Forget a queued relaunch (the update that queued it could not stop this run)."""
        with self._relaunch_lock:
            self._relaunch = None

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
        """Cancel the stage's Spark jobs: Spark kills the barrier tasks (and their children)."""
        self._interrupt()

    def _interrupt(self) -> None:
        """Cancel the stage's jobs: by job group on a classic session, by tag under Connect.

        Under Connect, ``interruptTag`` from any thread reaches the operations the stage
        thread started with the tag (tags are per thread, interrupts per session).
        """
        if is_connect(self.spark):
            self.spark.interruptTag(self.tag)
        else:
            self.spark.sparkContext.cancelJobGroup(self.group)

    def join(self, timeout: float | None) -> bool:
        """Wait for the stage; return True once it has ended."""
        self.thread.join(timeout)
        return not self.thread.is_alive()
