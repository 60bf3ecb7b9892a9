"""Kafka in -> split -> count -> Kafka out, for the Kafka tests, and the checks on its output.

- ``KafkaSpout`` reads the input topic (records ``line-<n>``: a line of words).
- ``SplitBolt`` emits ``(word, position)`` per word, anchored to the record; ``position`` is
  ``<partition>:<offset>:<word index>``, which identifies a word of an input record, so the
  output can be de-duplicated after replays. ``test.split.sleep.ms`` slows it down so a run
  lasts long enough to be hurt.
- ``CountBolt`` (fields grouping on the word) counts and emits ``(key=word,
  value=<count>|<position>)`` anchored to the word; ``KafkaSink`` produces it to the output
  topic and acks once Kafka has it.

Every input word is then on the output topic at least once; ``check`` de-duplicates by position
and compares with the words of the input records exactly.
"""

from __future__ import annotations

import random
import time

from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.io import KafkaSink, KafkaSpout

SLEEP_MS = "test.split.sleep.ms"
VOCABULARY = [f"w{i:02d}" for i in range(30)]


def lines(count: int, seed: int = 5, start: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(2, 8)))
            for _ in range(start + count)][start:]


class SplitBolt(Bolt):
    outputs = ["word", "position"]

    def initialize(self, config, context):
        self.sleep = float(config.get(SLEEP_MS, 0)) / 1000.0

    def process(self, tup):
        key, value, topic, partition, offset, timestamp = tup.values
        if self.sleep:
            time.sleep(self.sleep)
        for index, word in enumerate(value.decode().split()):
            self.emit([word, f"{partition}:{offset}:{index}"], anchors=[tup])
        self.ack(tup)


class CountBolt(Bolt):
    outputs = ["key", "value"]

    def initialize(self, config, context):
        self.counts: dict[str, int] = {}

    def process(self, tup):
        word, position = tup.values
        self.counts[word] = self.counts.get(word, 0) + 1
        self.emit([word, f"{self.counts[word]}|{position}"], anchors=[tup])
        self.ack(tup)


def build(name: str, servers: str, source: str, sink: str, *, group: str = "wc",
          spouts: int = 2, config: dict | None = None, spout_config: dict | None = None):
    builder = TopologyBuilder(name)
    lines_in = builder.add_spout("kafka", KafkaSpout, par=spouts, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": source, "kafka.group.id": group,
        **(spout_config or {})})
    words = builder.add_bolt("split", SplitBolt, par=2, inputs={lines_in: Grouping.SHUFFLE})
    counts = builder.add_bolt("count", CountBolt, par=2,
                              inputs={words: Grouping.fields("word")})
    builder.add_bolt("out", KafkaSink, par=1, inputs={counts: Grouping.SHUFFLE},
                     config={"kafka.bootstrap.servers": servers, "kafka.topic": sink})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE", **(config or {})})
    return builder.build()


def expected(input_messages) -> set[tuple[str, str]]:
    """Return ``{(position, word)}`` of every word of the input records (messages read back)."""
    return {(f"{m.partition()}:{m.offset()}:{i}", word)
            for m in input_messages for i, word in enumerate(m.value().decode().split())}


def seen(output_messages) -> set[tuple[str, str]]:
    """Return ``{(position, word)}`` on the output topic (duplicates folded)."""
    return {(m.value().decode().split("|", 1)[1], m.key().decode()) for m in output_messages}
