"""Word count on a real two-worker Spark standalone cluster (loopback addresses only).

Why: ``local[N]`` puts every barrier task in one executor JVM, so it never proves that the
two containers of a topology can run in different executors on different workers and still
find each other through the TMaster. Here each worker hosts one 1-core executor
(``spark.cores.max=2``, spread out by the master), and the test checks, from the physical
plan, that the two stmgrs really descend from different worker JVMs.

The workers bind 127.0.0.2 and 127.0.0.3 (the master and driver 127.0.0.1), so executors
advertise addresses other than 127.0.0.1, as on a cluster of several hosts: stmgrs must
advertise those to each other while their own instances still reach them over loopback.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # `examples` lives in the checkout, not in the package

import heron_spark  # noqa: E402
from cluster_support import HOST, StandaloneCluster, ancestors, cmdline  # noqa: E402
from examples.word_count import build, expected_counts, final_counts  # noqa: E402
from heron_spark.testing import COLLECT_DIR, read_collected  # noqa: E402

pytestmark = pytest.mark.cluster

SENTENCES = 5000
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
WORKER_HOSTS = ["127.0.0.2", "127.0.0.3"]


@pytest.fixture(scope="module")
def cluster():
    """A master and two workers (2 cores each); killed, process trees and all, at the end."""
    with StandaloneCluster(workers=2, cores=2, worker_hosts=WORKER_HOSTS) as running:
        yield running


@pytest.fixture(scope="module")
def session(cluster, tmp_path_factory):
    """A SparkSession on the cluster; any other active session is stopped first (a
    SparkContext is per-process, and getOrCreate would silently reuse one on another master)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and active.sparkContext.master != cluster.url:
        active.stop()
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSPARK_PYTHON", sys.executable)
        patch.setenv("SPARK_LOCAL_IP", HOST)
        spark = (SparkSession.builder.master(cluster.url).appName("heron_spark-standalone-test")
                 .config("spark.executor.cores", "1")
                 .config("spark.cores.max", "2")
                 .config("spark.executor.memory", "1g")
                 .config("spark.driver.host", HOST)
                 .config("spark.driver.bindAddress", HOST)
                 .config("spark.ui.enabled", "false")
                 .getOrCreate())
        # Ship ``examples`` the way users ship their code: Spark puts the zip on the workers'
        # sys.path as a relative path, which the container's children must still resolve.
        spark.sparkContext.addPyFile(_zip_examples(tmp_path_factory.mktemp("ship")))
        try:
            yield spark
        finally:
            spark.stop()


def _zip_examples(folder: Path) -> str:
    archive = folder / "examples.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for source in (REPO / "examples").glob("*.py"):
            zipped.write(source, f"examples/{source.name}")
    return str(archive)


def worker_of(pid: int) -> int | None:
    """The pid of the Spark worker JVM ``pid`` descends from (None if it is gone or has none)."""
    return next((p for p in ancestors(pid) if WORKER_CLASS in cmdline(p)), None)


def test_word_count_across_two_workers(cluster, session, tmp_path):
    collect = tmp_path / "collect"
    handle = heron_spark.submit(build(sentences_per_task=SENTENCES, containers=2), spark=session,
                                conf={COLLECT_DIR: str(collect),
                                      "heron.statemgr": f"file://{tmp_path / 'state'}",
                                      "heron.work.dir": str(tmp_path / "work")})
    try:
        assert handle.wait_running(timeout=120), f"never ran: {handle.status}"
        # Read the process tree while the stmgrs are alive (the topology runs for seconds).
        stmgrs = handle.physical_plan.stmgrs
        workers = {s.container_index: worker_of(s.pid) for s in stmgrs}
        status = handle.wait(timeout=180)
    except BaseException:
        handle.kill()  # stop every container process before the cluster goes away
        raise

    assert len(stmgrs) == 2
    assert {s.host for s in stmgrs} == set(WORKER_HOSTS), \
        f"stmgrs did not advertise their executors' addresses: {[s.host for s in stmgrs]}"
    assert set(workers.values()) == set(cluster.worker_pids), \
        f"containers did not land on both workers: {workers}"
    assert status == "FINISHED"
    assert final_counts(read_collected(collect)) == expected_counts(SENTENCES, 2)
