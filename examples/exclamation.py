"""Exclamation: word spout -> exclaim bolt -> exclaim bolt (two bolts chained, shuffle).

Heron's classic first topology. Each word leaves with "!!!!!!" appended (three per bolt).
Run: python examples/exclamation.py [--words N]
"""

from __future__ import annotations

import argparse

from heron_spark import Bolt, Grouping, Spout, Topology

WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]
WORDS_PER_TASK = "exclamation.words.per.task"


class WordSpout(Spout):
    """Cycles through WORDS; bounded by ``exclamation.words.per.task`` (0 = unbounded)."""

    outputs = ["word"]

    def initialize(self, config, context):
        self.remaining = int(config.get(WORDS_PER_TASK, 0))
        self.bounded = self.remaining > 0
        self.position = 0

    def next_tuple(self):
        if self.bounded and self.remaining == 0:
            self.declare_exhausted()
            return
        self.remaining -= 1
        self.emit([WORDS[self.position % len(WORDS)]])
        self.position += 1


class ExclamationBolt(Bolt):
    """Appends three exclamation marks."""

    outputs = ["word"]

    def process(self, tup):
        self.emit([tup.values[0] + "!!!"])


def build(words_per_task: int = 1000, collect: bool = True) -> type:
    """Return the exclamation topology class (with a collecting sink when ``collect``)."""
    from heron_spark.testing import CollectingBolt

    attrs = {
        "config": {"topology.stmgrs": 2, WORDS_PER_TASK: words_per_task},
        "word": WordSpout.spec(par=2),
    }
    attrs["exclaim1"] = ExclamationBolt.spec(par=2, inputs={attrs["word"]: Grouping.SHUFFLE})
    attrs["exclaim2"] = ExclamationBolt.spec(par=2, inputs={attrs["exclaim1"]: Grouping.SHUFFLE})
    if collect:
        attrs["sink"] = CollectingBolt.spec(par=1, inputs={attrs["exclaim2"]: Grouping.SHUFFLE})
    return type("ExclamationTopology", (Topology,), attrs)


def main(argv=None) -> int:
    from heron_spark.testing import run_local

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=1000, help="words per spout task")
    args = parser.parse_args(argv)
    run = run_local(build(args.words))
    words = [c.values[0] for c in run.collected("sink")]
    print(f"status {run.status}: {len(words)} words, e.g. {sorted(set(words))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
