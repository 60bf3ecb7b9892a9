"""Word count into a ``ParquetSink``, and the checks on what Spark (or pyarrow) reads back.

``FileSpout`` reads a corpus; ``SplitBolt`` emits ``(word, line)``: one row per word of each
line, with the line's position, so every row is distinct and a repeat shows as a duplicate
``(word, line)``. The sink writes them to ``parquet.path`` (partitioned by nothing, or by
``word`` when asked).
"""

from __future__ import annotations

import collections
import os
import time
from urllib.parse import unquote

from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.io import FileSpout, ParquetSink
from heron_spark.io.parquet_store import CommitLog

SLEEP_MS = "test.split.sleep.ms"
CRASH_AT = "test.split.crash.at"  # with CRASH_MARKER: the first process to split this many
CRASH_MARKER = "test.split.crash.marker"  # lines raises once (the marker file remembers it)


class SplitBolt(Bolt):
    outputs = ["word", "line"]

    def initialize(self, config, context):
        self.sleep = float(config.get(SLEEP_MS, 0)) / 1000.0
        self.reliable = context.get_cluster_config().get("topology.reliability.mode") \
            == "ATLEAST_ONCE"
        self.crash_at = int(config.get(CRASH_AT, 0))
        self.marker = config.get(CRASH_MARKER)
        self.seen = 0

    def process(self, tup):
        if self.sleep:
            time.sleep(self.sleep)
        line, position = tup.values
        self.seen += 1
        if self.crash_at and self.seen == self.crash_at and not os.path.exists(self.marker):
            with open(self.marker, "w") as handle:
                handle.write("crashed")
            raise RuntimeError("crashing once, as the test asked")
        for i, word in enumerate(line.split()):
            self.emit([word, f"{position}#{i}"], anchors=[tup] if self.reliable else None)
        if self.reliable:
            self.ack(tup)


def write_corpus(path, lines: int) -> list[str]:
    text = [" ".join(f"w{(i * 7 + j * 13) % 50:02d}" for j in range(3 + i % 9))
            for i in range(lines)]
    path.write_text("".join(f"{line}\n" for line in text))
    return text


def expected_rows(corpus_name: str, text: list[str]) -> collections.Counter:
    return collections.Counter((word, f"{corpus_name}:{n}#{i}")
                               for n, line in enumerate(text) for i, word in enumerate(line.split()))


def build(name: str, corpus, out, *, mode: str, sinks: int = 1, spouts: int = 1,
          sink_config: dict | None = None, config: dict | None = None):
    builder = TopologyBuilder(name)
    lines = builder.add_spout("lines", FileSpout, par=spouts,
                              config=FileSpout.settings(str(corpus), lines_per_call=8))
    words = builder.add_bolt("split", SplitBolt, par=2, inputs={lines: Grouping.SHUFFLE})
    builder.add_bolt("out", ParquetSink, par=sinks, inputs={words: Grouping.SHUFFLE},
                     config={"parquet.path": str(out), **(sink_config or {})})
    builder.set_config({"topology.reliability.mode": mode, **(config or {})})
    return builder.build()


def read_committed(out) -> collections.Counter:
    """The rows of the committed files (the log's view), read with pyarrow."""
    import pyarrow.parquet as pq

    rows: collections.Counter = collections.Counter()
    for entry in CommitLog.open(str(out)).files():
        table = pq.read_table(unquote(entry.path.removeprefix("file://")))
        rows.update(zip(table.column("word").to_pylist(), table.column("line").to_pylist()))
    return rows


def read_with_spark(session, out) -> collections.Counter:
    df = session.read.parquet(str(out))
    return collections.Counter((r["word"], r["line"]) for r in df.collect())
