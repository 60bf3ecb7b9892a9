"""Kafka word count, heron_spark against Spark Structured Streaming: records/s and latency.

One Apache Kafka 4.1 broker (``tests/kafka_support.Broker``: KRaft, one node, on loopback;
its jars from Maven Central through ``tests/jvm_support.py``) and one Spark session serve every
system. Input: --records (default 1,000,000) lines of 10 words (the word-count benchmark's Zipf
corpus, ``wc_topologies.corpus_file``), produced once to a source topic of 4 partitions. Each
system counts the words and writes running counts to a sink topic of its own, 1 partition
(``kafka_systems`` has the code of each):

- heron_spark at-most-once, at-least-once and effectively-once: ``KafkaSpout`` (2 tasks,
  ``kafka.bounded``) -> split (2) -> count (2, fields grouping; emits the changed counts every
  --emit-ms) -> ``KafkaSink`` (1), 2 containers; effectively-once checkpoints every
  --checkpoint-ms and writes each checkpoint's output in one Kafka transaction;
- heron_spark into Delta (``delta-effectively-once``): the effectively-once topology with
  ``DeltaSink`` (1 task) writing each committed checkpoint as one version of a Delta table
  (local, in the work folder) instead of a Kafka transaction; checkpoints every
  --throughput-checkpoint-ms / --delta-checkpoint-ms; its updates are read as versions
  appear in ``_delta_log`` (``kafka_systems.DeltaReader``, polled every 5 ms), the final
  counts with ``deltalake``;
- Spark micro-batch: Spark's Kafka source -> explode(split) -> groupBy(word).count ->
  Spark's Kafka sink, update mode, ``spark.sql.shuffle.partitions`` 2; ``availableNow`` for
  throughput, ``processingTime`` --spark-trigger-ms for latency;
- Spark real-time mode (``trigger(realTime=...)``, pyspark 4.3), when the query runs here: it
  needs a task slot per source partition and shuffle partition at once (6), so the session is
  ``local[6]`` (on 2 cores) unless --master says otherwise.

Per run and system, two phases:
- throughput: the whole source topic; records/s = records / (the last count's Kafka
  timestamp, or the last Delta version's commit time - the start of processing: a
  topology's ``started_at``, when its plan went out; a Spark query's first batch), and,
  beside it, from the ``submit`` / ``start`` call; the final counts, read back with
  ``read_committed`` (or ``deltalake``), must equal ``collections.Counter`` over the input;
- latency: a fresh source topic, records produced at --rate (default 20,000 records/s) for
  --latency-secs, each stamped with its produce time (its Kafka timestamp); a
  ``read_committed`` consumer of the sink topic stamps every update as it arrives; a word's
  latency is from its record's produce to the first update that counts it
  (``kafka_systems.latencies``); p50/p99 over every word of the records produced after
  --warmup-secs; the final counts must be exact here too. Under effectively-once an update is
  visible only when the checkpoint that covers it commits: the latency holds the checkpoint
  interval, as a ``read_committed`` reader sees it; its latency line also gives how many
  Kafka transactions the sink committed and the mean time between two (the checkpoint cadence
  reached, which the interval only asks for).

CPU seconds per process role (``wc_report.ProcessSampler``: driver, Spark JVM, Kafka broker,
stmgr, instances...) are sampled during every run. Printed: the machine line, per system and
figure the median and every run, a summary table, and the issue's targets (effectively-once
at least 3x Spark micro-batch records/s; effectively-once p99 < 50 ms at 20,000 records/s;
Kafka -> Delta effectively-once p99 from produce to a committed version under 2 x its
checkpoint interval).
Exit code 1 when any count is wrong. --json PATH writes every figure.

Run from the repository root (the full size takes a while; smoke test first):
    .venv/bin/python benchmarks/kafka.py
    .venv/bin/python benchmarks/kafka.py --records 20000 --runs 1 --latency-secs 5
        [--systems at-most-once,effectively-once,spark-micro-batch] [--phases throughput]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import bench_env  # first: the paths and environment the topology's processes inherit

bench_env.prepare(bench_env.TESTS_DIR)

import cloudpickle  # noqa: E402

import jvm_support  # noqa: E402 - tests/, on the path after prepare()
import kafka_systems as ks  # noqa: E402
from heron_spark import submit  # noqa: E402
from heron_spark.testing import wait_until  # noqa: E402
from kafka_support import Broker  # noqa: E402
from wc_report import ProcessSampler, machine_info, quantile  # noqa: E402
from wc_topologies import corpus_file, count_corpus  # noqa: E402
from word_count import BenchmarkError, clean_up, run_to_end  # noqa: E402

cloudpickle.register_pickle_by_value(ks)  # the bolts travel by value, as if defined here

PARTITIONS = 4
SHUFFLE_PARTITIONS = 2
HERON = (*ks.MODES, ks.DELTA)
SPARK = ("spark-micro-batch", "spark-real-time")
SYSTEMS = HERON + SPARK
PHASES = ("throughput", "latency")


# ---- one run of one system -------------------------------------------------------------------
class Runner:
    """Runs one system's phases on the shared broker, Spark session and input topic."""

    def __init__(self, args, spark, broker: Broker, work: Path, source: str,
                 expected: collections.Counter, paced_lines: list[str]) -> None:
        self.args, self.spark, self.broker, self.work = args, spark, broker, work
        self.source, self.expected = source, expected
        self.paced_lines = paced_lines
        self.paced_expected = collections.Counter(w for line in paced_lines for w in line.split())
        self.sql = spark.newSession()  # Spark's queries: their own SQL settings
        self.sql.conf.set("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        self.handle = None  # the live topology, killed by clean_up on the way out
        self.conf: dict = {}
        self.count = 0

    def _tag(self, system: str, phase: str) -> str:
        self.count += 1
        return f"{system.replace('-', '_')}_{phase[:3]}_{self.count}"

    def _heron_conf(self, tag: str) -> None:
        self.conf = {"heron.statemgr": f"file://{self.work / 'state' / tag}",
                     "heron.work.dir": str(self.work / "work" / tag)}

    def _sink(self, system: str, tag: str) -> str:
        """Create ``system``'s sink: a Kafka topic, or a Delta table's path (made by its sink)."""
        if system == ks.DELTA:
            return str(self.work / "delta" / tag)
        return self.broker.create_topic(1, f"out-{tag}")

    @staticmethod
    def _check_delta(path: str) -> tuple[collections.Counter, int, int]:
        """Return the table's final counts, its rows and its last commit's time (ms)."""
        from deltalake import DeltaTable

        counts, rows, _ = ks.delta_final_counts(path)
        last_ms = max((entry.get("timestamp", 0) for entry in DeltaTable(path).history(1)),
                      default=0)
        return counts, rows, last_ms

    def _check(self, sink: str, want: collections.Counter) -> tuple[list, str]:
        messages = self.broker.read_to_end(sink, 1, "read_committed")
        return messages, ks.mismatch(ks.final_counts(messages), want)

    # -- throughput
    def throughput(self, system: str) -> dict:
        tag = self._tag(system, "throughput")
        sink = self._sink(system, tag)
        if system in HERON:
            self._heron_conf(tag)
            topology = ks.build(tag, system, self.broker.servers, self.source, sink,
                                bounded=True, emit_secs=self.args.emit_ms / 1000.0,
                                checkpoint_secs=self.args.throughput_checkpoint_ms / 1000.0)
            handle, _, roles, submitted = run_to_end(self, topology, tag, self.args)
            started = handle.started_at
        else:
            roles, submitted, started = self._spark_throughput(system, tag, sink)
        if system == ks.DELTA:
            counts, updates, last_ms = self._check_delta(sink)
            wrong = ks.mismatch(counts, self.expected)
        else:
            messages, wrong = self._check(sink, self.expected)
            updates = len(messages)
            last_ms = max((m.timestamp()[1] for m in messages), default=0)
        if not updates:
            raise BenchmarkError(f"{tag}: nothing on the sink {sink!r}")
        last = last_ms / 1000.0
        records = self.args.records
        return {"records_per_s": records / max(1e-3, last - started),
                "records_per_s_from_submit": records / max(1e-3, last - submitted),
                "updates": updates, "exact": not wrong, "wrong": wrong,
                "cpu_s": {role: round(v["cpu_s"], 2) for role, v in roles.items()}}

    def _spark_throughput(self, system: str, tag: str, sink: str):
        sampler = ProcessSampler(self.args.sample_interval).start()
        try:
            submitted = time.time()
            if system == "spark-micro-batch":
                query = ks.spark_query(self.sql, self.broker.servers, self.source, sink,
                                       str(self.work / "spark" / tag), {"availableNow": True})
                if not query.awaitTermination(self.args.timeout):
                    query.stop()
                    raise BenchmarkError(f"{tag}: not done after {self.args.timeout} s")
                if query.exception() is not None:
                    raise BenchmarkError(f"{tag}: {query.exception()}")
                started = _progress_time(query.recentProgress[0])
            else:  # real-time mode never ends by itself: stop it once the counts are complete
                query = ks.spark_query(self.sql, self.broker.servers, self.source, sink,
                                       str(self.work / "spark" / tag),
                                       {"realTime": self.args.realtime_batch})
                try:
                    self._wait_counts(query, sink, self.expected)
                finally:
                    _stop(query, self.spark.sparkContext)
                started = submitted  # no progress before its first (long) batch ends
        finally:
            roles = sampler.stop()
        return roles, submitted, started

    def _wait_counts(self, query, sink: str, want: collections.Counter) -> None:
        reader = ks.SinkReader(self.broker.servers, sink, want).start()
        try:
            def done() -> bool:
                if query.exception() is not None:
                    raise BenchmarkError(str(query.exception()))
                return reader.done.is_set()
            wait_until(done, self.args.timeout, interval=0.1,
                       message=f"the final counts on {sink!r}")
        finally:
            reader.stop()

    # -- latency
    def latency(self, system: str) -> dict:
        tag = self._tag(system, "latency")
        source = self.broker.create_topic(PARTITIONS, f"in-{tag}")
        sink = self._sink(system, tag)
        checkpoint_ms = (self.args.delta_checkpoint_ms if system == ks.DELTA
                         else self.args.checkpoint_ms)
        sampler = ProcessSampler(self.args.sample_interval).start()
        query = None
        try:
            if system in HERON:
                self._heron_conf(tag)
                topology = ks.build(tag, system, self.broker.servers, source, sink,
                                    bounded=False, emit_secs=self.args.latency_emit_ms / 1000.0,
                                    checkpoint_secs=checkpoint_ms / 1000.0)
                self.handle = submit(topology, spark=self.spark, conf=self.conf)
                if not self.handle.wait_running(timeout=self.args.timeout):
                    self.handle.wait(timeout=30)
                    raise BenchmarkError(f"{tag}: not RUNNING ({self.handle.status})")
            else:
                trigger = ({"processingTime": f"{self.args.spark_trigger_ms} milliseconds"}
                           if system == "spark-micro-batch"
                           else {"realTime": self.args.realtime_batch})
                query = ks.spark_query(self.sql, self.broker.servers, source, sink,
                                       str(self.work / "spark" / tag), trigger)
                wait_until(lambda: query.exception() is not None or "Initializing" not in
                           query.status["message"], self.args.timeout, interval=0.05,
                           message=f"{tag} to initialize")
            reader = (ks.DeltaReader(sink, self.paced_expected) if system == ks.DELTA
                      else ks.SinkReader(self.broker.servers, sink, self.paced_expected)).start()
            try:
                stamps, took = ks.produce_paced(self.broker.servers, source, self.paced_lines,
                                                PARTITIONS, self.args.rate)
                finished = self._wait_reader(tag, reader, query)
            finally:
                reader.stop()
        finally:
            if query is not None:
                _stop(query, self.spark.sparkContext)
            if self.handle is not None:
                self.handle.kill()
                self.handle = None
            roles = sampler.stop()
        wrong = "" if finished else ks.mismatch(reader.counts, self.paced_expected)
        extra = {}
        if system == "effectively-once" and reader.updates:
            # every transaction ended leaves a control record: an offset no record has
            commits = self.broker.ends(sink, 1)[0] - len(reader.updates)
            span_ms = reader.updates[-1][3] - stamps[0]
            extra = {"transactions": commits, "ms_between_commits": span_ms / max(1, commits)}
        if system == ks.DELTA and reader.versions:
            versions = len(reader.versions)
            span_ms = max(seen for seen, _ in reader.versions.values()) - stamps[0]
            lags = sorted(seen - committed for seen, committed in reader.versions.values()
                          if committed is not None)
            extra = {"versions": versions, "ms_between_commits": span_ms / versions,
                     "checkpoint_ms": checkpoint_ms,
                     "seen_after_commit_p50_ms": quantile(lags, 0.5) if lags else None}
        after = stamps[0] + self.args.warmup_secs * 1000.0
        pairs = ks.latencies(self.paced_lines, stamps, reader.updates, after)
        values = sorted(latency for _, latency in pairs)
        by_second = collections.defaultdict(list)  # seconds into the run -> latencies
        for stamp, latency in pairs:
            by_second[int((stamp - stamps[0]) / 1000)].append(latency)
        return {"offered_per_s": len(stamps) / took, "p50_ms": quantile(values, 0.5),
                "p99_ms": quantile(values, 0.99), "max_ms": values[-1] if values else None,
                "samples": len(values), "exact": finished, "wrong": wrong,
                "p50_p99_ms_by_second": [
                    (second, round(quantile(sorted(v), 0.5), 1), round(quantile(sorted(v), 0.99), 1))
                    for second, v in sorted(by_second.items())], **extra,
                "cpu_s": {role: round(v["cpu_s"], 2) for role, v in roles.items()}}


    def _wait_reader(self, tag: str, reader: ks.SinkReader, query) -> bool:
        """Wait until ``reader`` has the final counts; return False after --timeout s.

        Raise ``BenchmarkError`` when the query or the topology ends meanwhile.
        """
        deadline = time.monotonic() + self.args.timeout
        while not reader.done.wait(0.5):
            if query is not None and query.exception() is not None:
                raise BenchmarkError(f"{tag}: {query.exception()}")
            if self.handle is not None and self.handle.status not in bench_env.LIVE:
                self.handle.wait(timeout=30)  # raises the failure, if it failed
                raise BenchmarkError(f"{tag}: the topology ended {self.handle.status}")
            if time.monotonic() > deadline:
                return False
        return True


def _stop(query, context) -> None:
    """Stop a streaming query, with Spark's log quiet meanwhile.

    Spark logs the abort of real-time mode's running batch (its writers' connections close) as
    errors with stack traces.
    """
    context.setLogLevel("FATAL")
    try:
        query.stop()
    finally:
        context.setLogLevel("ERROR")


def _progress_time(progress: dict) -> float:
    """Return a streaming query progress's ``timestamp`` (its trigger's start), epoch seconds."""
    stamp = progress["timestamp"].replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(stamp).timestamp()


def attempt(results: dict, system: str, phase: str, run, *args) -> None:
    """Run ``run(*args)``; file its figures, or the reason it failed, under system and phase."""
    runs = results.setdefault(system, {}).setdefault(phase, [])
    label = f"{system} {phase} run {len(runs) + 1}"
    try:
        figures = run(*args)
    except Exception as exc:  # noqa: BLE001 - Spark's errors are reported, the run goes on
        if system not in SPARK:
            raise
        reason = " ".join(str(exc).split())[:400]
        runs.append({"failed": reason})
        print(f"  {label}: FAILED: {reason}", flush=True)
        return
    runs.append(figures)
    if phase == "throughput":
        print(f"  {label}: {figures['records_per_s']:,.0f} records/s "
              f"({figures['records_per_s_from_submit']:,.0f} from submit), "
              f"{figures['updates']:,} count updates, "
              f"{'exact counts' if figures['exact'] else 'WRONG: ' + figures['wrong']}",
              flush=True)
    else:
        print(f"  {label}: offered {figures['offered_per_s']:,.0f} records/s, p50 "
              f"{figures['p50_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms, max "
              f"{figures['max_ms'] or float('nan'):.1f} ms over {figures['samples']:,} words, "
              f"{'exact counts' if figures['exact'] else 'WRONG: ' + figures['wrong']}"
              + (f"; {figures['transactions']} Kafka transactions committed, one every "
                 f"{figures['ms_between_commits']:.0f} ms" if "transactions" in figures else "")
              + (f"; {figures['versions']} Delta versions, one every "
                 f"{figures['ms_between_commits']:.0f} ms, seen {figures['seen_after_commit_p50_ms']:.0f}"
                 f" ms (p50) after their commitInfo time" if "versions" in figures else ""),
              flush=True)


# ---- report ----------------------------------------------------------------------------------
def _figure(runs: list[dict], key: str, fmt: str) -> str:
    values = [r[key] for r in runs if "failed" not in r and r.get(key) is not None]
    if not values:
        reasons = {r["failed"] for r in runs if "failed" in r}
        return f"n/a ({'; '.join(reasons) or 'not run'})"
    return (f"{fmt.format(statistics.median(values))} "
            f"(runs: {', '.join(fmt.format(v) for v in values)})")


def _median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if "failed" not in r and r.get(key) is not None]
    return statistics.median(values) if values else None


def report(results: dict, args) -> dict:
    print(f"\n== figures: median of {args.runs} (every run); {args.records:,} records of 10 "
          f"words; latency at {args.rate:,.0f} records/s offered")
    summary = {}
    for system, phases in results.items():
        fast, paced = phases.get("throughput", []), phases.get("latency", [])
        print(f"{system}:")
        if fast:
            print(f"  records/s: {_figure(fast, 'records_per_s', '{:,.0f}')}")
            print(f"  records/s from submit: {_figure(fast, 'records_per_s_from_submit', '{:,.0f}')}")
        if paced:
            print(f"  latency p50 ms: {_figure(paced, 'p50_ms', '{:,.1f}')}")
            print(f"  latency p99 ms: {_figure(paced, 'p99_ms', '{:,.1f}')}")
        checked = [r for r in fast + paced if "failed" not in r]
        print(f"  exact counts: {sum(r['exact'] for r in checked)} of {len(checked)} runs")
        for phase, runs in (("throughput", fast), ("latency", paced)):
            cpu: dict[str, list[float]] = collections.defaultdict(list)
            for r in runs:
                for role, seconds in r.get("cpu_s", {}).items():
                    cpu[role].append(seconds)
            shown = {role: statistics.median(v) for role, v in sorted(cpu.items())
                     if statistics.median(v) >= 0.05}  # not Spark's launch scripts
            if shown:
                print(f"  CPU s per role, {phase} (median): " + ", ".join(
                    f"{role} {seconds:.1f}" for role, seconds in shown.items()))
        summary[system] = {"records_per_s": _median(fast, "records_per_s"),
                           "p50_ms": _median(paced, "p50_ms"), "p99_ms": _median(paced, "p99_ms"),
                           "ms_between_commits": _median(paced, "ms_between_commits")}
    print("\n| system | records/s | p50 ms | p99 ms |\n|---|---|---|---|")
    for system, s in summary.items():
        cells = [f"{s['records_per_s']:,.0f}" if s["records_per_s"] else "-",
                 f"{s['p50_ms']:.1f}" if s["p50_ms"] is not None else "-",
                 f"{s['p99_ms']:.1f}" if s["p99_ms"] is not None else "-"]
        print(f"| {system} | {' | '.join(cells)} |")
    _targets(summary, args)
    return summary


def _targets(summary: dict, args) -> None:
    delta = summary.get(ks.DELTA, {})
    if delta.get("p99_ms") is not None:
        bound = 2 * args.delta_checkpoint_ms
        print(f"target: Kafka -> Delta effectively-once p99 from produce to a committed Delta "
              f"version < 2 x the checkpoint interval ({bound:g} ms): {delta['p99_ms']:.1f} ms "
              f"({'met' if delta['p99_ms'] < bound else 'NOT met'})")
    eo, spark = summary.get("effectively-once", {}), summary.get("spark-micro-batch", {})
    if eo.get("records_per_s") and spark.get("records_per_s"):
        ratio = eo["records_per_s"] / spark["records_per_s"]
        print(f"target: effectively-once >= 3x Spark micro-batch records/s: {ratio:.2f}x "
              f"({'met' if ratio >= 3 else 'NOT met'})")
    if eo.get("p99_ms") is not None:
        p99 = eo["p99_ms"]
        print(f"target: effectively-once p99 < 50 ms at {args.rate:,.0f} records/s: "
              f"{p99:.1f} ms ({'met' if p99 < 50 else 'NOT met'}); checkpoint interval "
              f"{args.checkpoint_ms:g} ms: a read_committed reader sees an update only once the "
              f"checkpoint after it commits its Kafka transaction, so up to one interval plus "
              f"the commit is in every effectively-once latency")
        if eo.get("ms_between_commits") is not None:
            print(f"  the sink committed a transaction every {eo['ms_between_commits']:.0f} ms "
                  f"(median of the runs): the TMaster starts a checkpoint no sooner than "
                  f"--checkpoint-ms after the last one committed, on its 50 ms clock, and "
                  f"a checkpoint's markers queue behind the tuples ahead of them: when the "
                  f"topology falls behind the offered rate, a checkpoint lasts as long as "
                  f"that backlog")


# ---- main ------------------------------------------------------------------------------------
def _systems(text: str) -> list[str]:
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SYSTEMS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"unknown system(s) {unknown}: of {', '.join(SYSTEMS)}")
    return chosen


def _phases(text: str) -> list[str]:
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    if not chosen or any(p not in PHASES for p in chosen):
        raise argparse.ArgumentTypeError(f"phases: comma-separated, of {', '.join(PHASES)}")
    return chosen


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--records", type=int, default=1_000_000, help="input records (default 1,000,000)")
    add("--runs", type=int, default=3, help="runs per system and phase (default 3)")
    add("--systems", type=_systems, default=list(SYSTEMS), help=f"of {', '.join(SYSTEMS)}")
    add("--phases", type=_phases, default=list(PHASES), help="of throughput, latency")
    add("--rate", type=float, default=20_000.0, help="records/s offered in the latency runs")
    add("--latency-secs", type=float, default=10.0, help="length of a latency run's input")
    add("--warmup-secs", type=float, default=2.0,
        help="records produced in a latency run's first seconds are left out of its latency")
    add("--emit-ms", type=float, default=100.0,
        help="heron_spark count bolt's tick (emit changed counts), throughput runs")
    add("--latency-emit-ms", type=float, default=5.0, help="the same, latency runs")
    add("--throughput-checkpoint-ms", type=float, default=1000.0,
        help="effectively-once checkpoint interval, throughput runs")
    add("--checkpoint-ms", type=float, default=20.0,
        help="effectively-once checkpoint interval, latency runs")
    add("--delta-checkpoint-ms", type=float, default=1000.0,
        help="delta-effectively-once checkpoint interval, latency runs (each committed "
             "checkpoint is one Delta version)")
    add("--spark-trigger-ms", type=int, default=0,
        help="Spark micro-batch processingTime in the latency runs (0: back to back)")
    add("--realtime-batch", default="5 seconds", help="Spark real-time mode batch duration")
    add("--master", default=f"local[{PARTITIONS + SHUFFLE_PARTITIONS}]",
        help="Spark master (default: a slot per source and shuffle partition, which "
             "real-time mode needs at once)")
    add("--sample-interval", type=float, default=0.2, help="seconds between /proc samples")
    add("--timeout", type=float, default=900.0, help="seconds per run at most")
    add("--cache-dir", type=Path, default=Path.home() / ".cache" / "heron_spark_bench")
    add("--json", type=Path, default=None, help="write every figure to this file")
    add("--keep-work", action="store_true", help="keep the work folder (broker log, state)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.records < PARTITIONS or args.rate <= 0 or args.latency_secs <= 0:
        parser.error("--runs >= 1, --records >= 4, --rate > 0 and --latency-secs > 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    out: dict = {"machine": machine_info(), "args": {k: str(v) for k, v in vars(args).items()}}
    work = Path(tempfile.mkdtemp(prefix="heron_spark_kafka_bench_"))
    broker, spark, runner, code = Broker(work / "kafka"), None, None, 0
    results: dict = {}
    try:
        corpus, _ = corpus_file(args.records, args.cache_dir)
        lines = corpus.read_text().splitlines()
        expected = count_corpus(corpus)
        paced = [lines[i % len(lines)] for i in range(int(args.rate * args.latency_secs))]
        began = time.monotonic()
        broker.start()
        print(f"Kafka broker on {broker.servers} started in {time.monotonic() - began:.1f} s",
              flush=True)
        began = time.monotonic()
        source = broker.create_topic(PARTITIONS, "words-in")
        ks.produce_lines(broker.servers, source, lines, PARTITIONS)
        print(f"{len(lines):,} records ({sum(expected.values()):,} "
              f"words, {len(expected):,} distinct) produced to {source!r} ({PARTITIONS} "
              f"partitions) in {time.monotonic() - began:.1f} s", flush=True)
        spark = bench_env.local_session(args.master, "heron_spark-bench-kafka", {
            "spark.ui.showConsoleProgress": "false",
            "spark.jars": ",".join(jvm_support.spark_jars("spark-kafka"))})
        print(f"Spark {spark.version} on {args.master}", flush=True)
        runner = Runner(args, spark, broker, work, source, expected, paced)
        for _ in range(args.runs):
            for system in args.systems:
                for phase in args.phases:
                    attempt(results, system, phase, getattr(runner, phase), system)
        out["summary"] = report(results, args)
        if any(not r.get("exact", True) for phases in results.values()
               for runs in phases.values() for r in runs):
            print("COUNTS WRONG in some run (see above)", file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        code = 130
    except (BenchmarkError, TimeoutError, RuntimeError) as exc:
        print(f"BENCHMARK FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        broker.stop()
        clean_up(runner, spark, work, keep=code == 1 or args.keep_work)
    out["runs"], out["exit_code"] = results, code
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2, default=str))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
