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

import collections
import random
import time
from pathlib import Path

from stateful_word_count import CRASH_AT, crash_once
from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.api.state import StatefulComponent
from heron_spark.io import KafkaSink, KafkaSpout

SLEEP_MS = "test.split.sleep.ms"
OUT = "test.out.dir"
CRASH_AT_SAVE = "test.count.crash.at.first.save"
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


# ---- effectively once: Kafka -> split -> running count (checkpointed) -> Kafka transactions ----
# The running count emits ``(key=word, value=<n>)`` for the word's n-th occurrence, so the
# exact output is known from the input alone: each (word, n) for n in 1..total, once.

def as_line(key, value, *rest):
    return (value.decode(),)


def pairs(messages) -> set[tuple[str, str]]:
    """Return the ``(word, count)`` records read back (repeats folded)."""
    return {(m.key().decode(), m.value().decode()) for m in messages}


class Split(Bolt):
    outputs = ["word"]

    def initialize(self, config, context):
        self.sleep = float(config.get(SLEEP_MS, 1.0)) / 1000.0

    def process(self, tup):
        time.sleep(self.sleep)  # a slower run: checkpoints complete before a crash or a kill
        for word in tup.values[0].split():
            self.emit([word])


class CountOut(Bolt, StatefulComponent):
    """Counts words in checkpointed state and emits ``(key=word, value=count)``; crashes once."""

    outputs = ["key", "value"]

    def init_state(self, stateful_state):
        self.counts = stateful_state

    def initialize(self, config, context):
        self.out = Path(config[OUT])
        self.out.mkdir(parents=True, exist_ok=True)
        self.crash_at = int(config.get(CRASH_AT, 0))
        self.crash_at_save = bool(config.get(CRASH_AT_SAVE, False))
        self.seen = 0

    def process(self, tup):
        word = tup.values[0]
        count = (self.counts.get(word) or 0) + 1
        self.counts.put(word, count)
        self.emit([word, str(count)])
        self.seen += 1
        crash_once(self)

    def pre_save(self, checkpoint_id):
        marker = self.out / "crashed"
        if self.crash_at_save and not marker.exists():  # the first checkpoint never commits
            marker.write_text(str(checkpoint_id))
            raise RuntimeError("crashing in the first save, as the test asked")


def running_counts_expected(text: list[str]) -> collections.Counter:
    """The records the running count must produce for ``text``: each (word, n) once."""
    want = collections.Counter(word for line in text for word in line.split())
    return collections.Counter({(word, str(n)): 1 for word, total in want.items()
                                for n in range(1, total + 1)})


def record_pairs(messages) -> collections.Counter:
    """The ``(word, count)`` records read back, with their repeats."""
    return collections.Counter((m.key().decode(), m.value().decode()) for m in messages)


def build_running_counts(name: str, servers: str, source: str, sink: str, *,
                         out: Path, config: dict | None = None, bounded: bool = False,
                         split_sleep_ms: float = 1.0):
    """Kafka -> split -> running count -> Kafka, effectively once with Kafka transactions."""
    builder = TopologyBuilder(name)
    lines_in = builder.add_spout("kafka", KafkaSpout, par=2, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": source, "kafka.group.id": name,
        "kafka.max.records.per.call": 8, "kafka.bounded": bounded,
        "kafka.decoder": as_line, "kafka.output.fields": ["line"]})
    words = builder.add_bolt("split", Split, par=2, inputs={lines_in: Grouping.SHUFFLE},
                             config={SLEEP_MS: split_sleep_ms})
    counts = builder.add_bolt("count", CountOut, par=2, inputs={words: Grouping.fields("word")})
    builder.add_bolt("out", KafkaSink, par=1, inputs={counts: Grouping.SHUFFLE}, config={
        "kafka.bootstrap.servers": servers, "kafka.topic": sink, "kafka.transactions": True})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 0.5,
                        "topology.stmgrs": 2, OUT: str(out), **(config or {})})
    return builder.build()
