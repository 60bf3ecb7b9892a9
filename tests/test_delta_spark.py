"""DeltaSink on Spark, effectively once, through ``kill -9`` of its instance and of a container.

``fault``: the word count (``FileSpout`` -> split -> ``DeltaSink``, two sink tasks in two
containers) runs on ``local[4]``; once checkpoints have committed and the table has versions,
the sink's instance process is killed (``kill -9``), then, after the next commits, the whole
container 1 (the barrier task's Python worker, so the stage is resubmitted). The table then
holds exactly the corpus's rows, no duplicate and nothing missing, as read by three
independent readers: delta-rs, DuckDB replaying ``_delta_log`` itself, and Delta Lake's Spark
reader (pyspark 4.2.1 with delta-spark 4.4.0, ``spark_readers``). Every Delta version carries
exactly one application transaction, never the same ``(app id, checkpoint)`` twice, and the
sinks' logs account for every version.
"""

from __future__ import annotations

import collections
import re

import pytest

import delta_support as ds
import fault_support as faults
import parquet_word_count as pwc
from heron_spark.scheduler.submit import submit
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until


def _committed(hconf, name: str) -> int:
    with open_state_manager(hconf["heron.statemgr"]) as statemgr:
        return int((statemgr.get_committed_checkpoint(name) or {}).get("id", 0))


def _versions(out) -> int:
    log = out / "_delta_log"
    return len(list(log.glob("*.json"))) if log.is_dir() else 0


def _kill_a_sink_then_a_container(spark, hconf, tmp_path, name, corpus, table, stored, *,
                                  sinks: int, sleep_ms: float,
                                  sink_config: dict | None = None) -> dict:
    """Run the effectively-once ``corpus`` -> ``DeltaSink(table)`` word count on ``local[4]``;
    once two checkpoints committed and ``stored`` (the table's folder) has two versions,
    ``kill -9`` a sink instance, then, after its next commit, container 1 (the Spark Python
    worker running the barrier task: the stage is resubmitted).

    Return the final status detail, once the run FINISHED with a failure and a new generation.
    """
    topology = ds.build(name, corpus, table, mode="EFFECTIVELY_ONCE", sinks=sinks,
                        sink_config=sink_config,
                        config={"topology.stmgrs": 2,
                                "topology.stateful.checkpoint.interval.seconds": 0.5,
                                pwc.SLEEP_MS: sleep_ms, "heron.stage.resubmit.backoff.secs": 0.5,
                                "heron.stmgr.backpressure.high.water.tuples": 100,
                                "heron.stmgr.backpressure.low.water.tuples": 50})
    handle = submit(topology, spark=spark.session, conf=hconf, master="local[4]")
    work = tmp_path / "work" / name
    handle.wait_running(timeout=120)
    wait_until(lambda: _committed(hconf, name) >= 2 and _versions(stored) >= 2, 60,
               message="two committed checkpoints and two Delta versions")
    [victim, *_] = faults.find(work, "instance", component="out")
    faults.kill9(victim)
    seen = _versions(stored)
    wait_until(lambda: _versions(stored) >= seen + 1, 60,
               message="the sink to commit again after its restart")
    [stmgr] = faults.find(work, "stmgr", container=1)
    faults.kill9(faults.parent_of(stmgr))  # the Spark Python worker running the barrier task
    assert handle.wait(timeout=180) == "FINISHED", handle.status_detail()
    detail = handle.status_detail()
    assert sum(detail["instance_failures"].values()) >= 1 and detail["generation"] >= 1, detail
    return detail


@pytest.mark.fault
def test_effectively_once_through_sink_and_container_kills(spark, tmp_path, hconf):
    name = "delta-eo-kill"
    corpus, out = tmp_path / "corpus.txt", tmp_path / "table"
    text = ds.write_corpus(corpus, 4500)
    detail = _kill_a_sink_then_a_container(spark, hconf, tmp_path, name, corpus, out, out,
                                           sinks=2, sleep_ms=2)
    assert max(detail["checkpoint"]["restored_from"]) > 0

    expected = ds.expected_rows(corpus.name, text)
    for reader in (ds.read_deltalake, ds.read_duckdb, ds.read_spark):
        got = reader(out)
        assert got == expected, (reader.__name__, sum(got.values()), sum(expected.values()),
                                 +(got - expected), +(expected - got))
    versions = ds.txn_versions(out)
    assert ds.check_txns(out) == len(versions)  # one transaction a version, none twice
    work = tmp_path / "work" / name
    logs = "".join(p.read_text(errors="replace") for p in work.rglob("instance-out-*.log"))
    logged = len(re.findall(r"committed checkpoint\(s\)", logs))
    assert logged <= len(versions) <= logged + 2, (logged, len(versions))  # (+ kill windows)
    print(f"{len(versions)} Delta versions, {logged} logged; checkpoint: {detail['checkpoint']}")


@pytest.mark.fault
def test_effectively_once_after_the_driver_is_killed(tmp_path, hconf):
    """The driver (the TMaster) killed with ``kill -9`` once the table has versions; a second
    driver resumes the topology from the state manager and finishes the file: the three
    readers see every row once, and no checkpoint's transaction is in two versions."""
    name = "delta-eo-driver"
    corpus, out, work = tmp_path / "corpus.txt", tmp_path / "table", tmp_path / "work"
    text = ds.write_corpus(corpus, 3000)
    args = [name, str(corpus), str(out), hconf["heron.statemgr"], str(work)]
    before, log = faults.resume_after_driver_kill("delta-eo", args, tmp_path, work, lambda: (
        wait_until(lambda: _committed(hconf, name) >= 2 and _versions(out) >= 2, 120,
                   message="two committed checkpoints and two Delta versions"),
        _versions(out))[1])
    assert "status FINISHED generation 1" in log
    expected = ds.expected_rows(corpus.name, text)
    for reader in (ds.read_deltalake, ds.read_duckdb, ds.read_spark):
        got = reader(out)
        assert got == expected, (reader.__name__, sum(got.values()), sum(expected.values()),
                                 +(got - expected), +(expected - got))
    assert ds.check_txns(out) == len(ds.txn_versions(out))
    print(f"{before} Delta versions when the driver was killed, {_versions(out)} at the end")


@pytest.mark.fault
def test_effectively_once_into_an_s3_object_store_through_sink_and_container_kills(
        spark, tmp_path, hconf):
    """The table at ``s3://words/table`` on an S3 API server (S3Proxy, ``s3_support``), written
    by one sink task through the S3 API with signed requests; ``kill -9`` of the sink's
    instance, then of container 1. ``deltalake`` reads it back through S3 and DuckDB from the
    server's own folder: every row once."""
    from s3_support import S3Server

    server = S3Server(tmp_path / "s3").start()
    try:
        name = "delta-eo-s3"
        corpus = tmp_path / "corpus.txt"
        text = ds.write_corpus(corpus, 5000)
        table = f"s3://{server.create_bucket('words')}/table"
        stored = server.data / "words" / "table"  # the same objects, as the server keeps them
        _kill_a_sink_then_a_container(spark, hconf, tmp_path, name, corpus, table, stored,
                                      sinks=1, sleep_ms=3, sink_config={
                                          "delta.storage.options": server.storage_options})

        readers = {"deltalake over S3": ds.read_deltalake(
            table, storage_options=server.storage_options), "DuckDB": ds.read_duckdb(stored)}
    finally:
        server.stop()
    expected = ds.expected_rows(corpus.name, text)
    for reader, got in readers.items():
        assert got == expected, (reader, sum(got.values()), sum(expected.values()))
    assert ds.check_txns(stored) == len(ds.txn_versions(stored))


def test_the_kafka_to_delta_example_writes_each_word_once(spark, kafka, tmp_path, capsys):
    """``examples/kafka_to_delta.py --bounded`` on Spark: the table holds one row per word of
    every record on the topic (read back with Kafka's consumer), read with delta-rs and DuckDB."""

    from examples import kafka_to_delta as example

    topic, path = kafka.create_topic(4), tmp_path / "words"
    kafka.produce(topic, [example.SENTENCES[i % 4].encode() for i in range(400)], 4)
    records = kafka.read_to_end(topic, 4)
    assert example.main(["--servers", kafka.servers, "--topic", topic, "--path", str(path),
                         "--group", "to-delta", "--bounded", "--master", "local[4]"]) == 0
    assert "status: FINISHED" in capsys.readouterr().out
    want = collections.Counter(
        (word, m.partition(), m.offset(), i)
        for m in records for i, word in enumerate(m.value().decode().split()))
    from deltalake import DeltaTable

    table = DeltaTable(str(path))
    assert table.metadata().partition_columns == ["partition"]
    got = collections.Counter(tuple(r.values()) for r in table.to_pyarrow_table(
        columns=["word", "partition", "offset", "position"]).to_pylist())
    assert got == want
    assert ds.read_duckdb_rows(path, '"word", "partition", "offset", "position"') == want
    assert ds.check_txns(path) == len(ds.txn_versions(path))
