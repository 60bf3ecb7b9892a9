"""Word-count benchmark: throughput, latency, start-up, memory and CPU per process role.

Corpus: N sentences (--sentences, default 1,000,000) of 10 words over the vocabulary
``w1..w10000``; word rank k is drawn with p(k) proportional to k^-1.2 by numpy
``default_rng(42)``. It is generated into a file once and cached under
``~/.cache/heron_spark_bench/`` (keyed by N).

Topology: ``sentence`` spout (2 tasks; task ``index`` reads the lines ``i % 2 == index``) ->
``split`` bolt (2 tasks, shuffle) -> ``count`` bolt (2 tasks, fields grouping on ``word``),
``topology.stmgrs: 2``, Spark ``local[*]``. The tuple-API modes run in two styles (--styles,
default both; ``wc_topologies`` has the code): ``plain``, written the way the README and heronpy
teach (``tup.values``, ``self.emit(..., anchors=[tup])``, ``self.ack(tup)``, a spout with a
``pending`` dict and ``ack``/``fail``) in the burst shape of a spout reading files, Kafka or
sockets (each ``next_tuple`` emits the next 32 lines of its share), and ``tuned``, written for
the engine (tuples read by index, ``process`` swapped for a closure, 64 lines per
``next_tuple``). Each figure is labelled
with its mode and style (``ATLEAST_ONCE plain``). Every tuple carries its sentence's emit time
(``time.time()`` in the spout); latency is the count bolt's ``process`` time minus it.

Modes (--modes): ATMOST_ONCE; ATLEAST_ONCE (sentences emitted with message ids, words anchored
to their sentence, both bolts ack; a failed sentence is replayed); EFFECTIVELY_ONCE (no acks;
the spouts checkpoint their read position and the count bolt its counts every
--checkpoint-secs, default 1 s: markers through the topology, aligned by the stmgrs, state
pickled to the local checkpoint store; reports how many checkpoints committed and how long
one took, start to commit); BATCH (the Arrow ``process_batch`` API).

Each mode (and style) runs --runs times (default 3) each of two phases (--phases picks):
- throughput: spouts unpaced, one pass over the corpus; words/s from the first emit to the
  last count; the counts are checked exactly against ``collections.Counter`` (a mismatch
  stops the benchmark with exit code 1);
- latency: spouts paced to --rate words/s in total (default 200,000) for --latency-secs
  (default 20 s), cycling over the corpus; p50/p99 over every --sample-every'th word. The
  stamp is the actual emit time: when flow control holds the spouts back, the time they spend
  behind their schedule is not in the latency; each run prints how far behind they fell, and
  its achieved rate (a warning if below 95% of --rate).
Both phases also measure start-up time (``submit()`` call to RUNNING, and to the first word
counted), and, by sampling ``/proc`` every --sample-interval s, CPU seconds (utime+stime) and
peak RSS (VmHWM) per process role: driver (this process), Spark JVM, Spark Python workers
(they run the container supervisors), stmgr, metrics manager and each component's instances.
CPU is summed per role (processes alive before the run, like the driver and the JVM, count
from their CPU time at submit), peak RSS is the largest process of the role. Sampling misses
at most one interval of each process's last CPU time; the driver's CPU includes the sampler.
The start-up and peak RSS lines are from the throughput runs (--json has both phases).

--tls both runs each mode and style with ``heron.tls.enabled`` off, then on (TLS 1.3 with
mutual authentication on every TCP link: here the two stmgrs' link and the TMaster's; an
instance and its stmgr talk over a Unix socket, which stays plain), labelled ``, TLS``, and
prints on against off.

Printed: the machine's CPU count and load average, then per mode one line per metric as the
median of the runs followed by every run's figure, and a CPU table per role. --json PATH also
writes every figure. Every process the benchmark starts is stopped when it ends, Ctrl-C too.

This file is the command line and the runs; the topologies and the corpus are in
``wc_topologies.py``, the /proc sampling and the printed report in ``wc_report.py``, and
the paths, environment and Spark session (shared with ``chaos_soak.py``) in ``bench_env.py``.

Run from the repository root (the full-size figures take a while; smoke test first):
    .venv/bin/python benchmarks/word_count.py
    .venv/bin/python benchmarks/word_count.py --runs 1 --sentences 20000 --latency-secs 3
        [--modes ATMOST_ONCE,ATLEAST_ONCE,BATCH] [--styles plain] [--phases throughput]
        [--rate 200000] [--lines-per-call 1] [--tls both] [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import math
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import bench_env  # first: the paths and environment the topology's processes inherit

bench_env.prepare()

import cloudpickle  # noqa: E402  (the copy heron_spark pickles topologies with)

import wc_topologies  # noqa: E402
from heron_spark import submit  # noqa: E402
from heron_spark.errors import TopologyRuntimeError  # noqa: E402
from wc_report import (ProcessSampler, kill_descendants, latency_histogram,  # noqa: E402
                       machine_info, quantile, report_mode)
from wc_topologies import (CONTAINERS, COUNTERS, SPLITTERS, SPOUTS,  # noqa: E402
                           STYLES, WORDS_PER_SENTENCE, build, build_batch, corpus_file,
                           count_corpus)

# The topologies travel by value, as when they were defined in this file: the topology's
# processes import neither wc_topologies nor what only the other mode's classes use (pyarrow).
cloudpickle.register_pickle_by_value(wc_topologies)

MODES = ("ATMOST_ONCE", "ATLEAST_ONCE", "EFFECTIVELY_ONCE", "BATCH")
PHASES = ("throughput", "latency")
LIVE = bench_env.LIVE


# ---- runs ----------------------------------------------------------------------------------
class BenchmarkError(RuntimeError):
    """A run went wrong: wrong counts, a failed topology, processes left behind."""


class Bench:
    def __init__(self, args, spark, work_root: Path, corpus: Path,
                 expected: collections.Counter) -> None:
        self.args = args
        self.spark = spark
        self.work_root = work_root
        self.corpus = corpus
        self.expected = expected
        self.handle = None  # the live topology, killed on the way out
        self.run_number = 0
        self.conf = {"heron.statemgr": f"file://{work_root / 'state'}",
                     "heron.work.dir": str(work_root / "work")}
        if args.flush_ms is not None:
            self.conf["heron.batch.flush.interval.ms"] = args.flush_ms
        if args.linger_ms is not None:
            self.conf["heron.batch.linger.ms"] = args.linger_ms

    def run_once(self, mode: str, phase: str, style: str | None = None) -> dict:
        args = self.args
        self.run_number += 1
        out_dir = self.work_root / f"run-{self.run_number:03d}-{mode}-{style or 'batch'}-{phase}"
        out_dir.mkdir(parents=True)
        if phase == "throughput":
            quota, rate_per_task, sample_every = 0, 0.0, 0
        else:
            quota = max(1, round(args.rate * args.latency_secs / WORDS_PER_SENTENCE / SPOUTS))
            rate_per_task, sample_every = args.rate / SPOUTS, args.sample_every
        if mode == "BATCH":
            topology = build_batch(self.corpus, out_dir, quota, rate_per_task, sample_every,
                                   args.batch_rows)
        else:
            topology = build(mode, self.corpus, out_dir, quota, rate_per_task, sample_every,
                             args.max_pending, args.checkpoint_secs, style or "plain",
                             args.lines_per_call)
        handle, placement, roles, submitted = run_to_end(self, topology, f"{mode} {phase}", args,
                                                         tuple(args.sample_roots))
        return self._measure(mode, style, phase, out_dir, quota, submitted, handle, placement,
                             roles)

    def _measure(self, mode, style, phase, out_dir, quota, submitted, handle, placement,
                 roles) -> dict:
        results = [json.loads(p.read_text()) for p in sorted(out_dir.glob("count-*.json"))]
        spouts = [json.loads(p.read_text()) for p in sorted(out_dir.glob("spout-*.json"))]
        if len(results) != COUNTERS:
            raise BenchmarkError(f"{mode} {phase}: {len(results)} of {COUNTERS} count tasks "
                                 f"reported their counts (see {out_dir})")
        words = sum(r["words"] for r in results)
        replayed = sum(s["replayed"] for s in spouts)
        counted = [r for r in results if r["words"]]
        first_emit = min((s["first_emit"] for s in spouts if s.get("first_emit")),
                         default=math.nan)
        first_count = min(r["first"] for r in counted) if counted else math.nan
        last_count = max(r["last"] for r in counted) if counted else math.nan
        run = {"mode": mode, "style": style, "phase": phase, "words": words, "sentences_replayed": replayed,
               "words_per_s": words / max(last_count - first_emit, 1e-9),
               "startup_running_s": (handle.started_at or math.nan) - submitted,
               "startup_first_count_s": first_count - submitted,
               "whole_run_s": (handle.ended_at or math.nan) - submitted,
               "placement": placement, "roles": roles}
        checkpoint = (handle.status_detail() or {}).get("checkpoint")
        if checkpoint:
            run["checkpoints"] = checkpoint["commits"]
            run["checkpoint_ms_mean"] = 1000 * checkpoint["commit_secs_mean"]
            run["checkpoint_ms_max"] = 1000 * checkpoint["commit_secs_max"]
        if phase == "throughput":
            self._verify(mode, results, words, replayed, out_dir)
        else:
            expected_words = quota * SPOUTS * WORDS_PER_SENTENCE
            run["expected_words"] = expected_words
            run["spout_max_lag_s"] = max((s["max_lag_s"] for s in spouts), default=math.nan)
            if words != expected_words:
                print(f"  WARNING: {mode} latency run counted {words:,} words, expected "
                      f"{expected_words:,} ({replayed} sentences replayed)", flush=True)
            samples = sorted(s for r in results for s in r["samples"])
            run["latency_samples"] = len(samples)
            run["p50_ms"] = 1000 * quantile(samples, 0.50)
            run["p99_ms"] = 1000 * quantile(samples, 0.99)
            run["max_ms"] = 1000 * samples[-1] if samples else math.nan
            run["latency_histogram"] = latency_histogram(samples)
        return run

    def _verify(self, mode, results, words, replayed, out_dir) -> None:
        counted: collections.Counter = collections.Counter()
        shared = set()
        for r in results:
            shared |= counted.keys() & r["counts"].keys()
            counted.update(r["counts"])
        problems = []
        if shared:
            problems.append(f"{len(shared)} words counted by more than one count task "
                            f"(fields grouping broken), e.g. {sorted(shared)[:5]}")
        if counted != self.expected:
            short = self.expected - counted
            extra = counted - self.expected
            problems.append(f"{words:,} words counted, {sum(self.expected.values()):,} expected; "
                            f"{sum(short.values()):,} missing over {len(short)} words "
                            f"(e.g. {short.most_common(3)}), {sum(extra.values()):,} extra over "
                            f"{len(extra)} words (e.g. {extra.most_common(3)}); "
                            f"{replayed} sentences replayed")
        if problems:
            raise BenchmarkError(f"{mode} throughput run: counts differ from "
                                 f"collections.Counter: {'; '.join(problems)} (files: {out_dir})")


def _wait_gone(sampler: ProcessSampler, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        sampler.sample()
        left = sampler.topology_alive()
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def _placement(plan) -> dict[str, list[str]]:
    if plan is None:
        return {}
    out: dict[str, list[str]] = {}
    for instance in sorted(plan.instances, key=lambda i: i.task_id):
        out.setdefault(f"container {instance.container_index}", []).append(
            f"{instance.component}[{instance.task_id}]")
    return out


# ---- main ----------------------------------------------------------------------------------
def _session(master: str):
    if master.startswith("spark://"):  # a standalone cluster (benchmarks/tls_hosts.py)
        return bench_env.cluster_session(master, "heron_spark-bench-word-count", CONTAINERS)
    return bench_env.local_session(master, "heron_spark-bench-word-count",
                                   {"spark.ui.showConsoleProgress": "false"})


def run_to_end(bench, topology, label: str, args, sample_roots: tuple[int, ...] = ()) -> tuple:
    """Submit ``topology`` on ``bench``'s session and wait for it to end, sampling its processes.

    Return (handle, placement, CPU and memory per role, the submit's wall-clock time). Raise
    ``BenchmarkError`` (named ``label``) when it does not run, ends otherwise than FINISHED, or
    leaves processes behind. ``bench.handle`` is the running topology meanwhile.
    ``sample_roots``: more processes whose descendants are sampled (``--sample-roots``).
    """
    sampler = ProcessSampler(args.sample_interval, sample_roots).start()
    bench.handle = None
    submitted = time.time()
    try:
        bench.handle = handle = submit(topology, spark=bench.spark, conf=bench.conf)
        if not handle.wait_running(timeout=args.timeout):
            handle.wait(timeout=30)  # raises the failure, if it failed
            raise BenchmarkError(f"{label}: not RUNNING after {args.timeout} s ({handle.status})")
        placement = _placement(handle.physical_plan)
        status = handle.wait(timeout=args.timeout)
    finally:
        if bench.handle is not None and bench.handle.status in LIVE:
            bench.handle.kill()
        left = _wait_gone(sampler, 30.0)
        roles = sampler.stop()
    if left:
        raise BenchmarkError(f"{label}: topology processes still alive 30 s after the end: {left}")
    if status != "FINISHED":
        raise BenchmarkError(f"{label}: the topology ended {status}")
    return handle, placement, roles, submitted


def clean_up(bench, spark, work_root: Path, keep: bool) -> None:
    """Stop the running topology, Spark and every process left; remove the work folder unless ``keep``.

    A second Ctrl-C meanwhile is ignored. ``bench`` (its ``handle``) and ``spark`` may be None.
    """
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # no second Ctrl-C mid-cleanup
    try:
        if bench is not None and bench.handle is not None and bench.handle.status in LIVE:
            bench.handle.kill()
        _stop_spark(spark)
        leftovers = kill_descendants()
        if leftovers:
            print(f"WARNING: killed {len(leftovers)} leftover process(es): "
                  + "; ".join(leftovers), file=sys.stderr)
    finally:
        signal.signal(signal.SIGINT, previous)
    if not keep:
        shutil.rmtree(work_root, ignore_errors=True)
    else:
        print(f"work folder (logs, per-run outputs) kept: {work_root}", file=sys.stderr)


def _stop_spark(spark) -> None:
    if spark is None:
        return
    jvm = getattr(spark.sparkContext._gateway, "proc", None)
    try:
        spark.stop()
    except Exception as exc:  # noqa: BLE001 - going down anyway; the processes are killed next
        print(f"stopping Spark: {exc}", file=sys.stderr)
    if jvm is not None and jvm.poll() is None:
        jvm.terminate()
        try:
            jvm.wait(15)
        except Exception:  # noqa: BLE001 - killed below by pid
            pass


def _parse_modes(text: str) -> list[str]:
    modes = [m.strip().upper() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"unknown mode(s) {unknown}: choose from {', '.join(MODES)}")
    return modes


def _choices(allowed: tuple[str, ...], what: str):
    def parse(text: str) -> list[str]:
        picked = [c.strip().lower() for c in text.split(",") if c.strip()]
        unknown = [c for c in picked if c not in allowed]
        if unknown or not picked:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {unknown}: choose from {', '.join(allowed)}")
        return [c for c in allowed if c in picked]
    return parse


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", type=_parse_modes, default=list(MODES),
                        help="comma-separated, of ATMOST_ONCE, ATLEAST_ONCE, BATCH (default: all)")
    parser.add_argument("--styles", type=_choices(STYLES, "style(s)"), default=list(STYLES),
                        help="comma-separated, of plain (the README's way), tuned (written for "
                             "the engine); tuple-API modes only (default: both)")
    parser.add_argument("--phases", type=_choices(PHASES, "phase(s)"), default=list(PHASES),
                        help="comma-separated, of throughput, latency (default: both)")
    parser.add_argument("--runs", type=int, default=3, help="runs per phase and mode (default 3)")
    parser.add_argument("--sentences", type=int, default=1_000_000,
                        help="corpus size N in sentences of 10 words (default 1,000,000)")
    parser.add_argument("--rate", type=float, default=200_000,
                        help="offered words/s in total for the latency runs (default 200,000)")
    parser.add_argument("--latency-secs", type=float, default=20.0,
                        help="length of each latency run at --rate (default 20)")
    parser.add_argument("--sample-every", type=int, default=16,
                        help="latency sample: every n-th word per count task (default 16)")
    parser.add_argument("--sample-interval", type=float, default=0.2,
                        help="seconds between /proc samples of CPU and RSS (default 0.2)")
    parser.add_argument("--checkpoint-secs", type=float, default=1.0,
                        help="EFFECTIVELY_ONCE: checkpoint interval (default 1 s)")
    parser.add_argument("--max-pending", type=int, default=0,
                        help="topology.max.spout.pending under ATLEAST_ONCE (default 0: no limit; "
                             "the tuple water marks bound what is in flight)")
    parser.add_argument("--lines-per-call", type=int, default=32,
                        help="plain style: lines the spout emits per next_tuple (default 32, "
                             "the burst of a spout reading files, Kafka or sockets; 1: one line "
                             "a call)")
    parser.add_argument("--master", default="local[*]",
                        help="Spark master (default local[*]); a spark:// URL runs on that "
                             "standalone cluster, one core per executor (benchmarks/tls_hosts.py)")
    parser.add_argument("--sample-roots", type=lambda text: [int(p) for p in text.split(",") if p],
                        default=[], help="pids whose descendants are sampled too (a standalone "
                                         "cluster's worker JVMs; benchmarks/tls_hosts.py)")
    parser.add_argument("--tls", choices=("off", "on", "both"), default="off",
                        help="heron.tls.enabled for the runs: off (default), on, or both (each "
                             "mode and style with TLS off, then on, in one series)")
    parser.add_argument("--batch-rows", type=int, default=8192,
                        help="BATCH: sentences per batch the spouts emit at most (default 8192)")
    parser.add_argument("--flush-ms", type=float, default=None,
                        help="heron.batch.flush.interval.ms (default: the configured one)")
    parser.add_argument("--linger-ms", type=float, default=None,
                        help="heron.batch.linger.ms (default: the configured one)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run at most")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "heron_spark_bench")
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    parser.add_argument("--keep-work", action="store_true",
                        help="keep the work folder (logs, per-run outputs) after a clean end")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.sentences < SPOUTS or args.rate <= 0 or args.latency_secs <= 0:
        parser.error("--runs >= 1, --sentences >= 2, --rate > 0 and --latency-secs > 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C even if started ignoring it
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    report: dict = {"machine": machine_info(),
                    "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                    "modes": {}}
    work_root = Path(tempfile.mkdtemp(prefix="heron_spark_bench_"))
    spark, code, bench = None, 0, None
    try:
        began = time.monotonic()
        corpus, generated = corpus_file(args.sentences, args.cache_dir)
        expected = count_corpus(corpus)
        report["corpus"] = {"path": str(corpus), "sentences": args.sentences,
                            "words": sum(expected.values()), "distinct_words": len(expected),
                            "top_word_share": expected.most_common(1)[0][1] / sum(expected.values())}
        print(f"corpus: {corpus} ({'generated' if generated else 'cached'}; "
              f"{args.sentences:,} sentences, {sum(expected.values()):,} words, {len(expected):,} "
              f"distinct, top word {report['corpus']['top_word_share']:.1%}; "
              f"{time.monotonic() - began:.1f} s)", flush=True)
        began = time.monotonic()
        spark = _session(args.master)
        print(f"Spark {spark.version} session on {spark.sparkContext.master} "
              f"(default parallelism {spark.sparkContext.defaultParallelism}) in "
              f"{time.monotonic() - began:.1f} s; work folder {work_root}", flush=True)
        bench = Bench(args, spark, work_root, corpus, expected)
        settings = {"off": [False], "on": [True], "both": [False, True]}[args.tls]
        for mode in args.modes:
            for style in ([None] if mode == "BATCH" else args.styles):
                for tls in settings:
                    bench.conf["heron.tls.enabled"] = tls
                    label = (mode if style is None else f"{mode} {style}") + (", TLS" if tls else "")
                    report["modes"][label] = bench_mode(bench, mode, style, args, label)
                if len(settings) == 2:
                    report_tls(report["modes"], mode if style is None else f"{mode} {style}")
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
        report["exit_code"] = code
        args.json.write_text(json.dumps(report, indent=2, default=str))
        print(f"figures written to {args.json}")
    return code


def report_tls(modes: dict, label: str) -> None:
    """Print TLS on against off for ``label``: throughput, p99 and start-up, medians."""
    off, on = modes[label]["summary"], modes[f"{label}, TLS"]["summary"]
    parts = []
    for key, name in (("words_per_s", "words/s"), ("p99_ms", "p99 ms"),
                      ("startup_running_s", "start-up s to RUNNING")):
        a, b = off.get(key), on.get(key)
        if a is None or b is None or not (a == a and b == b) or not a:  # missing or NaN
            continue
        shown = "{:,.0f}" if key == "words_per_s" else "{:.2f}"
        parts.append(f"{name} {shown.format(b)} vs {shown.format(a)} ({b / a - 1:+.1%})")
    print(f"{label}: TLS on vs off (medians): {'; '.join(parts)}", flush=True)


def bench_mode(bench: Bench, mode: str, style: str | None, args, label: str) -> dict:
    """Run ``mode`` in ``style`` (None: the batch API) for each phase asked; print its report."""
    pending = f", max spout pending {args.max_pending}" if args.max_pending and \
        mode == "ATLEAST_ONCE" else ""
    written = {None: "the Arrow batch API",
               "plain": f"plain user code, as the README teaches, {args.lines_per_call} "
                        f"line(s) per next_tuple",
               "tuned": "user code tuned for the engine"}[style]
    print(f"\n== {label}: {SPOUTS} sentence / {SPLITTERS} split / {COUNTERS} count tasks, "
          f"{CONTAINERS} stmgrs, {args.master}{pending}; {written}", flush=True)
    fast, paced = [], []
    for i in range(args.runs if "throughput" in args.phases else 0):
        r = bench.run_once(mode, "throughput", style)
        fast.append(r)
        if i == 0:
            print(f"  placement: {'; '.join(f'{k}: {v}' for k, v in r['placement'].items())}")
        print(f"  {label} throughput run {i + 1}: {r['words']:,} words (exact counts verified), "
              f"{r['words_per_s']:,.0f} words/s, {r['sentences_replayed']} sentences replayed, "
              f"start-up {r['startup_running_s']:.2f} s to RUNNING, "
              f"{r['startup_first_count_s']:.2f} s to first count, {r['whole_run_s']:.1f} s in all",
              flush=True)
    for i in range(args.runs if "latency" in args.phases else 0):
        r = bench.run_once(mode, "latency", style)
        paced.append(r)
        print(f"  {label} latency run {i + 1}: {r['words']:,} words at {r['words_per_s']:,.0f} "
              f"words/s (offered {args.rate:,.0f}), p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} "
              f"ms, max {r['max_ms']:.1f} ms over {r['latency_samples']:,} samples; spouts at most "
              f"{r['spout_max_lag_s']:.2f} s behind their schedule", flush=True)
        if r["words_per_s"] < 0.95 * args.rate:
            print(f"  WARNING: the latency run reached {r['words_per_s']:,.0f} words/s, below the "
                  f"offered {args.rate:,.0f}: the topology cannot keep up, latency is queueing",
                  flush=True)
    summary = report_mode(label, args, fast, paced)
    return {"summary": summary, "throughput_runs": fast, "latency_runs": paced}


if __name__ == "__main__":
    raise SystemExit(main())
