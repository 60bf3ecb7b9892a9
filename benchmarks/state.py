"""State benchmark: a stateful count of K keys under effectively once, with a kill mid-run.

Topology, written as the README and the state guide teach: a ``keys`` spout (1 task) emits
``key-{i % K}`` for i in 0..N-1, one tuple per ``next_tuple`` (its position is its state), and
a ``count`` bolt (2 tasks, fields grouping on the key, a ``StatefulComponent``) counts with
``state.put(key, (state.get(key) or 0) + 1)``. ``topology.stmgrs: 2``, 1 s checkpoints
(--checkpoint-secs), ``heron.state.backend`` from --backend (``memory`` or ``rocksdb``), Spark
``local[*]``.

Each run submits the topology, and once the counting tasks have counted --kill-at of the N
tuples (default half) it reads the figures of the run so far, then ``kill -9``s the first
counting instance process and lets the topology roll back to its last checkpoint and finish.
Printed per run:

- throughput: tuples counted by both counting tasks before the kill, over the time from the
  first count to the last one before it (each task rewrites a small progress file every
  0.2 s: within 0.2 s);
- longest gap: the longest time between two consecutive ``process`` calls on a counting task
  before the kill (input flows all the time: the spout is unpaced), which is what a checkpoint
  holds the data path up for;
- bytes per checkpoint: the bytes the last checkpoint before the kill wrote to the checkpoint
  store, summed over the counting tasks (the ``__checkpoint-uploaded-bytes`` task metric; on a
  tree without it, the size of the counting tasks' files of the newest checkpoint);
- restore: from the kill to the first ``process`` call of the restarted counting task;
- task RSS: the peak resident set (VmHWM) of the counting instance processes before the kill,
  sampled every 0.2 s (not after it: at the end of input the bolt copies its counts into a
  dict to write them out, which is the benchmark's memory, not the state's).

Every run's final counts are checked exactly (each key counted N // K or N // K + 1 times, on
one task only); a mismatch stops the benchmark with exit code 1. Then per figure the median of
the runs and every run. Every process the benchmark starts is stopped when it ends; its
folders (under the temporary directory) are removed unless ``BENCH_KEEP=1``.

Run from the repository root (a quick default; the issue's sizes take a while):
    .venv/bin/python benchmarks/state.py
    .venv/bin/python benchmarks/state.py --keys 1000000 --tuples 3000000 --backend rocksdb
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import bench_env  # first: the paths and environment the topology's processes inherit

bench_env.prepare(bench_env.TESTS_DIR)

import cloudpickle  # noqa: E402

import fault_support  # noqa: E402  (finding and killing a topology's processes)
from heron_spark import Bolt, Grouping, Spout, TopologyBuilder, submit  # noqa: E402
from heron_spark.api.state import StatefulComponent  # noqa: E402
from wc_report import kill_descendants  # noqa: E402

if __name__ != "__main__":  # imported (by a test): the topology travels by value all the same
    cloudpickle.register_pickle_by_value(sys.modules[__name__])

KEYS = "bench.keys"
TUPLES = "bench.tuples"
OUT = "bench.out.dir"
REPORT_SECS = 0.2
TOPOLOGY = "bench_state"


# ---- the topology --------------------------------------------------------------------------
class KeySpout(Spout, StatefulComponent):
    """Emits ``key-{i % K}`` for i in 0..N-1; its position is checkpointed."""

    outputs = ["key"]

    def init_state(self, state):
        self.state = state

    def pre_save(self, checkpoint_id):
        self.state.put("next", self.next)

    def initialize(self, config, context):
        self.keys = int(config[KEYS])
        self.tuples = int(config[TUPLES])
        self.next = self.state.get("next") or 0
        self.done = False

    def next_tuple(self):
        if self.next < self.tuples:
            self.emit([f"key-{self.next % self.keys}"])
            self.next += 1
        elif not self.done:
            self.done = True
            self.declare_exhausted()


class CountBolt(Bolt, StatefulComponent):
    """Counts keys in its state; reports its progress and the longest gap between tuples."""

    def init_state(self, state):
        self.counts = state

    def initialize(self, config, context):
        self.out = Path(config[OUT])
        self.task = context.get_task_id()
        self.first = None       # wall-clock time of this process's first process()
        self.last = None        # perf_counter of the last process()
        self.max_gap = 0.0
        self.seen = 0
        self.next_report = 0.0

    def process(self, tup):
        now = time.perf_counter()
        if self.last is None:
            self.first = time.time()
        elif now - self.last > self.max_gap:
            self.max_gap = now - self.last
        self.last = now
        key = tup.values[0]
        self.counts.put(key, (self.counts.get(key) or 0) + 1)
        self.seen += 1
        if now >= self.next_report:
            self.next_report = now + REPORT_SECS
            self.report()

    def report(self):
        _write_json(self.out / f"progress-{self.task}-{os.getpid()}.json", {
            "task": self.task, "pid": os.getpid(), "seen": self.seen, "first": self.first,
            "at": time.time(), "max_gap": self.max_gap})

    def end_of_input(self):
        self.report()
        _write_json(self.out / f"counts-{self.task}.json", dict(self.counts.items()))


def _write_json(path: Path, body) -> None:
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(body))
    os.replace(temp, path)


def build(keys: int, tuples: int, backend: str, checkpoint_secs: float, out: Path):
    builder = TopologyBuilder(TOPOLOGY)
    spout = builder.add_spout("keys", KeySpout, par=1)
    builder.add_bolt("count", CountBolt, par=2, inputs={spout: Grouping.fields("key")})
    config = {"topology.stmgrs": 2, "topology.reliability.mode": "EFFECTIVELY_ONCE",
              "topology.stateful.checkpoint.interval.seconds": checkpoint_secs,
              KEYS: keys, TUPLES: tuples, OUT: str(out)}
    if backend != "memory":  # the default; a tree without state backends knows no such key
        config["heron.state.backend"] = backend
    builder.set_config(config)
    return builder


# ---- one run -------------------------------------------------------------------------------
class BenchmarkError(RuntimeError):
    """A run went wrong: wrong counts, a failed topology, no restore."""


def _progress(out: Path) -> list[dict]:
    found = []
    for path in out.glob("progress-*.json"):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass  # being replaced
    return found


def _peak_rss(pids, peak: int) -> int:
    for pid in pids:
        peak = max(peak, fault_support.peak_rss_bytes(pid))
    return peak


def _checkpoint_bytes(handle, work: Path) -> float:
    """Bytes the last checkpoint wrote for the counting tasks (see the module docstring)."""
    try:
        metrics = handle.metrics().get("count", {})
    except Exception:  # noqa: BLE001 - no TMaster answer: fall back to the files
        metrics = {}
    if "__checkpoint-uploaded-bytes" in metrics:
        return metrics["__checkpoint-uploaded-bytes"]
    base = work / "checkpoints" / TOPOLOGY
    ids = sorted(int(p.name) for p in base.glob("*") if p.name.isdigit()) if base.exists() else []
    if not ids:
        return float("nan")
    tasks = {task for pid in fault_support.find(work, "instance", component="count")
             if (task := fault_support.task_of(pid)) is not None}
    return float(sum(p.stat().st_size for p in (base / str(ids[-1])).glob("*.state")
                     if p.stem.isdigit() and int(p.stem) in tasks))


def run_once(args, spark, root: Path, number: int) -> dict:
    out = root / f"run-{number}"
    work = root / f"work-{number}"
    out.mkdir(parents=True)
    conf = {"heron.work.dir": str(work), "heron.statemgr": f"file://{root / 'state'}"}
    topology = build(args.keys, args.tuples, args.backend, args.checkpoint_secs, out)
    handle = submit(topology, spark=spark, conf=conf)
    peak = 0
    try:
        if not handle.wait_running(timeout=args.timeout):
            handle.wait(timeout=30)
            raise BenchmarkError(f"not RUNNING after {args.timeout} s ({handle.status})")
        deadline = time.time() + args.timeout
        kill_at = args.tuples * args.kill_at
        while True:
            pids = fault_support.find(work, "instance", component="count")
            peak = _peak_rss(pids, peak)
            progress = _progress(out)
            if sum(p["seen"] for p in progress) >= kill_at and len(progress) == 2:
                break
            if handle.status not in bench_env.LIVE or time.time() > deadline:
                raise BenchmarkError(f"the run ended ({handle.status}) before the kill; "
                                     f"use more --tuples")
            time.sleep(REPORT_SECS / 2)
        before = _progress(out)
        checkpoint_bytes = _checkpoint_bytes(handle, work)
        victim = pids[0]
        task = fault_support.task_of(victim)
        killed_at = time.time()
        os.kill(victim, signal.SIGKILL)
        restore = None
        while True:
            if restore is None:
                again = [p for p in _progress(out) if p["task"] == task and p["pid"] != victim]
                if again:
                    restore = again[0]["first"] - killed_at
            if handle.status not in bench_env.LIVE:
                break
            if time.time() > deadline:
                raise BenchmarkError(f"not FINISHED {args.timeout} s after the start")
            time.sleep(REPORT_SECS / 2)
        status = handle.wait(timeout=60)
    finally:
        if handle.status in bench_env.LIVE:
            handle.kill()
    if status != "FINISHED":
        raise BenchmarkError(f"the topology ended {status}")
    if restore is None:
        raise BenchmarkError(f"task {task} never processed a tuple again after the kill")
    _check_counts(out, args.keys, args.tuples)
    seen = sum(p["seen"] for p in before)
    span = max(p["at"] for p in before) - min(p["first"] for p in before)
    shutil.rmtree(work, ignore_errors=True)
    return {"throughput": seen / span, "max_gap_ms": max(p["max_gap"] for p in before) * 1000,
            "checkpoint_bytes": checkpoint_bytes, "restore_s": restore,
            "rss_mb": peak / 2**20}


def _check_counts(out: Path, keys: int, tuples: int) -> None:
    merged: dict[str, int] = {}
    for path in sorted(out.glob("counts-*.json")):
        counts = json.loads(path.read_text())
        twice = merged.keys() & counts.keys()
        if twice:
            raise BenchmarkError(f"{len(twice)} keys counted on two tasks, e.g. {min(twice)}")
        merged.update(counts)
    wrong = [j for j in range(keys)
             if merged.get(f"key-{j}") != tuples // keys + (j < tuples % keys)]
    if wrong or len(merged) != min(keys, tuples):
        raise BenchmarkError(f"wrong counts: {len(wrong)} keys off (e.g. key-{wrong[0]}: "
                             f"{merged.get(f'key-{wrong[0]}')}), {len(merged)} keys"
                             if wrong else f"wrong counts: {len(merged)} keys")


# ---- the report ----------------------------------------------------------------------------
FIGURES = [("throughput", "throughput tuples/s", "{:,.0f}"),
           ("max_gap_ms", "longest gap ms", "{:,.1f}"),
           ("checkpoint_bytes", "bytes per checkpoint", "{:,.0f}"),
           ("restore_s", "restore after kill s", "{:.2f}"),
           ("rss_mb", "count task peak RSS MB", "{:,.0f}")]


def report(args, runs: list[dict]) -> str:
    lines = [f"state: K={args.keys:,} keys, N={args.tuples:,} tuples, backend {args.backend}, "
             f"{args.checkpoint_secs:g} s checkpoints, {len(runs)} runs; "
             f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"]
    for key, label, fmt in FIGURES:
        values = [run[key] for run in runs]
        every = ", ".join(fmt.format(v) for v in values)
        lines.append(f"  {label:<24} median {fmt.format(statistics.median(values)):>12}   "
                     f"runs: {every}")
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=100_000, help="K distinct keys")
    parser.add_argument("--tuples", type=int, default=1_000_000, help="N tuples in all")
    parser.add_argument("--backend", choices=("memory", "rocksdb"), default="memory")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--checkpoint-secs", type=float, default=1.0)
    parser.add_argument("--kill-at", type=float, default=0.5,
                        help="kill once this share of the tuples is counted")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="heron-bench-state-"))
    spark = None
    try:
        spark = bench_env.local_session(args.master, "heron_spark-bench-state",
                                        {"spark.ui.showConsoleProgress": "false"})
        runs = []
        for number in range(1, args.runs + 1):
            runs.append(run_once(args, spark, root, number))
            print(f"run {number}: " + ", ".join(f"{label} {fmt.format(runs[-1][key])}"
                                                for key, label, fmt in FIGURES), flush=True)
        print(report(args, runs))
        if args.json:
            args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                             "runs": runs}, indent=1))
        return 0
    except BenchmarkError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if spark is not None:
            spark.stop()
        kill_descendants()
        if not os.environ.get("BENCH_KEEP"):
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
