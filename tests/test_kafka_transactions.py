"""KafkaSink under effectively-once: Kafka transactions against a real Apache Kafka broker.

What the broker shows: a ``read_committed`` consumer (librdkafka's default, and Spark's Kafka
source with ``kafka.isolation.level``) gets only records of committed transactions, and a
``read_uncommitted`` one gets the aborted ones too, so the tests check both: every expected
record exactly once under ``read_committed``, and more under ``read_uncommitted`` when a
failure aborted a transaction (so the exactness check can fail). Every ended transaction leaves
a control record that takes an offset and is never delivered, so the holes in the offsets read
back count the transactions the sink ended; the sink's marker group (an offset commit sent
inside each transaction, applied only when it commits) shows the last committed checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kafka_word_count as kwc
from kafka_word_count import CRASH_AT_SAVE, OUT, CountOut, Split, as_line
from stateful_word_count import CRASH_AT
from heron_spark import Grouping, TopologyBuilder, TopologyValueError
from heron_spark.inprocess import InProcessTopology
from heron_spark.io import KafkaSink, KafkaSpout
from heron_spark.io import kafka_config as kc
from heron_spark.io.kafka_sink import transactional_id

TIMEOUT = 120
SHORT_QUEUES = {"heron.stmgr.backpressure.high.water.tuples": 100,
                "heron.stmgr.backpressure.low.water.tuples": 50}


def test_transactions_option_is_checked_and_the_transactional_id_is_stable():
    base = {kc.BOOTSTRAP_SERVERS: "h:1", kc.TOPIC: "t"}
    assert kc.sink_settings(base)[kc.TRANSACTIONS] == "auto"
    assert kc.sink_settings({**base, kc.TRANSACTIONS: True})[kc.TRANSACTIONS] == "true"
    assert kc.sink_settings({**base, kc.TRANSACTIONS: "False"})[kc.TRANSACTIONS] == "false"
    with pytest.raises(TopologyValueError) as info:
        kc.sink_settings({**base, kc.TRANSACTIONS: "maybe"}, component="out")
    assert info.value.component == "out" and "'maybe'" in str(info.value)
    assert transactional_id("wc", "out", 1) == transactional_id("wc", "out", 1) \
        == "heron-wc-out-1"


def holes(kafka, topic: str, messages) -> int:
    """Offsets of ``topic`` (one partition) not delivered as records: transaction markers.

    Markers of commits and of aborts look the same here; which transaction committed shows in
    the sink's marker group (``KafkaSink._last_committed``). ``messages`` must be read with
    ``read_uncommitted`` when transactions were aborted (their records are not holes).
    """
    offsets = {m.offset() for m in messages}
    return kafka.ends(topic, 1)[0] - len(offsets)


def _copy(kafka, source: str, sink: str, name: str, transactions, tmp_path: Path,
          properties: dict | None = None) -> str:
    builder = TopologyBuilder(name)
    spout = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topics": source,
        "kafka.group.id": name, "kafka.bounded": True, "kafka.max.records.per.call": 10})
    builder.add_bolt("out", KafkaSink, par=1, inputs={spout: Grouping.SHUFFLE}, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topic": sink,
        "kafka.transactions": transactions, "kafka.properties": properties or {}})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 0.1})
    run = InProcessTopology(builder.build(), conf={"heron.work.dir": str(tmp_path / name)})
    return run.run(timeout=TIMEOUT)


def test_effectively_once_produces_in_transactions_and_false_does_not(kafka, tmp_path, caplog):
    source = kafka.create_topic(1)
    kafka.produce(source, [b"r%d" % i for i in range(200)])
    want = sorted(b"r%d" % i for i in range(200))

    txn_out = kafka.create_topic(1)
    assert _copy(kafka, source, txn_out, "txn", "auto", tmp_path) == "FINISHED"
    got = kafka.read_to_end(txn_out, 1)
    assert sorted(m.value() for m in got) == want  # no failure: nothing aborted, no repeat
    assert holes(kafka, txn_out, got) >= 1  # the broker wrote transaction markers
    # each commit marks its checkpoint in the group named like the transactional.id (Kafka
    # applies that offset commit only when the transaction commits)
    assert kafka.committed(transactional_id("txn", "out", 0), txn_out, 1)[0] >= 0  # -1001: none
    assert "no Kafka transactions" not in caplog.text

    plain_out = kafka.create_topic(1)
    assert _copy(kafka, source, plain_out, "plain", False, tmp_path) == "FINISHED"
    got = kafka.read_to_end(plain_out, 1)
    assert sorted(m.value() for m in got) == want
    assert holes(kafka, plain_out, got) == 0  # no transactions: no markers
    warned = [r for r in caplog.records if "no Kafka transactions" in r.getMessage()]
    assert len(warned) == 1 and "out" in warned[0].getMessage()
    assert "produced again after a rollback" in warned[0].getMessage()


# A refusal from the client: librdkafka refuses a transactional producer without idempotence,
# as a broker refuses one it cannot serve (init_transactions fails either way, before anything
# is produced). test_kafka_errors.py has the broker's own refusals.
NO_IDEMPOTENCE = {"enable.idempotence": False}


def test_auto_falls_back_to_at_least_once_when_transactions_are_refused(kafka, tmp_path, caplog):
    source, sink = kafka.create_topic(1), kafka.create_topic(1)
    kafka.produce(source, [b"r%d" % i for i in range(50)])
    assert _copy(kafka, source, sink, "refused-auto", "auto", tmp_path,
                 NO_IDEMPOTENCE) == "FINISHED"
    got = kafka.read_to_end(sink, 1)
    assert sorted(m.value() for m in got) == sorted(b"r%d" % i for i in range(50))
    assert holes(kafka, sink, got) == 0  # produced without transactions
    warned = [r.getMessage() for r in caplog.records if "no Kafka transactions" in r.getMessage()]
    assert len(warned) == 1 and "KafkaSink out" in warned[0]
    assert "enable.idempotence" in warned[0] and "produced again after a rollback" in warned[0]


def test_true_fails_the_run_when_transactions_are_refused(kafka, tmp_path):
    from heron_spark import TopologyRuntimeError

    source, sink = kafka.create_topic(1), kafka.create_topic(1)
    kafka.produce(source, [b"r%d" % i for i in range(5)])
    with pytest.raises(TopologyRuntimeError) as info:
        _copy(kafka, source, sink, "refused-true", True, tmp_path, NO_IDEMPOTENCE)
    assert info.value.component == "out"
    assert "could not start transactions" in str(info.value)
    assert "kafka.transactions" in str(info.value)
    assert kafka.ends(sink, 1) == {0: 0}  # nothing was produced


@pytest.mark.parametrize("where", ["process", "first save"])
def test_effectively_once_count_to_kafka_with_a_crash_commits_every_count(kafka, tmp_path, where):
    """A crash mid-stream, or in the first checkpoint's save (so the rollback goes to no
    checkpoint at all, after the spouts saved theirs: their offsets must not reach the group
    before the checkpoint commits, or the replay would start past records whose output was
    aborted)."""
    source, sink = kafka.create_topic(2), kafka.create_topic(1)
    text = kwc.lines(1000)
    kafka.produce(source, [line.encode() for line in text], 2)
    out = tmp_path / "out"
    out.mkdir()
    builder = TopologyBuilder("kafka-txn-crash")
    lines_in = builder.add_spout("kafka", KafkaSpout, par=2, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topics": source,
        "kafka.group.id": "txn-crash", "kafka.bounded": True, "kafka.max.records.per.call": 8,
        "kafka.decoder": as_line, "kafka.output.fields": ["line"]})
    words = builder.add_bolt("split", Split, par=2, inputs={lines_in: Grouping.SHUFFLE})
    counts = builder.add_bolt("count", CountOut, par=2, inputs={words: Grouping.fields("word")})
    builder.add_bolt("out", KafkaSink, par=1, inputs={counts: Grouping.SHUFFLE}, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topic": sink,
        "kafka.transactions": True})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 0.1,
                        "topology.stmgrs": 2, OUT: str(out),
                        **({CRASH_AT: 1500} if where == "process" else {CRASH_AT_SAVE: True})})
    run = InProcessTopology(builder.build(), conf={"heron.work.dir": str(tmp_path / "work"),
                                                   **SHORT_QUEUES})
    assert run.run(timeout=TIMEOUT) == "FINISHED"
    assert (out / "crashed").exists()
    assert run.checkpoints.status()["restores"] >= 1
    # the count task's crash only: the sink's pre_restore aborts without failing (the abort
    # purges its queued records, whose delivery reports are not errors then)
    assert sum(run.failures.values()) == 1, run.failures
    if where == "first save":
        assert run.checkpoints.status()["restored_from"][0] == 0
    expected = kwc.running_counts_expected(text)
    # read_committed: every count of every word exactly once (a rolled-back count is produced
    # again with the same value, and the aborted copy stays invisible)
    got = kafka.read_to_end(sink, 1)
    assert kwc.record_pairs(got) == expected
    # read_uncommitted also gets the aborted transaction's records: the check above can fail
    everything = kafka.read_to_end(sink, 1, isolation="read_uncommitted")
    assert len(everything) > len(got)
    assert set(kwc.record_pairs(everything)) == set(expected)
    # transactions ended (markers): in process, at the restore and at the end of input
    assert holes(kafka, sink, everything) >= 2
    restored = run.checkpoints.status()["restored_from"][-1]
    assert kafka.committed(transactional_id("kafka-txn-crash", "out", 0), sink, 1)[0] >= restored
