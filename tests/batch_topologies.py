"""Topologies of the batch API tests (imported by instance processes, so at module level)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from heron_spark import BatchBolt, BatchSpout, Grouping, TopologyBuilder, batch_source
from heron_spark.testing import CollectingBolt

LINES = [f"s{i} " + " ".join(f"w{(i * 7 + j) % 23}" for j in range(i % 5 + 1))
         for i in range(900)]
OUT = "batch.test.out"
CHUNK = "batch.test.chunk"
FAIL_EVERY = "batch.test.fail.every"  # the split fails each batch whose first line % this == 0,
                                      # the first time it sees it


class LineBatches(BatchSpout):
    """Emits its share of ``LINES`` (line i goes to task i % par) as (line, n) batches; under
    at-least-once each batch is one tree (message id: its first n), replayed when it fails."""

    outputs = ["line", "n"]

    def initialize(self, config, context):
        index = context.get_task_index()
        par = context.get_component_parallelism(context.get_component_id())
        self.rows = [(line, i) for i, line in enumerate(LINES) if i % par == index]
        self.chunk = int(config.get(CHUNK, 50))
        self.position = 0
        self.reliable = str(config.get("topology.reliability.mode", "")).upper() == "ATLEAST_ONCE"
        self.pending: dict[int, list] = {}
        self.retry: list[int] = []
        self.acked: list[int] = []
        self.failed: list[int] = []
        self.log = Path(config[OUT]) / f"spout-{context.get_task_id()}.json"

    def next_batch(self):
        if self.retry:
            first = self.retry.pop()
            rows = self.pending[first]
        elif self.position < len(self.rows):
            rows = self.rows[self.position:self.position + self.chunk]
            self.position += len(rows)
            first = rows[0][1]
        else:
            if not self.pending or not self.reliable:
                self.log.write_text(json.dumps({"acked": self.acked, "failed": self.failed}))
                self.declare_exhausted()
            return
        batch = pa.RecordBatch.from_pydict({"line": [r[0] for r in rows],
                                            "n": [r[1] for r in rows]})
        if self.reliable:
            self.pending[first] = rows
            self.emit_batch(batch, tup_id=first)
        else:
            self.emit_batch(batch)

    def ack(self, tup_id):
        self.pending.pop(tup_id, None)
        self.acked.append(tup_id)

    def fail(self, tup_id):
        self.failed.append(tup_id)
        if tup_id in self.pending:
            self.retry.append(tup_id)


class SplitBatches(BatchBolt):
    """Splits each line into (word, n) rows with ``pyarrow.compute``, anchored to their line."""

    outputs = ["word", "n"]

    def initialize(self, config, context):
        self.fail_every = int(config.get(FAIL_EVERY, 0))
        self.seen: set[int] = set()
        self.sources: set[str] = set()

    def process_batch(self, batch):
        component, stream, _task = batch_source(batch)
        self.sources.add(f"{component}/{stream}")
        assert batch.schema.names == ["line", "n"], batch.schema.names
        first = batch.column("n")[0].as_py()
        if self.fail_every and first % self.fail_every == 0 and first not in self.seen:
            self.seen.add(first)
            self.fail_batch()
            return
        words = pc.split_pattern(batch.column("line"), " ")
        parents = pc.list_parent_indices(words)
        self.emit_batch({"word": pc.list_flatten(words), "n": batch.column("n").take(parents)},
                        parents=parents)


class AckingCollector(CollectingBolt):
    """A collecting bolt that acks what it records."""

    auto_ack = True


class SquareFrames(BatchBolt):
    """pandas in, pandas out: adds the square of ``value``."""

    input_format = "pandas"
    outputs = ["value", "square"]

    def process_frame(self, frame):
        frame["square"] = frame["value"] * frame["value"]
        self.emit_batch(frame[["value", "square"]])


def word_lines(name: str, out: Path, config: dict | None = None):
    """LineBatches (2) -> SplitBatches (2, shuffle) -> AckingCollector (2, fields on word)."""
    builder = TopologyBuilder(name)
    lines = builder.add_spout("lines", LineBatches, par=2)
    split = builder.add_bolt("split", SplitBatches, par=2, inputs={lines: Grouping.SHUFFLE})
    builder.add_bolt("words", AckingCollector, par=2, inputs={split: Grouping.fields("word")})
    builder.set_config({"topology.stmgrs": 2, OUT: str(out), **(config or {})})
    return builder.build()


def expected_words() -> dict[tuple[str, int], int]:
    """(word, line number) -> occurrences, computed without the engine."""
    counts: dict[tuple[str, int], int] = {}
    for n, line in enumerate(LINES):
        for word in line.split(" "):
            counts[(word, n)] = counts.get((word, n), 0) + 1
    return counts
