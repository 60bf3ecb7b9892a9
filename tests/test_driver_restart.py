"""Driver restart with the ZooKeeper state manager (a real server from pyspark's jars).

A driver process runs the reliable word count with ``heron.statemgr=zk://...``. While it
runs, a second submit of the same topology is refused. Then the driver is killed with
``kill -9``: its Spark JVM and containers go with it, and its ephemeral TMaster node vanishes
with its ZooKeeper session. A new driver submitting the same name resumes the topology from
ZooKeeper (same topology id, next generation, the spouts' committed offsets) and finishes it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import fault_support as faults
import reliable_word_count as rwc
from heron_spark.errors import TopologyStateError
from heron_spark.scheduler.submit import submit
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until
from zk_support import zookeeper  # noqa: F401

pytestmark = pytest.mark.fault

NAME = "resumable"
LINES = 2500



def _acks_by(out: Path, pids: set[int]) -> int:
    return sum(len(p.read_text().splitlines()) for p in out.glob("spout-*.log")
               if int(p.stem.rsplit("-", 1)[1]) in pids)


def test_driver_restart_resumes_from_zookeeper(spark, tmp_path, zookeeper):  # noqa: F811
    url = zookeeper.url(session_timeout_secs=1)
    corpus, out, work = tmp_path / "corpus.txt", tmp_path / "out", tmp_path / "work"
    text = rwc.write_corpus(corpus, LINES)
    args = [NAME, str(corpus), str(out), url, str(work)]
    first = faults.start_driver("reliable", args, tmp_path / "driver-1.log")
    try:
        with open_state_manager(url) as statemgr:
            wait_until(lambda: (statemgr.get_spout_state(NAME, "lines.0") or {})
                       .get("acked_total", 0) > 100, 120, message="committed spout offsets")
            before = statemgr.get_execution_state(NAME)
            topology_id = statemgr.get_topology(NAME).id
            assert before.state == "RUNNING" and statemgr.get_packing_plan(NAME) is not None
            assert statemgr.get_physical_plan(NAME) is not None

            # A second TMaster for the same topology is refused while the first one lives.
            topology = rwc.build(NAME, corpus, tmp_path / "other-out")
            with pytest.raises(TopologyStateError):
                submit(topology, spark=spark.session, master="local[4]",
                       conf={"heron.statemgr": url, "heron.work.dir": str(tmp_path / "w2")})

            first_pids = {int(p.stem.rsplit("-", 1)[1]) for p in out.glob("spout-*.log")}
            faults.kill_driver(first, work)
            wait_until(lambda: statemgr.get_tmaster_location(NAME) is None, 30,
                       message="the dead TMaster's ephemeral node to vanish")
            assert statemgr.get_execution_state(NAME).state == "RUNNING"  # never ended
        second = faults.start_driver("reliable", args, tmp_path / "driver-2.log")
        assert second.wait(timeout=300) == 0, (tmp_path / "driver-2.log").read_text()[-3000:]
    finally:
        for proc in (first, locals().get("second")):
            if proc is not None and proc.poll() is None:
                proc.kill()
    log = (tmp_path / "driver-2.log").read_text()
    assert "status FINISHED generation 1" in log
    with open_state_manager(url) as statemgr:
        assert statemgr.get_topology(NAME).id == topology_id  # the same topology, resumed
    raw, unique, _ = rwc.read_counts(out)
    assert unique == rwc.expected_counts(text)
    assert rwc.committed_acks(url, NAME, 2) == LINES
    second_pids = {int(p.stem.rsplit("-", 1)[1]) for p in out.glob("spout-*.log")} - first_pids
    resumed_acks = _acks_by(out, second_pids)
    assert 0 < resumed_acks < LINES  # the new driver did not start the sources over
    print(f"second driver acked {resumed_acks} of {LINES} lines; pid {os.getpid()}")
