"""The soak across hosts: effectively once from Kafka into Kafka and Delta for
``HERON_SPARK_SOAK_SECS`` seconds (600 by default) of random ``kill -9``, cut-off hosts and a
lost host (``hosts_soak_driver.py`` has the topology and the faults).

Hosts (``hosts_support``): ``h0`` runs the Spark master, ZooKeeper and the driver; ``h1``..``h3``
each a Spark worker and one broker of a three-broker Kafka cluster (KRaft, every topic on all
three, two in sync at least). One of ``h1``..``h3`` is lost half-way, with its broker.

Afterwards the output is read by readers that share no code with heron_spark's sinks, each
compared with the exact output computed from the input topic: a ``read_committed`` consumer
and Spark's own Kafka source (``kafka.isolation.level=read_committed``) on the output topic;
``deltalake``, DuckDB (replaying ``_delta_log``) and Delta Lake's Spark reader on the table.
Every ``(word, n)`` once, nothing else; the table's versions carry each checkpoint's
application transaction once; a ``read_uncommitted`` consumer shows the aborted records.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import delta_support
import kafka_word_count as kwc
import hosts_support
from cluster_support import StandaloneCluster
from hosts_support import Hosts
from kafka_support import KafkaClient, KafkaCluster
from zk_support import ZooKeeperServer

pytestmark = pytest.mark.hosts

DRIVER = Path(__file__).resolve().parent / "hosts_soak_driver.py"
SECS = float(os.environ.get("HERON_SPARK_SOAK_SECS", "600"))
SEED = int(os.environ.get("HERON_SPARK_SOAK_SEED", "35"))


@pytest.fixture(scope="module")
def soak_cluster(tmp_path_factory):
    """Hosts h0..h3: ZooKeeper and the master on h0; a Spark worker and a Kafka broker on
    each of h1..h3."""
    hosts_support.require()
    hosts = Hosts(4).create()
    try:
        zk = ZooKeeperServer(host=hosts[0].address, prefix=hosts[0].exec_prefix()).start()
        try:
            kafka = KafkaCluster(tmp_path_factory.mktemp("kafka"), hosts.hosts[1:]).start()
            try:
                spark = StandaloneCluster(
                    workers=3, cores=2, memory="2g", master_host=hosts[0].address,
                    master_prefix=hosts[0].exec_prefix(),
                    worker_hosts=[h.address for h in hosts.hosts[1:]],
                    worker_prefixes=[h.exec_prefix() for h in hosts.hosts[1:]]).start()
                try:
                    yield hosts, zk, kafka, spark
                finally:
                    spark.stop()
            finally:
                kafka.stop()
        finally:
            zk.stop()
    finally:
        hosts.remove()


def _lines(stdout: str, kind: str) -> list[dict]:
    return [json.loads(line[len(kind) + 1:]) for line in stdout.splitlines()
            if line.startswith(kind + " ")]


def test_effectively_once_into_kafka_and_delta_through_a_soak_of_kills_cuts_and_a_lost_host(
        soak_cluster, tmp_path):
    from spark_readers import reader

    hosts, zk, kafka, spark = soak_cluster
    spec = {"tmp": str(tmp_path), "master": spark.url, "statemgr": zk.url(),
            "kafka": kafka.servers, "secs": SECS, "seed": SEED,
            "hosts": [{"index": h.index, "namespace": h.namespace, "address": h.address,
                       "veth": h.veth} for h in hosts.hosts]}
    proc = subprocess.run([*hosts[0].exec_prefix(), sys.executable, str(DRIVER),
                           json.dumps(spec)], capture_output=True, text=True,
                          timeout=SECS + 900, cwd=DRIVER.parent.parent)
    (tmp_path / "driver.log").write_text(proc.stdout + proc.stderr)
    print(proc.stdout)
    output = (f"--- stdout\n{proc.stdout[-6000:]}\n--- stderr (all: {tmp_path}/driver.log)\n"
              f"{proc.stderr[-6000:]}")
    assert proc.returncode == 0 and "HOSTS SOAK OK" in proc.stdout, output
    [run] = _lines(proc.stdout, "SOAK")
    faults = _lines(proc.stdout, "FAULT")
    kills = _lines(proc.stdout, "KILL")
    assert [f for f in faults if f["fault"] == "host lost"], faults
    assert [f for f in faults if f["fault"] == "cut"], faults
    assert len(kills) >= SECS / 30, kills  # about one every 12 s, none while none runs

    # The brokers still up (two of three) hold the input: each line the driver sent, once.
    lost = {f["host"] for f in faults if f["fault"] == "host lost"}
    alive = KafkaClient(",".join(b.servers for b in kafka.brokers if b.host not in lost), 3)
    lines = [m.value().decode() for m in alive.read_to_end(run["source"], 4)]
    assert collections.Counter(lines) == collections.Counter(kwc.lines(run["lines"], seed=11))
    expected = kwc.running_counts_expected(lines)
    assert sum(expected.values()) == run["words"]

    committed = alive.read_to_end(run["sink"], 2)
    everything = alive.read_to_end(run["sink"], 2, isolation="read_uncommitted")
    table = Path(run["table"])
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # two Spark processes at once
        spark_kafka_rows = pool.submit(reader, "kafka", alive.servers, run["sink"],
                                       "read_committed")
        spark_delta_rows = pool.submit(reader, "delta", str(table))
        spark_kafka, spark_delta = spark_kafka_rows.result(), spark_delta_rows.result()
    readers = {
        "read_committed consumer": kwc.record_pairs(committed),
        "Spark's Kafka source": collections.Counter((r["key"], r["value"])
                                                    for r in spark_kafka),
        "deltalake": delta_support.read_deltalake(table, ("key", "value")),
        "DuckDB": delta_support.read_duckdb_rows(table, "key, value"),
        "Delta's Spark reader": collections.Counter(
            (r["key"], r["value"]) for r in spark_delta if "__versions__" not in r),
    }
    for name, rows in readers.items():
        missing, extra = expected - rows, rows - expected
        assert not missing and not extra, (
            f"{name}: {sum(missing.values())} missing (e.g. {list(missing)[:5]}), "
            f"{sum(extra.values())} extra (e.g. {list(extra)[:5]})")
    carrying = delta_support.check_txns(table)
    print(f"SOAK RESULT {len(lines)} lines, {run['words']} words; {len(kills)} kills, "
          f"{len(faults)} network faults; {len(everything) - len(committed)} aborted Kafka "
          f"records; {carrying} Delta versions with a transaction")
    # Only the daemons (Spark, ZooKeeper, the brokers still up) are left on the hosts.
    hosts_support.wait_nothing_left(hosts, {p.pid for p in spark.procs} | {zk.proc.pid} | {
        b.process.pid for b in kafka.brokers if b.process is not None})

