"""KafkaSpout and KafkaSink against a real Apache Kafka broker (a separate JVM), in-process
engine.

Kafka in -> word count -> Kafka out, bounded (``kafka.bounded``): every input word is on the
output topic, offsets are committed to the group at the end, a second run on the same group
reads only what was added; failed tuples are replayed; bad input fails the run naming the
component, the value and the fix.
"""

from __future__ import annotations

import pytest

import kafka_support
import kafka_word_count as kwc
from heron_spark import Bolt, Grouping, TopologyBuilder, TopologyRuntimeError, TumblingWindowBolt
from heron_spark.inprocess import InProcessTopology
from heron_spark.io import KafkaSink, KafkaSpout
from heron_spark.testing import CollectingBolt, run_local

TIMEOUT = 120
PARTITIONS = 3


def _run(topology, tmp_path):
    return run_local(topology, timeout=TIMEOUT, collect_dir=tmp_path / "collect",
                     conf={"heron.instance.restart.max": 1})


def test_word_count_from_kafka_to_kafka_exact_and_resumes_from_committed_offsets(kafka, tmp_path):
    source, sink = kafka.create_topic(PARTITIONS), kafka.create_topic(2)
    kafka.produce(source, [line.encode() for line in kwc.lines(300)], PARTITIONS)
    bounded = {"kafka.bounded": True}
    run = _run(kwc.build("kwc", kafka.servers, source, sink, spout_config=bounded), tmp_path)
    assert run.status == "FINISHED"
    inputs = kafka.read(source, PARTITIONS, lambda got: len(got) >= 300)
    want = kwc.expected(inputs)
    out = kafka.read(sink, 2, lambda got: kwc.seen(got) >= want)
    assert kwc.seen(out) == want and len(out) == len(want)  # no failures: no duplicates
    assert kafka.committed("wc", source, PARTITIONS) == kafka.ends(source, PARTITIONS)
    lag = run.handle.metrics()["kafka"]
    assert {name for name in lag if name.startswith("__kafka-lag/")} <= {
        f"__kafka-lag/{source}/{p}" for p in range(PARTITIONS)}

    kafka.produce(source, [line.encode() for line in kwc.lines(50, start=300)], PARTITIONS)
    again = _run(kwc.build("kwc", kafka.servers, source, sink, spout_config=bounded),
                 tmp_path / "again")
    assert again.status == "FINISHED"
    inputs = kafka.read(source, PARTITIONS, lambda got: len(got) >= 350)
    new = kwc.expected(inputs) - want
    out = kafka.read(sink, 2, lambda got: kwc.seen(got) >= want | new)
    assert len(out) == len(want) + len(new)  # the second run read only the 50 new records
    assert kafka.committed("wc", source, PARTITIONS) == kafka.ends(source, PARTITIONS)


class FailFirstSight(Bolt):
    """Fails the first sight of every 5th record; acks the rest (and every replay)."""

    outputs = ["offset"]

    def initialize(self, config, context):
        self.failed: set = set()

    def process(self, tup):
        offset = tup.values[4]
        if offset % 5 == 0 and offset not in self.failed:
            self.failed.add(offset)
            self.fail(tup)
            return
        self.emit([offset], anchors=[tup])
        self.ack(tup)


def test_failed_records_are_replayed_and_their_offsets_wait(kafka, tmp_path):
    source = kafka.create_topic(1)
    kafka.produce(source, [b"r%d" % i for i in range(40)])
    builder = TopologyBuilder("kafka-replay")
    spout = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topics": source,
        "kafka.group.id": "replay", "kafka.bounded": True})
    flaky = builder.add_bolt("flaky", FailFirstSight, par=1, inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("collect", CollectingBolt, par=1, inputs={flaky: Grouping.SHUFFLE},
                     config={"topology.bolt.auto.ack": True})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    run = _run(builder.build(), tmp_path)
    assert run.status == "FINISHED"
    assert sorted(c.values[0] for c in run.collected()) == list(range(40))
    assert run.handle.metrics()["kafka"]["__fail-count/default"] == 8
    assert kafka.committed("replay", source, 1) == {0: 40}


def test_sink_writes_the_first_field_when_there_is_no_value_field(kafka, tmp_path):
    source, sink = kafka.create_topic(1), kafka.create_topic(1)
    kafka.produce(source, [(b"k%d" % i, "wört %d".encode() % i) for i in range(10)])
    builder = TopologyBuilder("kafka-first-field")
    spout = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topics": [source],
        "kafka.group.id": "ff", "kafka.bounded": True,
        "kafka.decoder": lambda key, value, *rest: (value.decode(), key),
        "kafka.output.fields": ["text", "id"]})
    builder.add_bolt("out", KafkaSink, par=1, inputs={spout: Grouping.SHUFFLE},
                     config={"kafka.bootstrap.servers": kafka.servers, "kafka.topic": sink})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    assert _run(builder.build(), tmp_path).status == "FINISHED"
    out = kafka.read(sink, 1, lambda got: len(got) >= 10)
    assert sorted(m.value().decode() for m in out) == sorted(f"wört {i}" for i in range(10))
    assert all(m.key() is None for m in out)


def test_spout_hands_over_what_it_fetched_without_waiting_out_its_poll_timeout(kafka, tmp_path):
    # consume(n, timeout) waits until it has n records or the timeout is over: a spout calling
    # it with a 2-minute poll timeout would hold these 10 records past the run's 60 s limit
    source, sink = kafka.create_topic(1), kafka.create_topic(1)
    kafka.produce(source, [b"r%d" % i for i in range(10)])
    builder = TopologyBuilder("kafka-no-wait")
    spout = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topics": source,
        "kafka.group.id": "nw", "kafka.bounded": True, "kafka.poll.timeout.ms": 120_000})
    builder.add_bolt("out", KafkaSink, par=1, inputs={spout: Grouping.SHUFFLE},
                     config={"kafka.bootstrap.servers": kafka.servers, "kafka.topic": sink})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    run = run_local(builder.build(), timeout=60, collect_dir=tmp_path / "collect")
    assert run.status == "FINISHED"
    out = kafka.read(sink, 1, lambda got: len(got) >= 10)
    assert sorted(m.value() for m in out) == sorted(b"r%d" % i for i in range(10))


def test_a_finished_runs_sink_leaves_no_producer_behind(kafka, tmp_path):
    # a bolt has no close() in its life cycle: the sink's producer must go with the sink, not
    # stay connected (and log "Connection refused" once the broker stops) for the process's life
    import gc

    import confluent_kafka


    source, sink = kafka.create_topic(1), kafka.create_topic(1)
    kafka.produce(source, [b"x%d" % i for i in range(5)])
    builder = TopologyBuilder("kafka-no-leak")
    spout = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topics": source,
        "kafka.group.id": "nl", "kafka.bounded": True})
    builder.add_bolt("out", KafkaSink, par=1, inputs={spout: Grouping.SHUFFLE},
                     config={"kafka.bootstrap.servers": kafka.servers, "kafka.topic": sink})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    assert _run(builder.build(), tmp_path).status == "FINISHED"
    gc.collect()  # a finished run's tasks are cyclic garbage
    assert not [o for o in gc.get_objects() if isinstance(o, confluent_kafka.Producer)]


def _spout_only(servers: str, topics, name: str):
    builder = TopologyBuilder(name)
    spout = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": topics, "kafka.group.id": "bad",
        "kafka.check.timeout.secs": 2})
    builder.add_bolt("collect", CollectingBolt, par=1, inputs={spout: Grouping.SHUFFLE},
                     config={"topology.bolt.auto.ack": True})
    return builder.build()


def test_unknown_topic_fails_the_run_naming_component_topic_and_fix(kafka, tmp_path):
    with pytest.raises(TopologyRuntimeError) as info:
        _run(_spout_only(kafka.servers, "no-such-topic", "kafka-bad-topic"), tmp_path)
    assert info.value.component == "kafka"
    assert "'no-such-topic'" in str(info.value) and "create the topic" in str(info.value)


def test_unreachable_broker_fails_the_run_naming_the_servers(tmp_path):
    servers = f"127.0.0.1:{kafka_support.free_port()}"
    with pytest.raises(TopologyRuntimeError) as info:
        _run(_spout_only(servers, "lines", "kafka-no-broker"), tmp_path)
    assert info.value.component == "kafka"
    assert servers in str(info.value) and "kafka.bootstrap.servers" in str(info.value)


def test_sink_to_an_unknown_topic_fails_the_run(kafka, tmp_path):
    source = kafka.create_topic(1)
    builder = TopologyBuilder("kafka-bad-sink")
    spout = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topics": source,
        "kafka.group.id": "bs", "kafka.bounded": True})
    builder.add_bolt("out", KafkaSink, par=1, inputs={spout: Grouping.SHUFFLE}, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topic": "missing-out",
        "kafka.check.timeout.secs": 2})
    with pytest.raises(TopologyRuntimeError) as info:
        _run(builder.build(), tmp_path)
    assert info.value.component == "out" and "'missing-out'" in str(info.value)


def test_the_kafka_word_count_example_counts_exactly(kafka, tmp_path):
    import collections

    from examples import kafka_word_count as example

    lines, counts = kafka.create_topic(4), kafka.create_topic(1)
    text = [example.SENTENCES[i % len(example.SENTENCES)] for i in range(200)]
    kafka.produce(lines, [line.encode() for line in text], 4)
    topology = example.build(kafka.servers, lines, counts, group="example", bounded=True,
                             containers=1, parquet=str(tmp_path / "parquet"))
    assert _run(topology, tmp_path).status == "FINISHED"
    want = collections.Counter(word for line in text for word in line.split())

    def latest(pairs):
        found: dict[str, int] = {}
        for word, count in pairs:
            found[word] = max(found.get(word, 0), int(count))
        return found

    out = kafka.read(counts, 1, lambda got: latest(
        (m.key().decode(), m.value()) for m in got) == dict(want))
    assert latest((m.key().decode(), m.value()) for m in out) == dict(want)
    import pyarrow.parquet as pq

    from heron_spark.io.parquet_store import CommitLog

    rows = [row for entry in CommitLog.open(str(tmp_path / "parquet")).files()
            for row in pq.read_table(entry.path.removeprefix("file://")).to_pylist()]
    assert latest((row["key"], row["value"]) for row in rows) == dict(want)


def _as_line(key, value, *rest):
    return (value.decode(),)


def test_effectively_once_offsets_live_in_checkpoints_and_roll_back(kafka, tmp_path):
    import stateful_word_count as swc

    source = kafka.create_topic(PARTITIONS)
    text = kwc.lines(1500)
    kafka.produce(source, [line.encode() for line in text], PARTITIONS)
    out = tmp_path / "out"
    builder = TopologyBuilder("kafka-eo")
    lines_in = builder.add_spout("kafka", KafkaSpout, par=2, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topics": source,
        "kafka.group.id": "eo", "kafka.bounded": True, "kafka.max.records.per.call": 8,
        "kafka.decoder": _as_line, "kafka.output.fields": ["line"]})
    words = builder.add_bolt("split", swc.SplitBolt, par=2, inputs={lines_in: Grouping.SHUFFLE})
    builder.add_bolt("count", swc.StatefulCountBolt, par=2,
                     inputs={words: Grouping.fields("word")})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 0.05,
                        "topology.stmgrs": 2, swc.OUT: str(out), swc.CRASH_AT: 2000,
                        swc.SLEEP_MS: 0.3})
    run = InProcessTopology(builder.build(), conf={"heron.work.dir": str(tmp_path / "work"),
                                                   **swc.SHORT_QUEUES})
    assert run.run(timeout=TIMEOUT) == "FINISHED"
    assert (out / "crashed").exists()
    assert swc.read_counts(out) == swc.expected_counts(text)  # exact: no loss, no double count
    status = run.checkpoints.status()
    assert status["restores"] == 2 and status["restored_from"][1] > 0, status
    # the checkpoints' offsets were committed to the group too (informational, for lag tools)
    committed = kafka.committed("eo", source, PARTITIONS)
    assert all(offset > 0 for offset in committed.values()), committed


def test_pattern_reads_every_matching_topic_and_nothing_else(kafka, tmp_path):
    prefix = f"pat{kafka_support.free_port()}"
    first, second = (kafka.create_topic(2, f"{prefix}-a"), kafka.create_topic(1, f"{prefix}-b"))
    other = kafka.create_topic(1, f"x{prefix}-c")
    kafka.produce(first, [b"a%d" % i for i in range(6)], 2)
    kafka.produce(second, [b"b%d" % i for i in range(3)])
    kafka.produce(other, [b"c0"])
    builder = TopologyBuilder("kafka-pattern")
    spout = builder.add_spout("kafka", KafkaSpout, par=2, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.pattern": f"{prefix}-.*",
        "kafka.group.id": "pattern", "kafka.bounded": True})
    builder.add_bolt("collect", CollectingBolt, par=1, inputs={spout: Grouping.SHUFFLE},
                     config={"topology.bolt.auto.ack": True})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    run = _run(builder.build(), tmp_path)
    assert run.status == "FINISHED"
    assert sorted(c.values[1] for c in run.collected()) == sorted(
        [b"a%d" % i for i in range(6)] + [b"b%d" % i for i in range(3)])


class WatermarkFile(Bolt):
    """Appends every watermark it sees, and each tuple's (partition, timestamp), to a file."""

    outputs = []

    def initialize(self, config, context):
        import pathlib

        self.path = pathlib.Path(config["testing.collect.dir"]) / "watermarks.txt"
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def process(self, tup):
        with open(self.path, "a") as out:
            out.write(f"t {tup.values[3]} {tup.timestamp}\n")

    def process_watermark(self, watermark_ms):
        with open(self.path, "a") as out:
            out.write(f"w {watermark_ms}\n")


class KafkaWindows(TumblingWindowBolt):
    """Event-time windows of 200 ms over the records; appends "start end count" to a file."""

    outputs = []

    def initialize(self, config, context):
        super().initialize(config, context)
        import pathlib

        self.path = pathlib.Path(config["testing.collect.dir"]) / "windows.txt"

    def processWindow(self, window_info, tuples):  # noqa: N802 - heronpy's name
        with open(self.path, "a") as out:
            out.write(f"{window_info.start} {window_info.end} {len(tuples)}\n")


def test_the_kafka_watermark_is_the_slowest_partition_and_an_empty_one_goes_idle(kafka,
                                                                                   tmp_path):
    # Partition 0 runs 5 s ahead of partition 1 in event time; partition 2 gets nothing. Lag 0:
    # every watermark must be a timestamp of partition 1 (the slowest live one), and there are
    # watermarks at all only because the empty partition stopped holding them back.
    import threading

    from confluent_kafka import Producer

    source = kafka.create_topic(3)
    stop = threading.Event()
    base = 1_700_000_000_000

    produced: list[int] = []  # every record's timestamp

    def produce():
        producer = Producer({"bootstrap.servers": kafka.servers, "linger.ms": 0})
        i = 0
        while not stop.is_set():
            producer.produce(source, value=b"a", partition=0, timestamp=base + 5_000 + 10 * i)
            producer.produce(source, value=b"b", partition=1, timestamp=base + 10 * i)
            producer.flush(10)
            produced.extend((base + 5_000 + 10 * i, base + 10 * i))
            i += 1
            stop.wait(0.01)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    builder = TopologyBuilder("kafka-event-time")
    spout = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": kafka.servers, "kafka.topics": source,
        "kafka.group.id": "et", "heron.watermark.idle.ms": 300})
    builder.add_bolt("log", WatermarkFile, par=1, inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("windows", KafkaWindows, par=1, inputs={spout: Grouping.SHUFFLE},
                     config={"heron.window.event.time": True,
                             "topology.bolts.window.length.duration.ms": 200})
    builder.set_config({"topology.bolts.watermark.event.interval.ms": 10})
    runner = InProcessTopology(builder.build(), conf={"testing.collect.dir": str(tmp_path)})
    try:
        with pytest.raises(TimeoutError):
            runner.run(timeout=2.0)
    finally:
        stop.set()
        writer.join(10)
    lines = (tmp_path / "watermarks.txt").read_text().split("\n")
    stamps = {int(p): set() for p in range(3)}
    for line in lines:
        if line.startswith("t "):
            _, partition, stamp = line.split()
            stamps[int(partition)].add(int(stamp))
    marks = [int(line.split()[1]) for line in lines if line.startswith("w ")]
    assert stamps[0] and stamps[1] and not stamps[2]
    assert all(s - base >= 5_000 for s in stamps[0])  # the records' own timestamps
    assert marks, "the empty partition held the watermark back"
    assert marks == sorted(marks) and set(marks) <= stamps[1]
    # every window fired while the topology ran holds exactly the records produced in it
    windows = [tuple(map(int, line.split()))
               for line in (tmp_path / "windows.txt").read_text().splitlines()]
    assert len(windows) >= 2
    for start, end, count in windows:
        assert end <= marks[-1]
        assert count == sum(1 for stamp in produced if start <= stamp < end), (start, end)
