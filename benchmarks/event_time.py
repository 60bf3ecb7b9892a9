"""Event-time benchmark: event-time against processing-time windows, and the watermark delay.

Corpus: the word count's (``wc_topologies.corpus_file``: N sentences, --sentences, default
1,000,000, of 10 Zipf words), each sentence i given an event time: it is placed at
``BASE_MS + int(i * --step-ms)`` (default 0.1 ms: 100,000 words per second of event time) and
shuffled back by up to 2 s, ``ts = place - shuffle[i]`` with ``shuffle[i]`` drawn uniformly
from [0, 2000) ms by numpy ``default_rng(42)`` (cached beside the corpus). So the event times
come out of order by up to 2 s, and never later than a spout's watermark with a lag of 2 s.

Topologies, written the way the README and the guides teach (plain style; at most once):
``sentence`` spout (2 tasks; task ``index`` reads the lines ``i % 2 == index``) -> ``split``
bolt (2 tasks, shuffle; ``self.emit([word])`` for each word) -> ``count`` (2 tasks, fields
grouping on ``word``), a ``TumblingWindowBolt`` of 1 s whose ``processWindow`` counts the
words of the window; ``topology.stmgrs: 2``, Spark ``local[*]``.

- EVENT_TIME: the spout emits ``self.emit([sentence], timestamp=ts)`` with
  ``topology.bolts.tuple.timestamp.max.lag.ms: 2000`` in its config; the words inherit their
  sentence's event time; the count bolt's config has ``heron.window.event.time: True``, so its
  windows are [start, start + 1000) ms of event time, fired when the watermark (sent every
  ``topology.bolts.watermark.event.interval.ms``, 1000) passes their end.
- PROCESSING_TIME: the same without event time: ``self.emit([sentence])``, and the count bolt
  a processing-time tumbling window of 1 s (ticks).

Phases (each run is one topology; every process it started is gone before the next):

- throughput: both topologies unpaced over the corpus, alternating EVENT_TIME and
  PROCESSING_TIME run by run (--runs each, default 3); words/s from the spouts' first emit to
  the end of the last ``processWindow``. Each count task keeps every window's counts and
  writes them at ``end_of_input``; the benchmark checks them exactly: EVENT_TIME per window
  start and word against counts computed from the corpus in plain Python, PROCESSING_TIME per
  word over all windows (windows by arrival cannot be predicted). A mismatch stops the
  benchmark with exit code 1. Printed: each run, the medians, and the ratio EVENT_TIME /
  PROCESSING_TIME of the medians (issue 34's target: 75 % or more).
- watermark delay (--phases delay; EVENT_TIME only): the spouts paced to --rate words/s in all
  (default 200,000) for --latency-secs (default 20), cycling over the corpus, each sentence's
  event time its emit's wall-clock ms minus ``shuffle[i]``, so event time tracks real time.
  Each time a count task's watermark W advances (``process_watermark``), it records the newest
  event time it has seen so far minus W. Printed per run p50 / p99 / max of that delay over
  both count tasks and the medians; the target is p99 < 3 x the watermark interval (1000 ms) +
  the lag (2000 ms) = 5000 ms. The windows' counts are checked exactly per window and word
  against the event times the spouts report they emitted.

Every run also samples ``/proc`` (``wc_report.ProcessSampler``) for CPU seconds and peak RSS
(VmHWM) per process role (driver, Spark JVM, Spark Python workers, stmgr, metricsmgr, each
component's instances); printed as two tables, median [every run], per topology and phase,
with the CPU microseconds per word of the instances and stmgrs. The first run of a series
also pays the Spark session's warm-up (the JVM's CPU), so the two topologies take turns going
first. --json PATH writes every figure. Every process the benchmark starts is stopped when it
ends, Ctrl-C too.

The corpus, the spouts' corpus reading and the process sampling are the word count's
(``wc_topologies``, ``wc_report``, ``word_count``); this file has the topologies, the checks,
the runs and the report.

Run from the repository root (the full-size figures take a while; smoke test first):
    .venv/bin/python benchmarks/event_time.py
    .venv/bin/python benchmarks/event_time.py --runs 1 --sentences 20000 --latency-secs 3
        [--phases throughput] [--rate 200000] [--step-ms 0.1] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import logging
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from array import array
from pathlib import Path

import bench_env  # first: the paths and environment the topology's processes inherit

bench_env.prepare()

import cloudpickle  # noqa: E402  (the copy heron_spark pickles topologies with)

import wc_topologies  # noqa: E402
from heron_spark import Bolt, Grouping, Spout, TopologyBuilder, TumblingWindowBolt  # noqa: E402
from heron_spark.api.event_time import WATERMARK_MAX  # noqa: E402
from heron_spark.errors import TopologyRuntimeError  # noqa: E402
from wc_report import _median, _roles_in, machine_info, quantile  # noqa: E402
from wc_topologies import (CONTAINERS, CORPUS_PATH, COUNTERS, OUT_DIR, QUOTA,  # noqa: E402
                           RATE, SPLITTERS, SPOUTS, WORDS_PER_SENTENCE, _corpus_lines,
                           _read_corpus_settings, _report_spout, corpus_file, count_corpus)
from word_count import BenchmarkError, clean_up, run_to_end  # noqa: E402

# The topologies travel by value: no process of the topology imports this file or wc_topologies.
cloudpickle.register_pickle_by_value(wc_topologies)
if __name__ != "__main__":
    cloudpickle.register_pickle_by_value(sys.modules[__name__])

BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: sentence 0's place in event time
SHUFFLE_MS = 2_000           # event times come out of order by less than this
LAG_MS = SHUFFLE_MS          # the spouts' topology.bolts.tuple.timestamp.max.lag.ms
WATERMARK_INTERVAL_MS = 1_000  # topology.bolts.watermark.event.interval.ms (its default)
WINDOW_MS = 1_000
SEED = 42
EVENT_TIME, PROCESSING_TIME = "EVENT_TIME", "PROCESSING_TIME"
PHASES = ("throughput", "delay")
LIVE = bench_env.LIVE

# Topology config keys of the benchmark's components (besides wc_topologies').
SHUFFLE_PATH = "bench.shuffle.path"
STEP_MS = "bench.event.step.ms"
STAMPED = "bench.event.time"  # the spouts give event times


def event_time_of(i: int, shuffle, step_ms: float) -> int:
    """Return sentence ``i``'s event time (ms) in the unpaced runs: its place, shuffled back."""
    return BASE_MS + int(i * step_ms) - shuffle[i]


# ---- the topology --------------------------------------------------------------------------
class SentenceSpout(Spout):
    """Emits the corpus lines ``i % tasks == index``, each with its event time (EVENT_TIME).

    Unpaced, sentence i's event time is ``event_time_of(i)``; paced (--rate), the emit's
    wall-clock ms minus ``shuffle[i]``, and the task writes every event time it gave to
    ``<out dir>/stamps-<index>.bin`` for the check. Figures as the word count's spouts.
    """

    outputs = ["sentence"]

    def initialize(self, config, context):
        _read_corpus_settings(self, config, context)
        self.lines = _corpus_lines(self)
        self.shuffle = array("H", Path(str(config[SHUFFLE_PATH])).read_bytes())
        self.per_pass = len(range(self.index, len(self.shuffle), self.tasks))
        self.stamped = bool(config[STAMPED])
        self.step_ms = float(config[STEP_MS])
        rate = float(config.get(RATE, 0) or 0)
        self.interval = WORDS_PER_SENTENCE / rate if rate > 0 else 0.0
        self.next_at = None
        self.lag = 0.0
        self.stamps = array("q")
        self.emitted = 0
        self.replayed = 0
        self.first_emit = None
        self.last_emit = None
        self.done = False

    def next_tuple(self):
        if self.done:
            return
        if self.first_emit is None:
            self.first_emit = time.time()
        for _ in range(32):
            now = time.time()
            if self.interval:
                if self.next_at is None:
                    self.next_at = now
                elif now < self.next_at:
                    return
                self.lag = max(self.lag, now - self.next_at)
                self.next_at += self.interval
            line = next(self.lines, None) if self.left != 0 else None
            if line is None:
                self.done = True
                if self.interval:
                    (self.out_dir / f"stamps-{self.index}.bin").write_bytes(self.stamps.tobytes())
                    (self.out_dir / f"emits-{self.index}.json").write_text(json.dumps(
                        {"first": self.first_emit, "last": self.last_emit}))
                _report_spout(self)
                return
            self.left -= 1
            self.last_emit = now
            i = self.index + (self.emitted % self.per_pass) * self.tasks
            self.emitted += 1
            if not self.stamped:
                self.emit([line])
            elif self.interval:
                ts = int(now * 1000) - self.shuffle[i]
                self.stamps.append(ts)
                self.emit([line], timestamp=ts)
            else:
                self.emit([line], timestamp=event_time_of(i, self.shuffle, self.step_ms))


class SplitBolt(Bolt):
    """Splits a sentence into words (each word carries its sentence's event time)."""

    outputs = ["word"]

    def process(self, tup):
        for word in tup.values[0].split():
            self.emit([word])


class WindowCountBolt(TumblingWindowBolt):
    """Counts the words of each window; writes every window's counts at the end of input.

    ``<out dir>/count-<task>.json``: the windows ``[start, end, {word: count}]`` (ms of event
    time, or seconds of arrival time), the words counted, and when the first and the last
    window with words ended.
    """

    def initialize(self, config, context):
        super().initialize(config, context)
        self.windows = []
        self.words = 0
        self.first = None
        self.last = None
        self.out = Path(str(config[OUT_DIR])) / f"count-{context.get_task_id()}.json"

    def processWindow(self, window_info, tuples):  # noqa: N802 - heronpy's name
        counts = {}
        for tup in tuples:
            word = tup.values[0]
            counts[word] = counts.get(word, 0) + 1
        if counts:
            self.windows.append([window_info.start, window_info.end, counts])
            self.words += len(tuples)
            self.last = time.time()
            if self.first is None:
                self.first = self.last

    def report(self) -> dict:
        return {"pid": os.getpid(), "first": self.first, "last": self.last,
                "words": self.words, "windows": self.windows}

    def end_of_input(self):
        super().end_of_input()  # the last windows
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.report()))
        os.replace(tmp, self.out)


class DelayWindowCountBolt(WindowCountBolt):
    """``WindowCountBolt`` noting, at each watermark W, the newest event time seen so far - W."""

    def initialize(self, config, context):
        super().initialize(config, context)
        self.newest = None
        self.delays = []

    def process(self, tup):
        if self.newest is None or tup.timestamp > self.newest:
            self.newest = tup.timestamp
        super().process(tup)

    def process_watermark(self, watermark_ms):
        if watermark_ms != WATERMARK_MAX and self.newest is not None:
            self.delays.append(self.newest - watermark_ms)
        super().process_watermark(watermark_ms)

    def report(self) -> dict:
        return {**super().report(), "delays_ms": self.delays}


def build(kind: str, phase: str, corpus: Path, shuffle: Path, out_dir: Path, quota: int,
          rate_per_task: float, step_ms: float):
    """Build the EVENT_TIME or PROCESSING_TIME topology for ``phase``."""
    stamped = kind == EVENT_TIME
    builder = TopologyBuilder(f"bench_{kind.lower()}")
    spout_config = {"topology.bolts.tuple.timestamp.max.lag.ms": LAG_MS} if stamped else {}
    count_config = {TumblingWindowBolt.WINDOW_DURATION_SECS: WINDOW_MS // 1000}
    if stamped:
        count_config["heron.window.event.time"] = True
    count_class = DelayWindowCountBolt if phase == "delay" else WindowCountBolt
    spout = builder.add_spout("sentence", SentenceSpout, par=SPOUTS, config=spout_config)
    split = builder.add_bolt("split", SplitBolt, par=SPLITTERS, inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("count", count_class, par=COUNTERS, inputs={split: Grouping.fields("word")},
                     config=count_config)
    builder.set_config({"topology.stmgrs": CONTAINERS, CORPUS_PATH: str(corpus),
                        OUT_DIR: str(out_dir), QUOTA: quota, RATE: rate_per_task,
                        SHUFFLE_PATH: str(shuffle), STEP_MS: step_ms, STAMPED: stamped,
                        "topology.bolts.watermark.event.interval.ms": WATERMARK_INTERVAL_MS})
    return builder.build()


# ---- the corpus' event times and the expected counts ---------------------------------------
def shuffle_file(sentences: int, cache_dir: Path) -> tuple[Path, array]:
    """Return the file of each sentence's shuffle (uint16 ms in [0, 2000)) and its contents."""
    path = cache_dir / f"event-shuffle{SHUFFLE_MS}-seed{SEED}-n{sentences}.u16"
    if not path.exists():
        import numpy as np

        cache_dir.mkdir(parents=True, exist_ok=True)
        drawn = np.random.default_rng(SEED).integers(0, SHUFFLE_MS, sentences, dtype=np.uint16)
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        drawn.tofile(tmp)
        os.replace(tmp, path)
    return path, array("H", path.read_bytes())


def windows_of(lines, stamps) -> dict[int, collections.Counter]:
    """Count the words of ``lines`` per 1 s window of their event times ``stamps``."""
    windows: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for line, ts in zip(lines, stamps):
        windows[ts - ts % WINDOW_MS].update(line.split())
    return windows


def corpus_windows(corpus: Path, shuffle, step_ms: float) -> dict[int, collections.Counter]:
    """Count the corpus' words per event-time window, as the unpaced EVENT_TIME runs must."""
    with open(corpus) as lines:
        return windows_of(lines,
                          (event_time_of(i, shuffle, step_ms) for i in range(len(shuffle))))


def paced_windows(corpus: Path, out_dir: Path, spouts: int) -> dict[int, collections.Counter]:
    """Count what the paced spouts emitted per window, from the event times they wrote."""
    stamps = []
    for index in range(spouts):
        stamps.append(array("q", (out_dir / f"stamps-{index}.bin").read_bytes()))
    needed = max(index + (len(s) - 1) * spouts + 1 for index, s in enumerate(stamps))
    with open(corpus) as handle:
        lines = [line.rstrip("\n") for line in itertools.islice(handle, needed)]
    windows: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for index, task_stamps in enumerate(stamps):
        own = lines[index::spouts]  # the task's lines, in the order it cycles over them
        for window, counts in windows_of(itertools.cycle(own), task_stamps).items():
            windows[window].update(counts)
    return windows


# ---- runs ----------------------------------------------------------------------------------
class Bench:
    def __init__(self, args, spark, work_root: Path, corpus: Path, shuffle: Path,
                 expected_windows: dict, expected_words: collections.Counter) -> None:
        self.args = args
        self.spark = spark
        self.work_root = work_root
        self.corpus = corpus
        self.shuffle = shuffle
        self.expected_windows = expected_windows
        self.expected_words = expected_words
        self.handle = None  # the live topology, killed on the way out
        self.run_number = 0
        self.conf = {"heron.statemgr": f"file://{work_root / 'state'}",
                     "heron.work.dir": str(work_root / "work")}

    def run_once(self, kind: str, phase: str) -> dict:
        args = self.args
        self.run_number += 1
        out_dir = self.work_root / f"run-{self.run_number:03d}-{kind}-{phase}"
        out_dir.mkdir(parents=True)
        if phase == "throughput":
            quota, rate_per_task = 0, 0.0
        else:
            quota = max(1, round(args.rate * args.latency_secs / WORDS_PER_SENTENCE / SPOUTS))
            rate_per_task = args.rate / SPOUTS
        topology = build(kind, phase, self.corpus, self.shuffle, out_dir, quota, rate_per_task,
                         args.step_ms)
        handle, placement, roles, submitted = run_to_end(self, topology, f"{kind} {phase}", args)
        results = [json.loads(p.read_text()) for p in sorted(out_dir.glob("count-*.json"))]
        spouts = [json.loads(p.read_text()) for p in sorted(out_dir.glob("spout-*.json"))]
        if len(results) != COUNTERS or len(spouts) != SPOUTS:
            raise BenchmarkError(f"{kind} {phase}: {len(results)} of {COUNTERS} count tasks and "
                                 f"{len(spouts)} of {SPOUTS} spout tasks reported (see {out_dir})")
        words = sum(r["words"] for r in results)
        first_emit = min((s["first_emit"] for s in spouts if s.get("first_emit")),
                         default=math.nan)
        last = max((r["last"] for r in results if r["last"]), default=math.nan)
        run = {"kind": kind, "phase": phase, "words": words,
               "words_per_s": words / max(last - first_emit, 1e-9),
               "windows": sum(len(r["windows"]) for r in results),
               "startup_running_s": (handle.started_at or math.nan) - submitted,
               "whole_run_s": (handle.ended_at or math.nan) - submitted,
               "placement": placement, "roles": roles}
        if kind == PROCESSING_TIME:
            self._check_words(kind, phase, results, out_dir)
        elif phase == "throughput":
            self._check_windows(kind, phase, results, self.expected_windows, out_dir)
        else:
            expected = paced_windows(self.corpus, out_dir, SPOUTS)
            self._check_windows(kind, phase, results, expected, out_dir)
            delays = sorted(d for r in results for d in r["delays_ms"])
            emits = [json.loads(p.read_text()) for p in out_dir.glob("emits-*.json")]
            span = max(e["last"] for e in emits) - min(e["first"] for e in emits)
            run.update({"offered_words_per_s": words / max(span, 1e-9),
                        "spout_max_lag_s": max(s["max_lag_s"] for s in spouts),
                        "delay_samples": len(delays), "delay_p50_ms": quantile(delays, 0.50),
                        "delay_p99_ms": quantile(delays, 0.99),
                        "delay_max_ms": delays[-1] if delays else math.nan})
        if not args.keep_work:
            shutil.rmtree(out_dir, ignore_errors=True)
        return run

    @staticmethod
    def _check_windows(kind, phase, results, expected: dict, out_dir) -> None:
        """Check the windows' counts per window start and word against ``expected``."""
        counted: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
        problems = []
        for r in results:
            for start, end, counts in r["windows"]:
                if end - start != WINDOW_MS or start % WINDOW_MS:
                    problems.append(f"a window [{start}, {end}) is not an aligned {WINDOW_MS} ms")
                twice = counted[start].keys() & counts.keys()
                if twice:
                    problems.append(f"window {start}: {len(twice)} words counted twice (by two "
                                    f"tasks, or two firings), e.g. {sorted(twice)[:3]}")
                counted[start].update(counts)
        wrong = sorted(s for s in counted.keys() | expected.keys()
                       if counted.get(s) != expected.get(s))
        if wrong:
            start = wrong[0]
            got, want = counted.get(start, collections.Counter()), expected.get(
                start, collections.Counter())
            problems.append(
                f"{len(wrong)} of {len(expected)} windows differ; the first, [{start}, "
                f"{start + WINDOW_MS}): {sum(got.values()):,} words counted, "
                f"{sum(want.values()):,} expected, missing {(want - got).most_common(3)}, "
                f"extra {(got - want).most_common(3)}")
        if problems:
            raise BenchmarkError(f"{kind} {phase} run: window counts differ from the corpus': "
                                 f"{'; '.join(problems[:5])} (files: {out_dir})")

    def _check_words(self, kind, phase, results, out_dir) -> None:
        """Check the total count per word over every window of every task."""
        counted: collections.Counter = collections.Counter()
        shared: set = set()
        for r in results:
            task: collections.Counter = collections.Counter()
            for _, _, counts in r["windows"]:
                task.update(counts)
            shared |= counted.keys() & task.keys()
            counted.update(task)
        problems = []
        if shared:
            problems.append(f"{len(shared)} words counted by more than one count task "
                            f"(fields grouping broken), e.g. {sorted(shared)[:5]}")
        if counted != self.expected_words:
            short, extra = self.expected_words - counted, counted - self.expected_words
            problems.append(f"{sum(counted.values()):,} words counted, "
                            f"{sum(self.expected_words.values()):,} expected; missing "
                            f"{short.most_common(3)}, extra {extra.most_common(3)}")
        if problems:
            raise BenchmarkError(f"{kind} {phase} run: counts differ from the corpus': "
                                 f"{'; '.join(problems)} (files: {out_dir})")


# ---- report --------------------------------------------------------------------------------
def _series(values, fmt: str) -> str:
    values = list(values)
    return f"median {fmt.format(_median(values))} (runs: {', '.join(fmt.format(v) for v in values)})"


def _topology_cpu_s(run: dict) -> float:
    """Return the CPU seconds of the topology's own processes: instances and stmgrs."""
    return sum(v["cpu_s"] for role, v in run["roles"].items()
               if role.startswith(("instance ", "stmgr")))


def role_table(columns: dict[str, list[dict]], key: str, fmt: str) -> tuple[list[str], dict]:
    """Return the lines of a table of ``key`` per process role, one column per series.

    Each cell is the median of the series' runs, then every run's figure; CPU seconds
    (``cpu_s``) get a last row summing every role.
    """
    runs = [r for series in columns.values() for r in series]
    roles = _roles_in(runs) + (["all"] if key == "cpu_s" else [])
    width = max([12] + [len(role) for role in roles])
    header = f"  {'role':<{width}} " + " ".join(f"{name:<36}" for name in columns)
    lines, summary = [header], {}
    for role in roles:
        cells = []
        for name, series in columns.items():
            values = [sum(v[key] for v in r["roles"].values()) if role == "all"
                      else r["roles"].get(role, {}).get(key, 0.0) for r in series]
            summary.setdefault(role, {})[name] = _median(values)
            cells.append(f"{fmt.format(_median(values))} "
                         f"[{', '.join(fmt.format(v) for v in values)}]")
        lines.append(f"  {role:<{width}} " + " ".join(f"{c:<36}" for c in cells))
    return lines, summary


def report(args, event: list[dict], processing: list[dict], delay: list[dict]) -> dict:
    lines, summary = [], {}
    for kind, runs in ((EVENT_TIME, event), (PROCESSING_TIME, processing)):
        if runs:
            lines.append(f"{kind} words/s: {_series((r['words_per_s'] for r in runs), '{:,.0f}')}")
            lines.append(f"{kind} CPU µs per word (instances and stmgrs): " + _series(
                (1e6 * _topology_cpu_s(r) / max(r["words"], 1) for r in runs), "{:.2f}"))
            summary[f"{kind}_words_per_s"] = _median(r["words_per_s"] for r in runs)
    if event and processing:
        ratio = summary[f"{EVENT_TIME}_words_per_s"] / summary[f"{PROCESSING_TIME}_words_per_s"]
        pairs = [e["words_per_s"] / p["words_per_s"] for e, p in zip(event, processing)]
        summary["ratio"] = ratio
        lines.append(f"EVENT_TIME / PROCESSING_TIME words/s (medians): {ratio:.1%} "
                     f"(target >= 75 %: {'met' if ratio >= 0.75 else 'NOT met'}; run by run: "
                     f"{', '.join(f'{p:.1%}' for p in pairs)})")
    if delay:
        target = 3 * WATERMARK_INTERVAL_MS + LAG_MS
        for key, label in (("delay_p50_ms", "p50"), ("delay_p99_ms", "p99"),
                           ("delay_max_ms", "max")):
            lines.append(f"EVENT_TIME watermark delay {label} ms at {args.rate:,.0f} words/s: "
                         f"{_series((r[key] for r in delay), '{:,.0f}')}")
            summary[key] = _median(r[key] for r in delay)
        p99 = summary["delay_p99_ms"]
        lines.append(f"EVENT_TIME watermark delay p99 target < {target:,} ms (3 x "
                     f"{WATERMARK_INTERVAL_MS} ms interval + {LAG_MS} ms lag): "
                     f"{'met' if p99 < target else 'NOT met'}")
        lines.append(f"EVENT_TIME words/s the spouts emitted in the delay runs: "
                     f"{_series((r['offered_words_per_s'] for r in delay), '{:,.0f}')}")
    columns = {name: runs for name, runs in (
        (f"{EVENT_TIME} throughput", event), (f"{PROCESSING_TIME} throughput", processing),
        (f"{EVENT_TIME} delay phase", delay)) if runs}
    cpu, summary["cpu_s"] = role_table(columns, "cpu_s", "{:.2f}")
    rss, summary["peak_rss_mb"] = role_table(columns, "peak_rss_mb", "{:.0f}")
    print("\n".join(["", "== summary"] + lines
                    + ["CPU seconds per process role, median [every run]:"] + cpu
                    + ["peak RSS MB per process role (the largest process), median [every run]:"]
                    + rss), flush=True)
    return summary


# ---- main ----------------------------------------------------------------------------------
def _choices(text: str) -> list[str]:
    picked = [c.strip().lower() for c in text.split(",") if c.strip()]
    unknown = [c for c in picked if c not in PHASES]
    if unknown or not picked:
        raise argparse.ArgumentTypeError(f"unknown phase(s) {unknown}: choose from "
                                         f"{', '.join(PHASES)}")
    return [c for c in PHASES if c in picked]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--phases", type=_choices, default=list(PHASES),
                        help="comma-separated, of throughput, delay (default: both)")
    parser.add_argument("--runs", type=int, default=3, help="runs per phase and topology (default 3)")
    parser.add_argument("--sentences", type=int, default=1_000_000,
                        help="corpus size N in sentences of 10 words (default 1,000,000)")
    parser.add_argument("--step-ms", type=float, default=0.1,
                        help="event time between consecutive sentences, ms (default 0.1)")
    parser.add_argument("--rate", type=float, default=200_000,
                        help="offered words/s in total in the delay runs (default 200,000)")
    parser.add_argument("--latency-secs", type=float, default=20.0,
                        help="length of each delay run at --rate (default 20)")
    parser.add_argument("--sample-interval", type=float, default=0.2,
                        help="seconds between /proc samples of CPU and RSS (default 0.2)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run at most")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "heron_spark_bench")
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    parser.add_argument("--keep-work", action="store_true",
                        help="keep the work folder (logs, per-run outputs) after a clean end")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.sentences < SPOUTS or args.rate <= 0 or args.latency_secs <= 0 \
            or args.step_ms <= 0:
        parser.error("--runs >= 1, --sentences >= 2, --rate > 0, --latency-secs > 0 and "
                     "--step-ms > 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C even if started ignoring it
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    report_json: dict = {"machine": machine_info(),
                         "args": {k: str(v) if isinstance(v, Path) else v
                                  for k, v in vars(args).items()}}
    work_root = Path(tempfile.mkdtemp(prefix="heron_spark_bench_et_"))
    spark, code, bench = None, 0, None
    event: list[dict] = []
    processing: list[dict] = []
    delay: list[dict] = []
    try:
        began = time.monotonic()
        corpus, generated = corpus_file(args.sentences, args.cache_dir)
        shuffle_path, shuffle = shuffle_file(args.sentences, args.cache_dir)
        expected_words = count_corpus(corpus)
        expected_windows = corpus_windows(corpus, shuffle, args.step_ms)
        report_json["corpus"] = {"path": str(corpus), "sentences": args.sentences,
                                 "words": sum(expected_words.values()),
                                 "event_time_windows": len(expected_windows)}
        print(f"corpus: {corpus} ({'generated' if generated else 'cached'}; "
              f"{args.sentences:,} sentences, {sum(expected_words.values()):,} words over "
              f"{len(expected_windows):,} event-time windows of {WINDOW_MS} ms, out of order by "
              f"up to {SHUFFLE_MS} ms; {time.monotonic() - began:.1f} s)", flush=True)
        began = time.monotonic()
        spark = bench_env.local_session("local[*]", "heron_spark-bench-event-time",
                                        {"spark.ui.showConsoleProgress": "false"})
        print(f"Spark {spark.version} session on {spark.sparkContext.master} in "
              f"{time.monotonic() - began:.1f} s; work folder {work_root}", flush=True)
        print(f"\n== {SPOUTS} sentence / {SPLITTERS} split / {COUNTERS} count tasks (1 s tumbling "
              f"windows), {CONTAINERS} stmgrs, local[*], at most once; plain user code", flush=True)
        bench = Bench(args, spark, work_root, corpus, shuffle_path, expected_windows,
                      expected_words)
        for i in range(args.runs if "throughput" in args.phases else 0):
            pair = ((EVENT_TIME, event), (PROCESSING_TIME, processing))
            for kind, runs in (pair if i % 2 == 0 else pair[::-1]):  # each goes first in turn
                r = bench.run_once(kind, "throughput")
                runs.append(r)
                if i == 0 and kind == EVENT_TIME:
                    print(f"  placement: "
                          f"{'; '.join(f'{k}: {v}' for k, v in r['placement'].items())}")
                print(f"  {kind} throughput run {i + 1}: {r['words']:,} words in {r['windows']:,} "
                      f"windows (exact counts verified), {r['words_per_s']:,.0f} words/s, "
                      f"start-up {r['startup_running_s']:.2f} s to RUNNING, "
                      f"{r['whole_run_s']:.1f} s in all", flush=True)
        for i in range(args.runs if "delay" in args.phases else 0):
            r = bench.run_once(EVENT_TIME, "delay")
            delay.append(r)
            print(f"  {EVENT_TIME} delay run {i + 1}: {r['words']:,} words emitted at "
                  f"{r['offered_words_per_s']:,.0f} words/s (asked {args.rate:,.0f}; exact window "
                  f"counts verified), watermark delay p50 {r['delay_p50_ms']:,.0f} ms, p99 "
                  f"{r['delay_p99_ms']:,.0f} ms, max {r['delay_max_ms']:,.0f} ms over "
                  f"{r['delay_samples']} watermark advances; spouts at most "
                  f"{r['spout_max_lag_s']:.2f} s behind their schedule", flush=True)
            if r["offered_words_per_s"] < 0.95 * args.rate:
                print(f"  WARNING: the spouts emitted {r['offered_words_per_s']:,.0f} words/s, "
                      f"below the asked {args.rate:,.0f}: the topology cannot keep up", flush=True)
        report_json["summary"] = report(args, event, processing, delay)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping the topology and every process the benchmark started",
              file=sys.stderr, flush=True)
        code = 130
    except (BenchmarkError, TopologyRuntimeError, TimeoutError) as exc:
        print(f"BENCHMARK FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        clean_up(bench, spark, work_root, keep=code == 1 or args.keep_work)
    if args.json is not None:
        report_json.update({"exit_code": code, "event_time_runs": event,
                            "processing_time_runs": processing, "delay_runs": delay})
        args.json.write_text(json.dumps(report_json, indent=2, default=str))
        print(f"figures written to {args.json}")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
