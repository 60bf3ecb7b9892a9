"""Across hosts: a Spark standalone cluster whose master, workers and driver each run on a host
of their own (a network namespace on a bridge), and the network faults and host loss such a
cluster meets, during an at-least-once and an effectively-once word count.

Hosts (``hosts_support``): ``h0`` runs the Spark master, ZooKeeper (the state manager: no file
path is shared by assumption) and the driver (a subprocess, ``hosts_driver.py``, run with
``ip netns exec``; its TMaster binds h0's address); ``h1``..``h3`` one worker each, started
with ``SPARK_LOCAL_IP`` = the host's address, so every stmgr binds and advertises it. The
cluster is shared by the module's tests. Each test prints the stall after each fault and the
counts (``FAULT`` lines; ``pytest -s`` shows them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hosts_support

pytestmark = pytest.mark.hosts

DRIVER = Path(__file__).resolve().parent / "hosts_driver.py"
WORKERS = 3


@pytest.fixture(scope="module")
def cluster():
    """Hosts h0..h3, ZooKeeper and the master on h0, a worker on each of h1..h3."""
    with hosts_support.standalone_cluster(WORKERS) as made:
        yield made


def _run_driver(mode: str, cluster, tmp: Path) -> list[dict]:
    hosts = cluster[0]
    spec = hosts_support.driver_spec(cluster, tmp)
    proc = subprocess.run([*hosts[0].exec_prefix(), sys.executable, str(DRIVER), mode,
                           json.dumps(spec)], capture_output=True, text=True, timeout=420,
                          cwd=DRIVER.parent.parent)
    (tmp / "driver.log").write_text(proc.stdout + proc.stderr)
    output = (f"--- stdout\n{proc.stdout[-8000:]}\n--- stderr (all: {tmp}/driver.log)\n"
              f"{proc.stderr[-8000:]}")
    print(proc.stdout)
    assert proc.returncode == 0, output
    assert f"HOSTS {mode.upper()} OK" in proc.stdout, output
    # Nothing but the cluster's daemons is left on any host once the application ended (the
    # workers stop its executors, the containers' children die with them).
    hosts_support.wait_nothing_left(hosts, hosts_support.daemons(cluster))
    return [json.loads(line[len("FAULT "):]) for line in proc.stdout.splitlines()
            if line.startswith("FAULT ")]


def test_at_least_once_word_count_survives_partitions_slow_lossy_and_flapping_links(
        cluster, tmp_path):
    """Faults a-f, one after the other, each followed by the stall it left; exact distinct
    counts, every line acked; no stage restart (every fault is under twice the liveness
    timeout); no task ran tuples in two generations at once."""
    records = _run_driver("alo", cluster, tmp_path)
    assert [r["fault"][0] for r in records] == ["a", "b", "c", "d", "e", "f", "f"]
    for record in records[:-1]:
        assert record["generation"] == 0 and record["status"] == "RUNNING", record
        assert record["tuples_dropped"] == 0 and record["peer_frames_dropped"] == 0, record
    assert records[2]["dropped_packets"] > 0, "the lossy link dropped no packet"


def test_effectively_once_word_count_survives_a_partition_and_loses_a_host(cluster, tmp_path):
    """A partition and the TMaster's host cut off (no restart), then every process of one
    worker host killed: the TMaster reports the lost host, the stage comes back on the others
    (generation 1), counts exact, no split brain. Last in the module: the cluster is a worker
    short afterwards."""
    records = _run_driver("eo", cluster, tmp_path)
    assert [r["fault"][0] for r in records] == ["a", "e", "4", "f"]
    assert records[-1]["generation"] == 1
