"""Event-time word count under effectively once, for the fault tests, and its exact result.

- ``StampedLines`` (a ``FileSpout``) reads lines ``"<event time ms> w w w w w"`` and emits each
  with that event time; its offsets are part of each checkpoint. The corpus's event times are
  out of order by up to ``DISORDER_MS`` within each file, and the spouts' lag covers it, so no
  tuple is late and the windows' contents follow from the corpus alone.
- ``SplitBolt`` (``stateful_word_count``'s, optionally slowed) emits the words, each inheriting
  its line's event time.
- ``WordsPerSecond`` (an event-time ``TumblingWindowBolt`` of 1 s, fields-grouped on the word)
  emits ``(window start, word, count)`` for each word of each window when the watermark passes
  the window's end; ``test.count.crash.at`` makes it raise once (``crash_once``).
- ``ParquetSink`` commits the rows of each committed checkpoint exactly once.

``expected_rows`` computes the windows from the corpus in plain Python; ``read_rows`` reads
what the sink committed.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np

import parquet_word_count as pwc
import stateful_word_count as swc
from heron_spark import Grouping, TopologyBuilder, TumblingWindowBolt
from heron_spark.io import FileSpout, ParquetSink

BASE_MS = 1_700_000_000_000
STEP_MS = 5          # event time advances 5 ms per line: 1 s windows of ~200 lines
DISORDER_MS = 1_500  # how far before its place a line's event time may be
WINDOW_MS = 1_000


def write_corpus(path: Path, lines: int, seed: int = 7) -> list[tuple[int, list[str]]]:
    """Write ``lines`` stamped lines; return them as (event time, words)."""
    rng = np.random.default_rng(seed)
    words = [f"w{k}" for k in range(40)]
    out = []
    for i in range(lines):
        stamp = BASE_MS + i * STEP_MS - int(rng.integers(0, DISORDER_MS))
        out.append((stamp, [words[int(k)] for k in rng.integers(0, len(words), 5)]))
    path.write_text("".join(f"{stamp} {' '.join(ws)}\n" for stamp, ws in out))
    return out


def expected_rows(corpus: list[tuple[int, list[str]]]) -> dict[tuple[int, str], int]:
    """``(window start, word) -> count`` of 1 s tumbling event-time windows."""
    counts: collections.Counter = collections.Counter()
    for stamp, words in corpus:
        for word in words:
            counts[(stamp - stamp % WINDOW_MS, word)] += 1
    return dict(counts)


class StampedLines(FileSpout):
    """A ``FileSpout`` whose lines start with their event time (ms)."""

    def emit(self, tup, tup_id=None, stream="default", direct_task=None, need_task_ids=False,
             timestamp=None, partition=None):
        stamp, _, text = tup[0].partition(" ")
        return super().emit([text, tup[1]], tup_id, stream, direct_task, need_task_ids,
                            timestamp=int(stamp))


class WordsPerSecond(TumblingWindowBolt):
    outputs = ["start", "word", "count"]

    def initialize(self, config, context):
        super().initialize(config, context)
        self.crash_at = int(config.get(swc.CRASH_AT, 0))
        self.out = Path(config[swc.OUT])
        self.seen = 0

    def process(self, tup):
        self.seen += 1
        swc.crash_once(self)
        super().process(tup)

    def processWindow(self, window_info, tuples):  # noqa: N802 - heronpy's name
        counts = collections.Counter(t.values[0] for t in tuples)
        for word, count in sorted(counts.items()):
            self.emit([window_info.start, word, count])


def build(name: str, corpus: Path, out: Path, sink: Path, *, interval: float = 0.5,
          config: dict | None = None):
    builder = TopologyBuilder(name)
    lines = builder.add_spout("lines", StampedLines, par=2, config={
        **FileSpout.settings(str(corpus), lines_per_call=8),
        "topology.bolts.tuple.timestamp.max.lag.ms": DISORDER_MS})
    words = builder.add_bolt("split", swc.SplitBolt, par=2, inputs={lines: Grouping.SHUFFLE})
    windows = builder.add_bolt("windows", WordsPerSecond, par=2,
                               inputs={words: Grouping.fields("word")},
                               config={"heron.window.event.time": True,
                                       TumblingWindowBolt.WINDOW_DURATION_SECS: 1})
    builder.add_bolt("out", ParquetSink, par=1, inputs={windows: Grouping.SHUFFLE},
                     config={"parquet.path": str(sink)})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": interval,
                        "topology.bolts.watermark.event.interval.ms": 50,
                        "topology.stmgrs": 2, swc.OUT: str(out), **(config or {})})
    return builder.build()


def read_rows(sink: Path) -> dict[tuple[int, str], int]:
    """The committed rows, ``(start, word) -> count``; a row committed twice fails."""
    import pyarrow.parquet as pq
    from urllib.parse import unquote

    from heron_spark.io.parquet_store import CommitLog

    rows: dict[tuple[int, str], int] = {}
    for entry in CommitLog.open(str(sink)).files():
        table = pq.read_table(unquote(entry.path.removeprefix("file://")))
        for start, word, count in zip(table.column("start").to_pylist(),
                                      table.column("word").to_pylist(),
                                      table.column("count").to_pylist()):
            assert (start, word) not in rows, f"window {start} of {word!r} committed twice"
            rows[(start, word)] = count
    return rows


__all__ = ["build", "expected_rows", "pwc", "read_rows", "write_corpus"]
