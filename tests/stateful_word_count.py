"""Effectively-once word count for the stateful tests, and the checks on its output.

- ``FileSpout`` reads the corpus; under effectively once its offsets are part of each
  checkpoint, so after a failure it rewinds to the lines emitted before the last committed one.
- ``SplitBolt`` splits lines into words (stateless); ``test.split.sleep.ms`` slows it down so a
  run lasts long enough to be hurt.
- ``StatefulCountBolt`` keeps its counts in its ``State`` only. When its input ends it writes
  them to ``<out>/counts-<task>.json`` (atomically, replacing the previous file): a rollback
  after that re-runs the end, so the last file written holds the counts of the final epoch.
  ``test.count.crash.at`` makes the first process to count that many words raise once (the
  marker file ``<out>/crashed`` remembers it across restarts).
"""

from __future__ import annotations

import collections
import json
import os
import time
from pathlib import Path

from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.api.state import StatefulComponent
from heron_spark.io import FileSpout

OUT = "test.out.dir"
SLEEP_MS = "test.split.sleep.ms"
CRASH_AT = "test.count.crash.at"
# A marker waits behind every tuple queued before it: short queues make checkpoints quick.
SHORT_QUEUES = {"heron.stmgr.backpressure.high.water.tuples": 100,
                "heron.stmgr.backpressure.low.water.tuples": 50}



def crash_once(bolt) -> None:
    """Raise in ``bolt.process`` once per test when it has seen ``bolt.crash_at`` tuples.

    ``bolt.crash_at`` (0: never), ``bolt.seen`` and ``bolt.out`` are the bolt's; the marker
    file ``out/crashed`` keeps the restarted task (and a resubmitted stage) from crashing again.
    """
    if bolt.crash_at and bolt.seen == bolt.crash_at:
        marker = bolt.out / "crashed"
        if not marker.exists():
            marker.write_text(str(os.getpid()))
            raise RuntimeError("crashing once, as the test asked")

class SplitBolt(Bolt):
    outputs = ["word"]

    def initialize(self, config, context):
        self.sleep = float(config.get(SLEEP_MS, 0)) / 1000.0

    def process(self, tup):
        if self.sleep:
            time.sleep(self.sleep)
        for word in tup.values[0].split():
            self.emit([word])


class StatefulCountBolt(Bolt, StatefulComponent):
    def init_state(self, stateful_state):
        self.counts = stateful_state

    def initialize(self, config, context):
        self.out = Path(config[OUT])
        self.out.mkdir(parents=True, exist_ok=True)
        self.task = context.get_task_id()
        self.crash_at = int(config.get(CRASH_AT, 0))
        self.seen = 0

    def process(self, tup):
        word = tup.values[0]
        self.counts.put(word, (self.counts.get(word) or 0) + 1)
        self.seen += 1
        crash_once(self)

    def end_of_input(self):
        target = self.out / f"counts-{self.task}.json"
        temp = target.with_suffix(".tmp")
        temp.write_text(json.dumps(dict(self.counts.items())))
        os.replace(temp, target)


def write_corpus(path: Path, lines: int) -> list[str]:
    """A deterministic corpus of ``lines`` lines over 50 words."""
    text = [" ".join(f"w{(i * 7 + j * 13) % 50:02d}" for j in range(3 + i % 9))
            for i in range(lines)]
    path.write_text("".join(f"{line}\n" for line in text))
    return text


def build(name: str, corpus: Path, out: Path, *, interval: float = 0.5, spouts: int = 2,
          splits: int = 2, counts: int = 2, config: dict | None = None):
    builder = TopologyBuilder(name)
    lines = builder.add_spout("lines", FileSpout, par=spouts,
                              config=FileSpout.settings(str(corpus), lines_per_call=8))
    split = builder.add_bolt("split", SplitBolt, par=splits, inputs={lines: Grouping.SHUFFLE})
    builder.add_bolt("count", StatefulCountBolt, par=counts,
                     inputs={split: Grouping.fields("word")})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": interval,
                        "topology.stmgrs": 2, OUT: str(out), **(config or {})})
    return builder.build()


def expected_counts(lines: list[str]) -> collections.Counter:
    return collections.Counter(word for line in lines for word in line.split())


def read_counts(out: Path) -> collections.Counter:
    """The counts the count tasks wrote last (their words are disjoint: fields grouping)."""
    total: collections.Counter = collections.Counter()
    for path in sorted(out.glob("counts-*.json")):
        counts = json.loads(path.read_text())
        assert not set(counts) & set(total), f"{path.name} repeats words of another task"
        total.update(counts)
    return total
