"""Spark's loss of an executor hosting a container reaches the TMaster, which restarts the
stage at once.

The pure part (which executor hosts which container, from the bridge's events) is tested here
with event dicts as the bridge writes them; the end-to-end test kills the executor JVM of a
container on a real standalone cluster (master and two workers on loopback) and checks the
TMaster acted on the bridge's event and the topology finished with exact counts.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

import fault_support as faults
import reliable_word_count as rwc
from cluster_support import HOST, StandaloneCluster, ancestors, cmdline
from heron_spark.scheduler.executors import ContainerExecutors, ExecutorLoss

GROUP = "heron_spark:wc"


def _start(stage, attempt, partition, executor, group=GROUP):
    return {"type": "task_start", "group": group, "stage": stage, "attempt": attempt,
            "partition": partition, "executor": executor, "host": "h", "time_ms": 1}


def _removed(executor):
    return {"type": "executor_removed", "executor": executor, "reason": "worker lost",
            "time_ms": 2}


def test_only_an_executor_hosting_a_container_of_the_current_attempt_is_a_loss():
    executors = ContainerExecutors(GROUP)
    for event in (_start(3, 0, 0, "1"), _start(3, 0, 1, "2"), _start(4, 0, 0, "9", "other")):
        assert executors.on_event(event, 0) is None
    assert executors.on_event(_removed("9"), 0) is None        # another topology's executor
    assert executors.on_event(_removed("1"), 1) == ExecutorLoss("1", (0,), "worker lost", 0)
    assert executors.on_event(_removed("1"), 1) is None        # reported once
    # The stage is resubmitted: executors of the old attempt no longer host anything.
    executors.on_event(_start(5, 0, 0, "3"), 1)
    executors.on_event(_start(5, 0, 1, "3"), 1)
    assert executors.on_event(_removed("2"), 1) is None
    executors.on_event(_start(3, 0, 1, "7"), 1)                # a late event of an old attempt
    assert executors.hosting == {"3": {0, 1}}
    assert executors.on_event(_removed("3"), 1) == ExecutorLoss("3", (0, 1), "worker lost", 1)


EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


@pytest.fixture
def bridged_cluster_session(tmp_path):
    """A two-worker standalone cluster and a driver session with the JVM bridge loaded."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from heron_spark.scheduler import jvm_bridge

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    with StandaloneCluster(workers=2, cores=1) as cluster, pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSPARK_PYTHON", sys.executable)
        patch.setenv("SPARK_LOCAL_IP", HOST)
        builder = (SparkSession.builder.master(cluster.url).appName("heron_spark-executor-loss")
                   .config("spark.executor.cores", "1").config("spark.cores.max", "2")
                   .config("spark.executor.memory", "512m")
                   .config("spark.driver.host", HOST).config("spark.driver.bindAddress", HOST)
                   .config("spark.ui.enabled", "false")
                   # Look for the replacement executor's slot every second, not every 15 s.
                   .config("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s"))
        for key, value in jvm_bridge.spark_conf(jvm_bridge.build_jar()).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.addPyFile(rwc.__file__)  # the executors see no test folder
        try:
            yield spark
        finally:
            spark.stop()


def test_a_killed_executor_restarts_the_stage_at_once(bridged_cluster_session, tmp_path, hconf):
    from heron_spark.scheduler.submit import submit

    name = "lost-executor"
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = rwc.write_corpus(corpus, 3000)
    topology = rwc.build(name, corpus, out, config={
        "topology.message.timeout.secs": 4, "topology.max.spout.pending": 300, rwc.SLEEP_MS: 3,
        "heron.stage.resubmit.backoff.secs": 0.2,
        # Far above the test's bound: the recovery must come from the executor event.
        "heron.tmaster.stmgr.heartbeat.timeout.secs": 600})
    handle = submit(topology, spark=bridged_cluster_session, conf=hconf)
    try:
        assert handle.wait_running(timeout=120), handle.status
        work = tmp_path / "work" / name
        faults.wait_for(lambda: sum(p.stat().st_size for p in out.glob("*.log")) > 10_000, 60,
                        "the topology to make progress")
        [stmgr] = faults.find(work, "stmgr", container=0)
        [executor] = [p for p in ancestors(stmgr) if EXECUTOR_CLASS in cmdline(p)]
        os.kill(executor, signal.SIGKILL)
        killed_at = time.monotonic()
        [loss] = faults.wait_for(lambda: handle.status_detail()["executor_losses"], 30,
                                 "the TMaster to hear of the lost executor")
        assert time.monotonic() - killed_at < 10
        assert loss["containers"] == [0] and loss["generation"] == 0, loss
        # Spark fails a barrier stage on an executor loss itself, within about a second, so
        # either the resubmission policy or the TMaster restarts it first: exactly once.
        assert loss["action"] in ("restart", "none: generation 1 runs"), loss
        assert handle.wait(timeout=90) == "FINISHED"
        assert handle.status_detail()["generation"] == 1
    except BaseException:
        handle.kill()
        raise
    raw, unique, _ = rwc.read_counts(out)
    assert unique == rwc.expected_counts(text)
    assert rwc.committed_acks(hconf["heron.statemgr"], name, 2) == len(text)
