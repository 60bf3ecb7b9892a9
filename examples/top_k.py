"""Distributed top-K (the S4 paper's example): split -> count -> partial top-K -> global merge.

Count tasks get words by fields grouping; there is one partial top-K per count partition,
and one global merge (global grouping).

Each count task reports (word, count) updates; each partial ranker keeps the top K of the
words routed to it; the merger keeps the global top K. Ties break by word, so the result is
deterministic: the K largest (-count, word) pairs.
Run: python examples/top_k.py [--sentences N] [--k K]
"""

from __future__ import annotations

import argparse
import heapq

from heron_spark import Bolt, Grouping, TopologyBuilder

try:
    from examples.word_count import SENTENCES_PER_TASK, CountBolt, SentenceSpout, SplitBolt
except ImportError:  # run as a script from the examples folder
    from word_count import SENTENCES_PER_TASK, CountBolt, SentenceSpout, SplitBolt

TOP_K = "top_k.k"


def rank(counts: dict, k: int) -> list[tuple[str, int]]:
    """Return the top ``k`` (word, count) pairs: highest count first, ties by word."""
    return [(word, -negated) for negated, word in
            heapq.nsmallest(k, ((-count, word) for word, count in counts.items()))]


class PartialTopKBolt(Bolt):
    """Keeps the latest count of its words; emits its top K on each tick and at the end."""

    outputs = ["ranking"]

    def initialize(self, config, context):
        self.k = int(config.get(TOP_K, 10))
        self.counts = {}

    def process(self, tup):
        word, count = tup.values
        if count > self.counts.get(word, 0):
            self.counts[word] = count

    def process_tick(self, tup):
        self.emit([rank(self.counts, self.k)])

    def end_of_input(self):
        self.emit([rank(self.counts, self.k)])


class MergeTopKBolt(Bolt):
    """Merges partial rankings into the global top K; emits it at the end."""

    outputs = ["rank", "word", "count"]

    def initialize(self, config, context):
        self.k = int(config.get(TOP_K, 10))
        self.latest = {}  # partial ranker task -> its latest ranking

    def process(self, tup):
        self.latest[tup.task] = tup.values[0]

    def end_of_input(self):
        merged = {}
        for ranking in self.latest.values():
            for word, count in ranking:
                merged[word] = max(count, merged.get(word, 0))
        for position, (word, count) in enumerate(rank(merged, self.k), start=1):
            self.emit([position, word, count])


def build(sentences_per_task: int = 20_000, k: int = 5, containers: int = 2) -> type:
    """Return the top-K topology (results land in a CollectingBolt named ``result``)."""
    from heron_spark.testing import CollectingBolt

    builder = TopologyBuilder("top_k")
    sentence = builder.add_spout("sentence", SentenceSpout, par=2)
    split = builder.add_bolt("split", SplitBolt, par=2, inputs={sentence: Grouping.SHUFFLE})
    count = builder.add_bolt("count", CountBolt, par=2, inputs={split: Grouping.fields("word")},
                             config={"topology.tick.tuple.freq.secs": 1})
    partial = builder.add_bolt("partial_top_k", PartialTopKBolt, par=2,
                               inputs={count: Grouping.fields("word")},
                               config={"topology.tick.tuple.freq.secs": 1})
    merge = builder.add_bolt("merge_top_k", MergeTopKBolt, par=1,
                             inputs={partial: Grouping.GLOBAL})
    builder.add_bolt("result", CollectingBolt, par=1, inputs={merge: Grouping.GLOBAL})
    builder.set_config({"topology.stmgrs": containers, SENTENCES_PER_TASK: sentences_per_task,
                        TOP_K: k})
    return builder.build()


def main(argv=None) -> int:
    from heron_spark.testing import run_local

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args(argv)
    run = run_local(build(args.sentences, args.k))
    for item in sorted(run.collected("result"), key=lambda c: c.values[0]):
        print(*item.values)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
