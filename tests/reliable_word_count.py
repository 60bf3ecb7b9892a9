"""At-least-once word count for the delivery and fault tests, and the checks on its output.

- ``LoggingFileSpout``: the library's ``FileSpout``, also appending every ack and fail it gets
  to ``<out>/spout-<task>-<pid>.log`` (one line each, written before it returns).
- ``SplitBolt``: splits a line into ``(word, position, index)`` tuples anchored to the line,
  then acks it; ``test.split.sleep.ms`` slows it down. ``test.split.misbehave`` = ``fail`` or
  ``drop`` makes it fail (or ignore) the first sight of every 7th line, to test replay on fail
  and on timeout; ``stuck`` makes the first process that sees line 100 hang in ``process``.
- ``RecordingCountBolt``: appends ``position<TAB>index<TAB>word`` to
  ``<out>/count-<task>-<pid>.log`` (an unbuffered write) before acking, so a killed process
  keeps what it acked.

Every file the test reads is written by a process before it acks, so a ``kill -9`` at any time
leaves the logs consistent with what the spouts were told.
"""

from __future__ import annotations

import collections
import os
import random
import time
from pathlib import Path

from heron_spark import Bolt, Grouping, Stream, TopologyBuilder
from heron_spark.io import FileSpout

OUT = "test.out.dir"
MISBEHAVE = "test.split.misbehave"
SLEEP_MS = "test.split.sleep.ms"  # per line: makes a run last long enough to hurt it
VOCABULARY = [f"w{i:02d}" for i in range(40)]


def write_corpus(path: Path, lines: int, seed: int = 7) -> list[str]:
    """Write a deterministic corpus of ``lines`` lines; return the lines."""
    rng = random.Random(seed)
    text = [" ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(3, 12)))
            for _ in range(lines)]
    path.write_text("".join(f"{line}\n" for line in text))
    return text


def _append(path: Path):
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


class LoggingFileSpout(FileSpout):
    """``FileSpout`` that logs every ack and fail it receives."""

    def initialize(self, config, context):
        super().initialize(config, context)
        folder = Path(config[OUT])
        folder.mkdir(parents=True, exist_ok=True)
        self._log = _append(folder / f"spout-{context.get_task_id()}-{os.getpid()}.log")

    def ack(self, tup_id):
        if tup_id in self._pending:
            os.write(self._log, f"ack\t{self._position(tup_id)}\n".encode())
        super().ack(tup_id)

    def fail(self, tup_id):
        os.write(self._log, f"fail\t{self._position(tup_id)}\n".encode())
        super().fail(tup_id)

    def _position(self, tup_id) -> str:
        return f"{self._files[tup_id[0]].path.name}:{tup_id[1]}"


class SplitBolt(Bolt):
    """Line -> anchored (word, position, index) tuples; optionally fails or drops some lines."""

    outputs = [Stream(fields=["word", "position", "index"])]

    def initialize(self, config, context):
        self._misbehave = config.get(MISBEHAVE, "")
        self._out = config[OUT]
        self._sleep = float(config.get(SLEEP_MS, 0) or 0) / 1000.0
        self._seen: set[str] = set()

    def process(self, tup):
        line, position = tup.values
        if self._sleep:
            time.sleep(self._sleep)
        if self._misbehave == "stuck" and position.endswith(":100") and self._first_to_see(tup):
            time.sleep(3600)  # user code that never returns
        if self._misbehave in ("fail", "drop") and int(position.rsplit(":", 1)[1]) % 7 == 0 \
                and position not in self._seen:
            self._seen.add(position)
            if self._misbehave == "fail":
                self.fail(tup)
            return  # "drop": neither ack nor fail; the spout's timeout replays it
        for index, word in enumerate(line.split()):
            self.emit([word, position, index], anchors=[tup])
        self.ack(tup)


    def _first_to_see(self, tup) -> bool:
        marker = Path(self._out) / "stuck-marker"
        try:
            os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            return False
        return True


class AutoAckSplitBolt(Bolt):
    """The same split without anchoring or acking: the runtime does both (``auto_ack``)."""

    outputs = [Stream(fields=["word", "position", "index"])]
    auto_ack = True

    def process(self, tup):
        line, position = tup.values
        for index, word in enumerate(line.split()):
            self.emit([word, position, index])


class RecordingCountBolt(Bolt):
    """Records each word occurrence it acks."""

    def initialize(self, config, context):
        folder = Path(config[OUT])
        folder.mkdir(parents=True, exist_ok=True)
        self._fd = _append(folder / f"count-{context.get_task_id()}-{os.getpid()}.log")

    def process(self, tup):
        word, position, index = tup.values
        os.write(self._fd, f"{position}\t{index}\t{word}\n".encode())
        self.ack(tup)


def build(name: str, corpus: Path, out: Path, *, spouts: int = 2, splits: int = 2,
          counts: int = 2, containers: int = 2, config: dict | None = None,
          auto_ack: bool = False, count_bolt: type | None = None):
    """Return the at-least-once word-count topology class (``count_bolt``: a subclass of
    ``RecordingCountBolt`` to use instead)."""
    builder = TopologyBuilder(name)
    spout = builder.add_spout("lines", LoggingFileSpout, par=spouts,
                              config={**LoggingFileSpout.settings(str(corpus)), OUT: str(out)})
    split = builder.add_bolt("split", AutoAckSplitBolt if auto_ack else SplitBolt, par=splits,
                             inputs={spout: Grouping.SHUFFLE}, config={OUT: str(out)})
    builder.add_bolt("count", count_bolt or RecordingCountBolt, par=counts,
                     inputs={split: Grouping.fields("word")}, config={OUT: str(out)})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE", "topology.stmgrs": containers,
                        "topology.message.timeout.secs": 10, **(config or {})})
    return builder.build()


def expected_counts(lines: list[str]) -> collections.Counter:
    """The exact word counts, computed without the engine."""
    return collections.Counter(word for line in lines for word in line.split())


def read_counts(out: Path) -> tuple[collections.Counter, collections.Counter, int]:
    """Return (raw counts, counts after de-duplicating by (position, index), records)."""
    raw: collections.Counter = collections.Counter()
    unique: dict[tuple[str, str], str] = {}
    records = 0
    for path in out.glob("count-*.log"):
        for line in path.read_text().splitlines():
            position, index, word = line.split("\t")
            raw[word] += 1
            unique[(position, index)] = word
            records += 1
    return raw, collections.Counter(unique.values()), records


def committed_acks(statemgr_url: str, topology: str, spouts: int) -> int:
    """Return how many lines the spouts' committed checkpoints count as acked."""
    from heron_spark.statemgr import open_state_manager

    with open_state_manager(statemgr_url) as statemgr:
        states = [statemgr.get_spout_state(topology, f"lines.{i}") for i in range(spouts)]
    return sum(state["acked_total"] for state in states if state)


def read_spout_log(out: Path) -> tuple[collections.Counter, collections.Counter]:
    """Return (acks per position, fails per position) over every spout process."""
    acks: collections.Counter = collections.Counter()
    fails: collections.Counter = collections.Counter()
    for path in out.glob("spout-*.log"):
        for line in path.read_text().splitlines():
            kind, position = line.split("\t")
            (acks if kind == "ack" else fails)[position] += 1
    return acks, fails


def check_exact(text: list[str], out: Path, statemgr_url: str, topology: str,
                spouts: int) -> int:
    """Assert every line was acked and committed and every word counted at least as often as
    it occurs, exactly once after de-duplication; return how many word records were replays."""
    raw, unique, records = read_counts(out)
    expected = expected_counts(text)
    short = {w: (raw[w], c) for w, c in expected.items() if raw[w] < c}
    assert not short, f"words counted fewer times than they occur: {short}"
    assert unique == expected
    acks, _ = read_spout_log(out)
    assert set(acks) == {f"corpus.txt:{i}" for i in range(len(text))}
    assert committed_acks(statemgr_url, topology, spouts) == len(text)
    return records - sum(expected.values())
