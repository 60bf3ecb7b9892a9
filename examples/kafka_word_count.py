"""Kafka word count: Kafka topic ``lines`` -> split -> count -> Kafka topic ``counts`` and Parquet.

``KafkaSpout`` reads the lines (2 tasks share the topic's partitions) and emits
``(key, value, topic, partition, offset, timestamp)``; ``split`` turns a line's value into
words; ``count`` (fields grouping on the word) keeps running counts and emits
``(key=word, value=count)`` for the words that changed, every second. Two sinks take that
stream: ``KafkaSink`` produces it to ``counts`` and acks each once Kafka has it; ``ParquetSink``
writes it as Parquet files under ``--parquet`` (columns ``key``, ``value``), committed to
Spark's file-sink log so ``spark.read.parquet(path)`` sees only whole, committed files: a
word's current count is ``max(value)`` per ``key``. At-least-once: the spout commits a line's
offset to the consumer group only when both sinks have the counts that include it, so a killed
topology resubmitted with the same ``--group`` carries on where it stopped (lines after the
last commit may be counted twice, and a row may repeat in either output). The counts live in
the count tasks' memory: a count task that restarts begins again from 0 (the stateful,
effectively-once variant keeps them in checkpointed state instead).

Run it against a broker (pip install 'heron_spark[kafka]'):
    python examples/kafka_word_count.py --servers 127.0.0.1:9092 --produce 10000
    python examples/kafka_word_count.py --servers 127.0.0.1:9092 --bounded   # read, count, end
    heron-spark submit examples/kafka_word_count.py      (servers 127.0.0.1:9092, runs until killed)

``--produce N`` first creates the topics if missing and writes N sample lines. ``--bounded``
ends once the lines there at the start are counted and then prints the counts Spark reads from
the Parquet folder. Without a broker at ``--servers`` the spout's ``initialize`` fails,
naming the servers, and the topology with it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.io import KafkaSink, KafkaSpout, ParquetSink

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "it was the best of times it was the worst of times",
    "a spout emits tuples and a bolt processes them",
    "to be or not to be that is the question",
]


class SplitBolt(Bolt):
    """Split a Kafka record's value (UTF-8 text) into words, anchored to the record."""

    outputs = ["word"]

    def process(self, tup):
        key, value, topic, partition, offset, timestamp = tup.values
        for word in value.decode("utf-8").split():
            self.emit([word], anchors=[tup])
        self.ack(tup)


class CountBolt(Bolt):
    """Count words; every tick, emit ``(key=word, value=count)`` for the words that changed.

    A word's tuples are acked when its new count is emitted, anchored to them, so the spout
    commits a line only once the sink has delivered the counts that include it.
    """

    outputs = ["key", "value"]

    def initialize(self, config, context):
        self.counts: dict[str, int] = {}
        self.waiting: dict[str, list] = {}

    def process(self, tup):
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1
        self.waiting.setdefault(word, []).append(tup)

    def process_tick(self, tup):
        self._flush()

    def end_of_input(self):
        self._flush()

    def _flush(self):
        for word, tuples in self.waiting.items():
            self.emit([word, self.counts[word]], anchors=tuples)
            for done in tuples:
                self.ack(done)
        self.waiting = {}


PARQUET = os.path.join(tempfile.gettempdir(), "kafka_word_count", "counts")


def build(servers: str = "127.0.0.1:9092", lines: str = "lines", counts: str = "counts",
          group: str = "kafka_word_count", bounded: bool = False, containers: int = 2,
          parquet: str = PARQUET) -> type:
    """Return the Kafka word-count topology class (Parquet out under ``parquet``)."""
    builder = TopologyBuilder("kafka_word_count")
    source = builder.add_spout("kafka", KafkaSpout, par=2, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": lines, "kafka.group.id": group,
        "kafka.bounded": bounded})
    words = builder.add_bolt("split", SplitBolt, par=2, inputs={source: Grouping.SHUFFLE})
    totals = builder.add_bolt("count", CountBolt, par=2, inputs={words: Grouping.fields("word")},
                              config={"topology.tick.tuple.freq.secs": 1})
    builder.add_bolt("out", KafkaSink, par=1, inputs={totals: Grouping.SHUFFLE},
                     config={"kafka.bootstrap.servers": servers, "kafka.topic": counts})
    builder.add_bolt("parquet", ParquetSink, par=1, inputs={totals: Grouping.SHUFFLE},
                     config={"parquet.path": parquet})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE",
                        "topology.stmgrs": containers})
    return builder.build()


def produce_sample(servers: str, lines: str, counts: str, how_many: int) -> None:
    """Create the topics if missing (4 and 1 partitions) and write ``how_many`` sample lines."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    existing = admin.list_topics(timeout=10).topics
    wanted = [NewTopic(name, parts, 1) for name, parts in ((lines, 4), (counts, 1))
              if name not in existing]
    for future in (admin.create_topics(wanted).values() if wanted else []):
        future.result(30)
    producer = Producer({"bootstrap.servers": servers})
    for i in range(how_many):
        producer.produce(lines, SENTENCES[i % len(SENTENCES)].encode())
        producer.poll(0)
    producer.flush(60)


def main(argv=None) -> int:
    from heron_spark import submit

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="127.0.0.1:9092")
    parser.add_argument("--lines", default="lines", help="input topic")
    parser.add_argument("--counts", default="counts", help="output topic")
    parser.add_argument("--group", default="kafka_word_count")
    parser.add_argument("--parquet", default=PARQUET, help="Parquet output folder (or URL)")
    parser.add_argument("--produce", type=int, default=0, help="write N sample lines first")
    parser.add_argument("--bounded", action="store_true",
                        help="read to the end offsets seen at start, then end")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    args = parser.parse_args(argv)
    if args.produce:
        produce_sample(args.servers, args.lines, args.counts, args.produce)
    topology = build(args.servers, args.lines, args.counts, args.group, args.bounded,
                     parquet=args.parquet)
    handle = submit(topology, master=args.master)
    print(f"submitted kafka_word_count; tracker: {handle.tracker_url}; Parquet: {args.parquet}")
    if args.bounded:
        print("status:", handle.wait())
        from pyspark.sql import SparkSession, functions

        spark = SparkSession.builder.getOrCreate()  # the session submit started
        spark.read.parquet(args.parquet).groupBy("key").agg(
            functions.max("value").alias("count")).orderBy(functions.desc("count")).show(10)
        return 0
    try:
        while True:
            time.sleep(5)
            kafka = handle.metrics().get("kafka", {})
            lag = sum(v for k, v in kafka.items() if k.startswith("__kafka-lag/"))
            print(f"lines acked: {kafka.get('__ack-count', 0):.0f}; lag: {lag:.0f} records")
    except KeyboardInterrupt:
        handle.kill()
    return 0


KafkaWordCountTopology: type = build()  # for `heron-spark submit examples/kafka_word_count.py`

if __name__ == "__main__":
    raise SystemExit(main())
