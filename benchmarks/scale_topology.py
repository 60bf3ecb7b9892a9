"""The scale benchmark's topology: one light at-least-once word count task pair per container.

``build(containers, words_per_task, rate_per_task, out_dir)``: ``word`` spout (``containers``
tasks) -> ``count`` bolt (``containers`` tasks, fields grouping on ``word``),
``topology.stmgrs`` = ``containers``, so round-robin packing puts one spout and one bolt task
in each container. Each spout task emits ``words_per_task`` words, each with a message id
``(task index, sequence)``, paced to ``rate_per_task`` words/s (0: unpaced), replays what
fails, and declares itself exhausted once every word it emitted was acked. Word ``seq`` of
every task is ``VOCABULARY[seq % len(VOCABULARY)]``, so the expected counts are known
(``expected_counts``). Each count task acks every tuple and, at the end of its input, writes
``<out>/count-<task>.json``: per word the number of distinct ``(source task, seq)`` it saw
(exact however often a word was replayed) and the tuples it received in all.

The benchmark and the test ship these classes by value (``cloudpickle``), so no process of the
topology imports this module.
"""

from __future__ import annotations

import collections
import json
import time
from pathlib import Path

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder

VOCABULARY = [f"w{i:02d}" for i in range(20)]
OUT_DIR = "scale.out.dir"
WORDS = "scale.words.per.task"
RATE = "scale.words.per.sec.per.task"


class WordSpout(Spout):
    """Emits its quota of words with message ids, paced; exhausted once all are acked."""

    outputs = ["word", "source", "seq"]

    def initialize(self, config, context):
        self.index = context.get_task_index()
        self.quota = int(config[WORDS])
        rate = float(config.get(RATE, 0) or 0)
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.next_seq = 0
        self.pending: set[int] = set()
        self.replay: collections.deque = collections.deque()
        self.started = time.monotonic()
        self.done = False

    def next_tuple(self):
        if self.replay:
            seq = self.replay.popleft()
        elif self.next_seq < self.quota:
            if self.interval and time.monotonic() < self.started + self.next_seq * self.interval:
                return  # ahead of the pace
            seq = self.next_seq
            self.next_seq += 1
        else:
            if not self.pending and not self.done:
                self.done = True
                self.declare_exhausted()
            return
        self.pending.add(seq)
        self.emit([VOCABULARY[seq % len(VOCABULARY)], self.index, seq], tup_id=seq)

    def ack(self, tup_id):
        self.pending.discard(tup_id)

    def fail(self, tup_id):
        if tup_id in self.pending:
            self.replay.append(tup_id)


class CountBolt(Bolt):
    """Counts distinct (source, seq) per word; writes them at the end of its input."""

    def initialize(self, config, context):
        self.out = Path(str(config[OUT_DIR]))
        self.task = context.get_task_id()
        self.seen: dict[str, set] = collections.defaultdict(set)
        self.received = 0

    def process(self, tup):
        word, source, seq = tup.values
        self.seen[word].add((source, seq))
        self.received += 1
        self.ack(tup)

    def end_of_input(self):
        counts = {word: len(ids) for word, ids in self.seen.items()}
        path = self.out / f"count-{self.task}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"counts": counts, "received": self.received}))
        tmp.rename(path)


def build(containers: int, words_per_task: int, rate_per_task: float, out_dir: Path,
          name: str = "scale_word_count") -> type:
    """Return the topology: ``containers`` containers of one spout and one bolt task each."""
    builder = TopologyBuilder(name)
    spout = builder.add_spout("word", WordSpout, par=containers)
    builder.add_bolt("count", CountBolt, par=containers, inputs={spout: Grouping.fields("word")})
    builder.set_config({"topology.stmgrs": containers,
                        "topology.reliability.mode": "ATLEAST_ONCE",
                        OUT_DIR: str(out_dir), WORDS: words_per_task, RATE: rate_per_task})
    return builder.build()


def expected_counts(containers: int, words_per_task: int) -> dict[str, int]:
    """Return the distinct (source, seq) count of every word the spouts emit."""
    counts: collections.Counter = collections.Counter()
    for seq in range(words_per_task):
        counts[VOCABULARY[seq % len(VOCABULARY)]] += containers
    return dict(counts)


def read_counts(out_dir: Path, containers: int) -> tuple[dict[str, int], int, int]:
    """Return (counts per word summed over the count tasks, tuples received, files found)."""
    counts: collections.Counter = collections.Counter()
    received = files = 0
    for path in sorted(out_dir.glob("count-*.json")):
        data = json.loads(path.read_text())
        counts.update(data["counts"])
        received += data["received"]
        files += 1
    return dict(counts), received, files
