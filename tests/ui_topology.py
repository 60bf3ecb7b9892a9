"""The topology the browser test watches: an at-least-once word count that emits a fixed number
of sentences, then idles without ending, so it stays RUNNING with counters that no longer move.

``Sentences`` (1 task) emits ``LINES`` sentences with message ids, then nothing; ``Split``
(2 tasks, shuffle) emits one anchored tuple per word; ``Count`` (2 tasks, fields on word)
counts and logs ``READY_LINE`` once at start, which the test finds through the UI's log view.
``Crasher`` (1 task, apart from the word count) raises ``CRASH_MESSAGE`` in its first
``next_tuple`` ever (a marker file in ``DIR_KEY`` remembers it), then idles once restarted: an
exception with a traceback for the UI to show.
"""

from __future__ import annotations

import collections
import time
from pathlib import Path

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder

LINES = 240
CORPUS = ["the quick brown fox jumps over the lazy dog",
          "a spout emits tuples and a bolt processes them",
          "the stream manager routes every tuple between instances",
          "to be or not to be"]
READY_LINE = "count bolt ready on task"
CRASH_MESSAGE = "crasher: failing on purpose, once"
DIR_KEY = "test.ui.dir"
IDLE_SECS = 0.05  # a spout with nothing left to emit naps in next_tuple instead of spinning


def sentence(i: int) -> str:
    return CORPUS[i % len(CORPUS)]


def total_words() -> int:
    """Words the split bolt emits (and the count bolt executes) for LINES sentences."""
    return sum(len(sentence(i).split()) for i in range(LINES))


class Sentences(Spout):
    """Emits LINES sentences, each with a message id, then idles (the topology keeps running)."""

    outputs = ["sentence"]

    def initialize(self, config, context):
        self.next = 0

    def next_tuple(self):
        if self.next < LINES:
            self.emit([sentence(self.next)], tup_id=self.next)
            self.next += 1
        else:
            time.sleep(IDLE_SECS)


class Split(Bolt):
    """Sentence -> one anchored tuple per word."""

    outputs = ["word"]

    def process(self, tup):
        for word in tup.values[0].split():
            self.emit([word], anchors=[tup])
        self.ack(tup)


class Count(Bolt):
    """Counts words; logs READY_LINE with its task id once."""

    outputs = []

    def initialize(self, config, context):
        self.counts = collections.Counter()
        self.log(f"{READY_LINE} {context.get_task_id()}")

    def process(self, tup):
        self.counts[tup.values[0]] += 1
        self.ack(tup)


class Crasher(Spout):
    """Raises CRASH_MESSAGE once per topology run (its first next_tuple), then idles."""

    outputs = ["unused"]

    def initialize(self, config, context):
        self.marker = Path(config[DIR_KEY]) / f"crashed-{context.get_task_id()}"

    def next_tuple(self):
        if not self.marker.exists():
            self.marker.touch()
            raise RuntimeError(CRASH_MESSAGE)
        time.sleep(IDLE_SECS)


def topology(name: str, folder: Path) -> TopologyBuilder:
    """The word count plus the crasher; ``folder`` keeps the crasher's marker."""
    builder = TopologyBuilder(name)
    sentences = builder.add_spout("sentences", Sentences, par=1)
    split = builder.add_bolt("split", Split, par=2, inputs={sentences: Grouping.SHUFFLE})
    builder.add_bolt("count", Count, par=2, inputs={split: Grouping.fields("word")})
    builder.add_spout("crasher", Crasher, par=1)
    builder.set_config({"topology.stmgrs": 2, "topology.reliability.mode": "ATLEAST_ONCE",
                        DIR_KEY: str(folder)})
    return builder
