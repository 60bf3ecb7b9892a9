"""Components the class-path tests name by their dotted path (``"class_path_components.X"``).

Importable on Spark's executors as ``tests/`` is on their ``PYTHONPATH`` (see conftest). A
bounded word count: ``SentenceSpout`` emits ``SENTENCES`` from each task (task index i starts
at sentence i) and declares itself exhausted; ``SplitBolt`` splits; ``CountBolt`` emits each
word's final count at the end of its input, so a ``CollectingBolt`` sees exact totals.
"""

from __future__ import annotations

import collections

from heron_spark import Bolt, Spout

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "to be or not to be that is the question",
    "the cow jumped over the moon",
]
PER_TASK = 5


def expected_counts(spout_tasks: int) -> dict[str, int]:
    """Return the word counts ``spout_tasks`` sentence tasks produce."""
    counts: collections.Counter = collections.Counter()
    for index in range(spout_tasks):
        for sent in range(PER_TASK):
            counts.update(SENTENCES[(index + sent) % len(SENTENCES)].split())
    return dict(counts)


class SentenceSpout(Spout):
    """Emit ``PER_TASK`` sentences, then declare exhaustion."""

    outputs = ["sentence"]

    def initialize(self, config, context):
        self.index = context.get_task_index()
        self.sent = 0

    def next_tuple(self):
        if self.sent < PER_TASK:
            self.emit([SENTENCES[(self.index + self.sent) % len(SENTENCES)]])
            self.sent += 1
        else:
            self.declare_exhausted()


class SplitBolt(Bolt):
    """Sentence -> words."""

    outputs = ["word"]

    def process(self, tup):
        for word in tup.values[0].split():
            self.emit([word])


class CountBolt(Bolt):
    """Count words; emit (word, total) for each at the end of input."""

    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.counts: collections.Counter = collections.Counter()

    def process(self, tup):
        self.counts[tup.values[0]] += 1

    def end_of_input(self):
        for word, count in sorted(self.counts.items()):
            self.emit([word, count])


class NotAComponent:
    """A class that is neither a Spout nor a Bolt."""


def class_style(module: str, name: str, *, sink_config: dict | None = None) -> type:
    """Return a ``Topology`` whose components are ``HeronComponentSpec``s of class paths.

    Spouts and bolts come from ``module`` (this one, or one re-exporting it); the sink is
    ``heron_spark.testing.CollectingBolt``, also by path.
    """
    from heron_spark import Grouping, HeronComponentSpec, Topology

    class PathWordCount(Topology):
        topology_name = name
        config = {"topology.stmgrs": 2}
        sentence = HeronComponentSpec(None, f"{module}.SentenceSpout", True, 2,
                                      outputs=["sentence"])
        split = HeronComponentSpec(None, f"{module}.SplitBolt", False, 2,
                                   inputs={sentence: Grouping.SHUFFLE}, outputs=["word"])
        count = HeronComponentSpec(None, f"{module}.CountBolt", False, 2,
                                   inputs={split["default"]: Grouping.fields("word")},
                                   outputs=["word", "count"])
        sink = HeronComponentSpec(None, "heron_spark.testing.CollectingBolt", False, 1,
                                  inputs=[count], config=sink_config)

    return PathWordCount


def builder_style(module: str, name: str, *, importable_here: bool):
    """Return a ``TopologyBuilder`` given the same components' class paths.

    A path that does not import on the driver declares its outputs (``optional_outputs``).
    """
    from heron_spark import Grouping, TopologyBuilder

    def outputs(fields: list[str]) -> list[str] | None:
        return None if importable_here else fields

    builder = TopologyBuilder(name)
    sentence = builder.add_spout("sentence", f"{module}.SentenceSpout", 2,
                                 optional_outputs=outputs(["sentence"]))
    split = builder.add_bolt("split", f"{module}.SplitBolt", 2,
                             inputs={sentence: Grouping.SHUFFLE},
                             optional_outputs=outputs(["word"]))
    count = builder.add_bolt("count", f"{module}.CountBolt", 2,
                             inputs={split: Grouping.fields("word")},
                             optional_outputs=outputs(["word", "count"]))
    builder.add_bolt("sink", "heron_spark.testing.CollectingBolt", 1, inputs=[count])
    builder.set_config({"topology.stmgrs": 2})
    return builder


def final_counts(collected) -> dict[str, int]:
    """Return {word: count} from the sink's records, refusing a word seen twice."""
    counts: dict[str, int] = {}
    for record in collected:
        word, count = record.values
        assert word not in counts, f"{word} counted twice"
        counts[word] = count
    return counts
