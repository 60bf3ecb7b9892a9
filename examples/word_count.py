"""Word count: sentence spout -> split bolt (shuffle) -> count bolt (fields grouping on word).

Run it:  python examples/word_count.py            (Spark local[*], bounded, prints top words)
         spark-submit examples/word_count.py --sentences 50000
         heron-spark submit examples/word_count.py

With ``--sentences 0`` it runs until killed (Ctrl-C), printing counts every few seconds.
"""

from __future__ import annotations

import argparse
import collections
import time

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.testing import CollectingBolt

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "it was the best of times it was the worst of times",
    "call me ishmael some years ago never mind how long precisely",
    "all happy families are alike each unhappy family is unhappy in its own way",
    "in the beginning the universe was created",
    "stream processing keeps its promise under load and under faults",
    "a spout emits tuples and a bolt processes them",
    "the stream manager routes every tuple between instances",
    "four score and seven years ago our fathers brought forth on this continent",
    "to be or not to be that is the question",
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
]
SENTENCES_PER_TASK = "word_count.sentences.per.task"


def expected_counts(sentences_per_task: int, spout_tasks: int) -> collections.Counter:
    """Word counts the topology must produce, computed without the engine."""
    counts: collections.Counter = collections.Counter()
    for task_index in range(spout_tasks):
        for i in range(sentences_per_task):
            counts.update(CORPUS[(task_index + i) % len(CORPUS)].split())
    return counts


class SentenceSpout(Spout):
    """Emits sentences of the embedded corpus; bounded when the per-task count is > 0."""

    outputs = ["sentence"]

    def initialize(self, config, context):
        self.remaining = int(config.get(SENTENCES_PER_TASK, 0))
        self.bounded = self.remaining > 0
        self.position = context.get_task_index()

    def next_tuple(self):
        for _ in range(64):
            if self.bounded:
                if self.remaining == 0:
                    self.declare_exhausted()
                    return
                self.remaining -= 1
            self.emit([CORPUS[self.position % len(CORPUS)]])
            self.position += 1


class SplitBolt(Bolt):
    """Splits a sentence into words."""

    outputs = ["word"]

    def process(self, tup):
        emit = self.emit
        for word in tup.values[0].split():
            emit([word])


class CountBolt(Bolt):
    """Counts words; emits (word, count) for changed words on each tick and at the end."""

    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.counts = collections.Counter()
        self.changed = set()

    def process(self, tup):
        word = tup.values[0]
        self.counts[word] += 1
        self.changed.add(word)

    def process_tick(self, tup):
        self._emit_changed()

    def end_of_input(self):
        self._emit_changed()

    def _emit_changed(self):
        for word in self.changed:
            self.emit([word, self.counts[word]])
        self.changed = set()


def build(sentences_per_task: int = 50_000, spouts: int = 2, splitters: int = 2, counters: int = 2,
          containers: int = 2) -> type:
    """Return the word-count topology class."""
    builder = TopologyBuilder("word_count")
    sentence = builder.add_spout("sentence", SentenceSpout, par=spouts)
    split = builder.add_bolt("split", SplitBolt, par=splitters,
                             inputs={sentence: Grouping.SHUFFLE})
    count = builder.add_bolt("count", CountBolt, par=counters,
                             inputs={split: Grouping.fields("word")},
                             config={"topology.tick.tuple.freq.secs": 2})
    builder.add_bolt("report", CollectingBolt, par=1, inputs={count: Grouping.GLOBAL},
                     config={"topology.tick.tuple.freq.secs": 1})
    builder.set_config({"topology.stmgrs": containers, SENTENCES_PER_TASK: sentences_per_task})
    return builder.build()


def final_counts(collected) -> collections.Counter:
    """Latest (largest) count reported for each word."""
    counts: collections.Counter = collections.Counter()
    for item in collected:
        word, count = item.values
        counts[word] = max(counts[word], count)
    return counts


def main(argv=None) -> int:
    import tempfile

    from heron_spark import submit
    from heron_spark.testing import COLLECT_DIR, read_collected

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=50_000,
                        help="sentences per spout task; 0 runs until killed")
    parser.add_argument("--containers", type=int, default=2)
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    out_dir = tempfile.mkdtemp(prefix="word_count_")
    topology = build(args.sentences, containers=args.containers)
    handle = submit(topology, conf={COLLECT_DIR: out_dir}, master=args.master)
    print(f"submitted word_count ({args.containers} containers); tracker: {handle.tracker_url}")
    if args.sentences == 0:
        try:
            while True:
                time.sleep(5)
                print(f"words counted so far: "
                      f"{handle.metrics().get('count', {}).get('__execute-count', 0):.0f}")
        except KeyboardInterrupt:
            handle.kill()
            return 0
    status = handle.wait()
    counts = final_counts(read_collected(out_dir))
    words = sum(counts.values())
    seconds = (handle.ended_at or time.time()) - (handle.started_at or time.time())
    print(f"status: {status}; {words} words in {seconds:.2f} s = {words / max(seconds, 1e-9):,.0f} words/s")
    for word, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:args.top]:
        print(f"{count:>10}  {word}")
    expected = expected_counts(args.sentences, 2)
    print("matches the independent count:", counts == expected)
    return 0 if counts == expected else 1


WordCountTopology: type = build()  # for `heron-spark submit examples/word_count.py`

if __name__ == "__main__":
    raise SystemExit(main())
