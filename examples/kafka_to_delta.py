r"""Kafka to Delta Lake, effectively once: Kafka topic -> split into words -> a Delta table.

``KafkaSpout`` reads the topic (its offsets kept in the topology's checkpoints); ``split``
turns each record's value (UTF-8 text) into one row per word,
``(word, partition, offset, position)``: the word, where its record was in Kafka and its place
in the line; ``DeltaSink`` appends the rows to the Delta table at ``--path``, one Delta commit
per checkpoint, each carrying the sink task's application transaction, so a failure (a killed
process, a lost executor) leaves every row in the table exactly once. The table is created by
the first commit and partitioned by ``partition`` (the Kafka partition).

Run it against a broker (pip install 'heron_spark[kafka,delta]'):
    python examples/kafka_to_delta.py --servers 127.0.0.1:9092 --topic lines \
        --path /tmp/words --produce 10000 --bounded
    python examples/kafka_to_delta.py --servers 127.0.0.1:9092 --topic lines \
        --path s3://bucket/words     (runs until Ctrl-C)

For an object store, give ``deltalake`` its credentials through the environment (or
``delta.storage.options`` in the sink's config).

``--produce N`` first creates the topic if missing and writes N sample lines. ``--bounded``
ends once the records there at the start are in the table, then prints the table's most
frequent words read back with ``deltalake``. While it runs, query the live table with
``deltalake.DeltaTable(path).to_pyarrow_table()`` or Spark (``spark.read.format("delta")``,
with io.delta:delta-spark): each read sees the rows of whole checkpoints only.
"""

from __future__ import annotations

import argparse
import collections
import time

from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.io import DeltaSink, KafkaSpout

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "it was the best of times it was the worst of times",
    "a spout emits tuples and a bolt processes them",
    "to be or not to be that is the question",
]


class SplitBolt(Bolt):
    """Split a Kafka record's value into ``(word, partition, offset, position)`` rows."""

    outputs = ["word", "partition", "offset", "position"]

    def process(self, tup):
        key, value, topic, partition, offset, timestamp = tup.values
        for position, word in enumerate(value.decode("utf-8").split()):
            self.emit([word, partition, offset, position])


def build(servers: str = "127.0.0.1:9092", topic: str = "lines", path: str = "/tmp/words",
          group: str = "kafka_to_delta", bounded: bool = False, containers: int = 2,
          checkpoint_secs: float = 1.0) -> type:
    """Return the topology class: Kafka ``topic`` -> words -> the Delta table at ``path``."""
    builder = TopologyBuilder("kafka_to_delta")
    source = builder.add_spout("kafka", KafkaSpout, par=2, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": topic, "kafka.group.id": group,
        "kafka.bounded": bounded})
    words = builder.add_bolt("split", SplitBolt, par=2, inputs={source: Grouping.SHUFFLE})
    builder.add_bolt("table", DeltaSink, par=2, inputs={words: Grouping.SHUFFLE},
                     config={"delta.path": path, "delta.partition.by": ["partition"]})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": checkpoint_secs,
                        "topology.stmgrs": containers})
    return builder.build()


def produce_sample(servers: str, topic: str, how_many: int) -> None:
    """Create ``topic`` if missing (4 partitions) and write ``how_many`` sample lines."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": servers})
    if topic not in admin.list_topics(timeout=10).topics:
        for future in admin.create_topics([NewTopic(topic, 4, 1)]).values():
            future.result(30)
    producer = Producer({"bootstrap.servers": servers})
    for i in range(how_many):
        producer.produce(topic, SENTENCES[i % len(SENTENCES)].encode())
        producer.poll(0)
    producer.flush(60)


def top_words(path: str, n: int = 10) -> list[tuple[str, int]]:
    """Return the ``n`` most frequent words of the table at ``path``, read with deltalake."""
    from deltalake import DeltaTable

    words = DeltaTable(path).to_pyarrow_table(columns=["word"]).column("word").to_pylist()
    return collections.Counter(words).most_common(n)


def main(argv=None) -> int:
    """Parse the command line, submit the topology, report on it."""
    from heron_spark import submit

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="lines", help="input topic")
    parser.add_argument("--path", default="/tmp/words", help="the Delta table (path or URI)")
    parser.add_argument("--group", default="kafka_to_delta")
    parser.add_argument("--produce", type=int, default=0, help="write N sample lines first")
    parser.add_argument("--bounded", action="store_true",
                        help="read to the end offsets seen at start, then end")
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    args = parser.parse_args(argv)
    if args.produce:
        produce_sample(args.servers, args.topic, args.produce)
    topology = build(args.servers, args.topic, args.path, args.group, args.bounded)
    handle = submit(topology, master=args.master)
    print(f"submitted kafka_to_delta; tracker: {handle.tracker_url}; table: {args.path}")
    if args.bounded:
        status = handle.wait()
        print("status:", status)
        for word, count in top_words(args.path):
            print(f"{word:>12} {count}")
        return 0 if status == "FINISHED" else 1
    try:
        while True:
            time.sleep(5)
            kafka = handle.metrics().get("kafka", {})
            lag = sum(v for k, v in kafka.items() if k.startswith("__kafka-lag/"))
            print(f"lag: {lag:.0f} records")
    except KeyboardInterrupt:
        handle.kill()
    return 0


KafkaToDeltaTopology: type = build()  # for `heron-spark submit examples/kafka_to_delta.py`

if __name__ == "__main__":
    raise SystemExit(main())
