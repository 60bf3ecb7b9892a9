"""The driver of ``test_executor_loss``'s end-to-end test, in a fresh process (a fresh JVM, so
the JVM bridge's jar is on the driver's class path): a two-worker standalone cluster on
loopback, an at-least-once word count on it, the executor JVM of container 0 killed; the
TMaster must hear of the loss from the bridge within 10 s, and the topology must finish with
exact counts. ``python tests/executor_loss_driver.py TMP_DIR``; prints ``EXECUTOR LOSS OK``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS), str(TESTS.parent)]
os.environ["PYSPARK_PYTHON"] = sys.executable

import fault_support as faults  # noqa: E402
import reliable_word_count as rwc  # noqa: E402
from cluster_support import (HOST, StandaloneCluster, ancestors, cluster_driver_session,  # noqa: E402
                             cmdline)
from heron_spark.testing import wait_until  # noqa: E402

os.environ["SPARK_LOCAL_IP"] = HOST
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def main(tmp: Path) -> None:
    hconf = {"heron.statemgr": f"file://{tmp}/state", "heron.work.dir": f"{tmp}/work"}
    with StandaloneCluster(workers=2, cores=1) as cluster:
        spark = cluster_driver_session(cluster.url, "heron_spark-executor-loss", HOST, 2)
        spark.sparkContext.addPyFile(rwc.__file__)  # the executors see no test folder
        try:
            run(spark, tmp, hconf)
        finally:
            spark.stop()
    print("EXECUTOR LOSS OK")


def run(spark, tmp: Path, hconf: dict) -> None:
    from heron_spark.scheduler.submit import submit

    name = "lost-executor"
    corpus, out = tmp / "corpus.txt", tmp / "out"
    text = rwc.write_corpus(corpus, 3000)
    topology = rwc.build(name, corpus, out, config={
        "topology.message.timeout.secs": 4, "topology.max.spout.pending": 300, rwc.SLEEP_MS: 3,
        "heron.stage.resubmit.backoff.secs": 0.2,
        # Far above the test's bound: the recovery must come from the executor event.
        "heron.tmaster.stmgr.heartbeat.timeout.secs": 600})
    handle = submit(topology, spark=spark, conf=hconf)
    try:
        assert handle.wait_running(timeout=120), handle.status
        work = tmp / "work" / name
        wait_until(lambda: sum(p.stat().st_size for p in out.glob("*.log")) > 10_000, 60,
                   message="the topology to make progress")
        [stmgr] = faults.find(work, "stmgr", container=0)
        [executor] = [p for p in ancestors(stmgr) if EXECUTOR_CLASS in cmdline(p)]
        os.kill(executor, signal.SIGKILL)
        killed_at = time.monotonic()
        [loss] = wait_until(lambda: handle.status_detail()["executor_losses"], 30,
                            message="the TMaster to hear of the lost executor")
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


if __name__ == "__main__":
    main(Path(sys.argv[1]))
