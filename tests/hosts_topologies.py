"""The word counts of ``test_hosts``, with a per-generation marker for the split-brain check.

Each count task also appends ``<wall time>\\t<generation>`` to ``<out>/gen-<task>-<pid>.log``
for every tuple it processes (the generation from its container folder,
``.../gen-N/container-M``). ``check_no_split_brain`` asserts that, per task, the tuples of one
generation were all processed before the first of the next: two generations of a container
never both ran tuples. (The hosts are namespaces of one machine, so their clocks agree; on
real hosts the check would need the clock skew as slack.) The line counts are the progress the
driver measures stalls with.

Shipped to the executors with ``addPyFile``.
"""

from __future__ import annotations

import collections
import os
import re
import sys
import time
from pathlib import Path

import reliable_word_count as rwc
import stateful_word_count as swc
from heron_spark import Grouping, TopologyBuilder
from heron_spark.io import FileSpout

_GENERATION = re.compile(r"/gen-(\d+)/container-\d+")


def _generation() -> int:
    for arg in sys.argv:
        if (match := _GENERATION.search(arg)) is not None:
            return int(match.group(1))
    raise RuntimeError(f"no generation folder in the instance's arguments: {sys.argv}")


class _Marks:
    def open_marks(self, out: Path, task: int) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self._generation = _generation()
        self._marks = os.open(out / f"gen-{task}-{os.getpid()}.log",
                              os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def mark(self) -> None:
        os.write(self._marks, f"{time.time():.6f}\t{self._generation}\n".encode())


class MarkedCountBolt(rwc.RecordingCountBolt, _Marks):
    """At least once: records each word (``reliable_word_count``) and marks it."""

    def initialize(self, config, context):
        super().initialize(config, context)
        self.open_marks(Path(config[rwc.OUT]), context.get_task_id())

    def process(self, tup):
        super().process(tup)
        self.mark()


class MarkedStatefulCountBolt(swc.StatefulCountBolt, _Marks):
    """Effectively once: counts in its state (``stateful_word_count``) and marks each word."""

    def initialize(self, config, context):
        super().initialize(config, context)
        self.open_marks(self.out, self.task)

    def process(self, tup):
        super().process(tup)
        self.mark()


class _Paced:
    """The split's per-line sleep (``test.split.sleep.ms``) until ``<out>/unpace`` exists: the
    run lasts as long as the faults need, then the rest of the corpus goes at full speed.
    Test control through the test's folder (the hosts share this machine's filesystem)."""

    def paced(self, out: Path) -> bool:
        now = time.monotonic()
        if now >= getattr(self, "_next_look", 0.0):
            self._next_look = now + 0.5
            self._unpaced = (out / UNPACE).exists()
        return not self._unpaced


UNPACE = "unpace"


class PacedSplitBolt(rwc.SplitBolt, _Paced):
    def process(self, tup):
        if self._sleep and not self.paced(Path(self._out)):
            self._sleep = 0.0
        super().process(tup)


class PacedStatefulSplitBolt(swc.SplitBolt, _Paced):
    def initialize(self, config, context):
        super().initialize(config, context)
        self.out = Path(config[swc.OUT])

    def process(self, tup):
        if self.sleep and not self.paced(self.out):
            self.sleep = 0.0
        super().process(tup)


def unpace(out: Path) -> None:
    """Let the splits run at full speed from now on."""
    out.mkdir(parents=True, exist_ok=True)
    (out / UNPACE).touch()


def build_alo(name: str, corpus: Path, out: Path, containers: int, config: dict):
    builder = TopologyBuilder(name)
    spout = builder.add_spout("lines", rwc.LoggingFileSpout, par=containers,
                              config={**rwc.LoggingFileSpout.settings(str(corpus)),
                                      rwc.OUT: str(out)})
    split = builder.add_bolt("split", PacedSplitBolt, par=containers,
                             inputs={spout: Grouping.SHUFFLE}, config={rwc.OUT: str(out)})
    builder.add_bolt("count", MarkedCountBolt, par=containers,
                     inputs={split: Grouping.fields("word")}, config={rwc.OUT: str(out)})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE",
                        "topology.stmgrs": containers, **config})
    return builder.build()


def build_eo(name: str, corpus: Path, out: Path, containers: int, config: dict):
    builder = TopologyBuilder(name)
    lines = builder.add_spout("lines", FileSpout, par=containers,
                              config=FileSpout.settings(str(corpus), lines_per_call=8))
    split = builder.add_bolt("split", PacedStatefulSplitBolt, par=containers,
                             inputs={lines: Grouping.SHUFFLE})
    builder.add_bolt("count", MarkedStatefulCountBolt, par=containers,
                     inputs={split: Grouping.fields("word")})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 0.5,
                        "topology.stmgrs": containers, swc.OUT: str(out), **config})
    return builder.build()


def marks(out: Path) -> int:
    """Tuples the count tasks processed so far, every generation (the progress)."""
    total = 0
    for path in out.glob("gen-*.log"):
        try:
            total += path.read_bytes().count(b"\n")
        except FileNotFoundError:
            continue
    return total


def check_no_split_brain(out: Path) -> dict[int, dict[int, tuple[float, float]]]:
    """Assert no task ran tuples in two generations at once; return, per task, each
    generation's (first, last) processing time."""
    spans: dict[int, dict[int, list[float]]] = collections.defaultdict(dict)
    for path in out.glob("gen-*.log"):
        task = int(path.name.split("-")[1])
        for line in path.read_text().splitlines():
            stamp, generation = line.split("\t")
            span = spans[task].setdefault(int(generation), [float("inf"), 0.0])
            span[0], span[1] = min(span[0], float(stamp)), max(span[1], float(stamp))
    for task, by_generation in spans.items():
        ordered = sorted(by_generation.items())
        for (old, (_, old_last)), (new, (new_first, _)) in zip(ordered, ordered[1:]):
            assert old_last < new_first, (
                f"split brain: task {task} ran tuples in generation {old} until {old_last:.3f}, "
                f"after generation {new} began at {new_first:.3f}")
    return {task: {g: (round(a, 3), round(b, 3)) for g, (a, b) in gens.items()}
            for task, gens in spans.items()}
