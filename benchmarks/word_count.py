"""Word-count benchmark, at-most-once and at-least-once, Spark local[*], 2 containers.

Under ATLEAST_ONCE every sentence is emitted with a message id, every word is anchored to its
sentence, and both bolts ack: each sentence's tuple tree is tracked by the stmgrs.

Prints (median of --runs runs):
- throughput: words counted per second by the count bolts, from the first to the last word
  they process (steady state; Spark and process start-up excluded), and the same over the
  whole run from the physical plan broadcast to the end;
- latency at a fixed rate: p50/p99 from spout emit to count-bolt ``process`` (wall clock,
  same machine), with the spouts paced to --rate words/s in total.

Run: python benchmarks/word_count.py [--runs 3] [--sentences 100000] [--rate 50000]
                                    [--modes ATMOST_ONCE,ATLEAST_ONCE] [--max-pending N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from examples.word_count import CORPUS  # noqa: E402
from heron_spark import Bolt, Grouping, Spout, TopologyBuilder, submit  # noqa: E402

OUT_DIR = "bench.out.dir"
SENTENCES = "bench.sentences.per.task"
RATE = "bench.words.per.sec.per.task"  # 0 = as fast as possible
WORDS_PER_SENTENCE = sum(len(s.split()) for s in CORPUS) / len(CORPUS)


class TimedSentenceSpout(Spout):
    """Emits (sentence, emit time); paced when a rate is set."""

    outputs = ["sentence", "ts"]

    def initialize(self, config, context):
        self.left = int(config[SENTENCES])
        rate = float(config.get(RATE, 0))
        self.interval = WORDS_PER_SENTENCE / rate if rate > 0 else 0.0
        self.position = context.get_task_index()
        self.next_at = time.time()

    def next_tuple(self):
        if self.left <= 0:
            self.declare_exhausted()
            return
        for _ in range(32):
            now = time.time()
            if self.interval and now < self.next_at:
                return
            self.emit([CORPUS[self.position % len(CORPUS)], now], tup_id=self.position)
            self.position += 1
            self.left -= 1
            self.next_at += self.interval
            if self.left <= 0:
                return


class TimedSplitBolt(Bolt):
    """Splits sentences, carrying the emit time along."""

    outputs = ["word", "ts"]

    def process(self, tup):
        sentence, ts = tup.values
        for word in sentence.split():
            self.emit([word, ts], anchors=[tup])
        self.ack(tup)


class TimedCountBolt(Bolt):
    """Counts words and records first/last process time and per-word latency samples."""

    def initialize(self, config, context):
        self.counts = {}
        self.first = None
        self.last = None
        self.samples = []
        self.out = Path(config[OUT_DIR]) / f"count-{context.get_task_id()}.json"
        self.n = 0

    def process(self, tup):
        now = time.time()
        word, ts = tup.values
        self.counts[word] = self.counts.get(word, 0) + 1
        if self.first is None:
            self.first = now
        self.last = now
        self.n += 1
        if self.n % 16 == 0:
            self.samples.append((ts, now - ts))
        self.ack(tup)

    def end_of_input(self):
        self.out.write_text(json.dumps({"first": self.first, "last": self.last,
                                        "words": sum(self.counts.values()),
                                        "samples": self.samples}))


def build(sentences: int, rate_per_task: float, out_dir: str, mode: str,
          max_pending: int) -> type:
    builder = TopologyBuilder("bench_word_count")
    spout = builder.add_spout("sentence", TimedSentenceSpout, par=2)
    split = builder.add_bolt("split", TimedSplitBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("count", TimedCountBolt, par=2, inputs={split: Grouping.fields("word")})
    config = {"topology.stmgrs": 2, SENTENCES: sentences, RATE: rate_per_task,
              OUT_DIR: out_dir, "topology.reliability.mode": mode}
    if max_pending:
        config["topology.max.spout.pending"] = max_pending
    builder.set_config(config)
    return builder.build()


def run_once(sentences: int, rate: float, conf: dict, mode: str, max_pending: int) -> dict:
    out_dir = tempfile.mkdtemp(prefix="bench_wc_")
    handle = submit(build(sentences, rate / 2, out_dir, mode, max_pending), master="local[*]",
                    conf=conf)
    status = handle.wait(timeout=900)
    results = [json.loads(p.read_text()) for p in Path(out_dir).glob("count-*.json")]
    words = sum(r["words"] for r in results)
    first = min(r["first"] for r in results if r["first"])
    last = max(r["last"] for r in results if r["last"])
    pairs = sorted(tuple(s) for r in results for s in r["samples"])
    start = pairs[0][0] if pairs else 0.0
    samples = sorted(lat for _, lat in pairs)
    per_second = {}
    for emitted, lat in pairs:
        per_second.setdefault(int(emitted - start), []).append(lat)
    acked = handle.metrics().get("sentence", {}).get("__ack-count", 0)
    return {"status": status, "words": words, "acked": acked,
            "steady_words_per_s": words / max(last - first, 1e-9),
            "whole_run_words_per_s": words / max(handle.ended_at - handle.started_at, 1e-9),
            "p50_ms": 1000 * samples[len(samples) // 2] if samples else float("nan"),
            "p99_ms": 1000 * samples[min(len(samples) - 1, int(len(samples) * 0.99))]
            if samples else float("nan"),
            "per_second": {sec: (_pct(v, 0.5), _pct(v, 0.99)) for sec, v in sorted(per_second.items())}}


def _pct(values: list, q: float) -> float:
    values = sorted(values)
    return 1000 * values[min(len(values) - 1, int(len(values) * q))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=100_000, help="per spout task, max speed")
    parser.add_argument("--rate", type=float, default=50_000, help="total words/s for latency")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--flush-ms", type=float, default=None,
                        help="heron.batch.flush.interval.ms (default: the configured one)")
    parser.add_argument("--modes", default="ATMOST_ONCE,ATLEAST_ONCE")
    parser.add_argument("--max-pending", type=int, default=0,
                        help="topology.max.spout.pending under ATLEAST_ONCE (0: unbounded)")
    args = parser.parse_args(argv)
    conf = {} if args.flush_ms is None else {"heron.batch.flush.interval.ms": args.flush_ms}
    for mode in args.modes.split(","):
        bench_mode(args, conf, mode)
    return 0


def bench_mode(args, conf: dict, mode: str) -> None:
    pending = args.max_pending if mode == "ATLEAST_ONCE" else 0
    fast = [run_once(args.sentences, 0, conf, mode, pending) for _ in range(args.runs)]
    for r in fast:
        print(f"  {mode} max-speed run: {r['status']} {r['words']} words, "
              f"{r['acked']:.0f} sentences acked, "
              f"{r['steady_words_per_s']:,.0f} words/s steady, "
              f"{r['whole_run_words_per_s']:,.0f} words/s whole run", flush=True)
    paced_sentences = int(args.rate * args.latency_seconds / WORDS_PER_SENTENCE / 2)
    paced = [run_once(paced_sentences, args.rate, conf, mode, pending) for _ in range(args.runs)]
    for r in paced:
        print(f"  {mode} paced run at {args.rate:,.0f} words/s: {r['status']} "
              f"{r['steady_words_per_s']:,.0f} words/s, p50 {r['p50_ms']:.2f} ms, "
              f"p99 {r['p99_ms']:.2f} ms", flush=True)
    print(f"word count, {mode}, local[*], 2 containers, 2 spouts / 2 split / 2 count tasks"
          + (f", max spout pending {pending}" if pending else ""))
    print(f"throughput (median of {args.runs}): "
          f"{statistics.median(r['steady_words_per_s'] for r in fast):,.0f} words/s steady, "
          f"{statistics.median(r['whole_run_words_per_s'] for r in fast):,.0f} words/s whole run")
    print(f"latency at {args.rate:,.0f} words/s (median of {args.runs}): "
          f"p50 {statistics.median(r['p50_ms'] for r in paced):.2f} ms, "
          f"p99 {statistics.median(r['p99_ms'] for r in paced):.2f} ms", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
