"""Chaos soak: word counts under random SIGKILL / SIGSTOP of their processes for N minutes.

Spark ``local[4]``, 2 containers, the tests' word count (``tests/reliable_word_count.py``:
2 spouts over a file, 2 split, 2 count tasks, every count recorded before it is acked). One
``Chaos`` killer (``tests/chaos_support.py``) runs for ``--minutes`` against every topology the
soak starts: every 1-3 s it SIGKILLs or SIGSTOPs a random instance, stmgr, metrics manager or
container (the Spark Python worker of a barrier task), and never continues a stopped one.
Word counts run one after another (rounds) until the chaos ends; the round running then
finishes without chaos. Each round is checked: under ``--mode atleast`` every word counted
exactly once after de-duplication, every line acked, the committed acked_total equal to the
line count; under ``--mode atmost`` losses are counted, not failures.

Prints kills and stops per kind of process, losses (words short of exact), duplicates
(replayed records), the longest progress stall, total time and the final state. Exits 1 on
a loss (at-least-once), a hang (no progress for --stall-limit s, or no end --finish-timeout s
after the chaos), a failed topology, or processes left behind.

Run from the repository root:
    .venv/bin/python benchmarks/chaos_soak.py --minutes 10 [--seed 1] [--mode atleast|atmost]
                                              [--interval 1-3] [--lines 50000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import bench_env  # first: the paths and environment the topology's processes inherit

bench_env.prepare(bench_env.TESTS_DIR)  # the instances import reliable_word_count too

import chaos_support as chaos_kit  # noqa: E402
import reliable_word_count as rwc  # noqa: E402
from heron_spark import submit  # noqa: E402
from heron_spark.errors import TopologyRuntimeError  # noqa: E402

MASTER = "local[4]"
SPOUTS = 2
LIVE = bench_env.LIVE


def _interval(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    values = (float(low), float(high or low))
    if not 0 <= values[0] <= values[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: write LOW-HIGH seconds, e.g. 1-3")
    return values


def _session():
    return bench_env.local_session(MASTER, "heron_spark-chaos-soak")


class Round:
    """One word count under the chaos: submit, watch, audit, clean up."""

    def __init__(self, number: int, args, root: Path, conf: dict, chaos: chaos_kit.Chaos) -> None:
        self.number = number
        self.name = f"soak-{number:04d}"
        self.args = args
        self.folder = root / f"round-{number:04d}"
        self.conf = conf
        self.chaos = chaos
        self.work = Path(conf["heron.work.dir"]) / self.name
        self.state = "NOT STARTED"
        self.problem = ""
        self.lost = self.replayed = 0
        self.longest_stall = 0.0
        self.seconds = 0.0
        self.leftovers: list[str] = []

    def run(self) -> "Round":
        corpus, out = self.folder / "corpus.txt", self.folder / "out"
        self.folder.mkdir(parents=True)
        text = rwc.write_corpus(corpus, self.args.lines, seed=self.args.seed + self.number)
        mode = "ATLEAST_ONCE" if self.args.mode == "atleast" else "ATMOST_ONCE"
        topology = rwc.build(self.name, corpus, out, spouts=SPOUTS, config={
            **chaos_kit.CHAOS_CONF, rwc.SLEEP_MS: self.args.sleep_ms, "topology.reliability.mode": mode})
        began = time.monotonic()
        handle = submit(topology, spark=self.args.spark, conf=self.conf, master=MASTER)
        progress = chaos_kit.ProgressMonitor(lambda: chaos_kit.output_bytes(out),
                                             done=lambda: handle.status not in LIVE)
        try:
            if not handle.wait_running(timeout=self.args.stall_limit):
                self.problem = f"not running after {self.args.stall_limit} s"
            with progress:
                self.state = self._wait(handle, progress)
        finally:
            if handle.status in LIVE:
                handle.kill()
            self.seconds = time.monotonic() - began
            self.longest_stall = progress.longest_stall_secs
            self.leftovers = chaos_kit.wait_no_leftovers(self.work, None, 30)
            chaos_kit.kill_leftovers(self.work)
        if self.state == "FINISHED" or mode == "ATMOST_ONCE":
            self._audit(text, out, mode)
        return self

    def _wait(self, handle, progress) -> str:
        while True:
            try:
                return handle.wait(timeout=1.0)
            except TimeoutError:
                pass
            except TopologyRuntimeError as exc:
                self.problem = f"{exc} (task {exc.task_id}, {exc.component})"
                return "FAILED"
            if progress.current_stall_secs > self.args.stall_limit:
                self.problem = (f"no progress for {progress.current_stall_secs:.0f} s; processes:\n"
                                + chaos_kit.describe_processes(self.work))
                return "HANG"
            ended = self.chaos.ended_at
            if ended is not None and time.monotonic() - ended > self.args.finish_timeout:
                self.problem = (f"still {handle.status} {self.args.finish_timeout} s after the chaos; "
                                f"processes:\n" + chaos_kit.describe_processes(self.work))
                return "HANG"

    def _audit(self, text: list[str], out: Path, mode: str) -> None:
        if mode == "ATLEAST_ONCE":
            result = chaos_kit.audit(text, out, self.conf["heron.statemgr"], self.name, SPOUTS)
            self.lost, self.replayed = sum(result.lost.values()), result.replayed
            if not result.exact:
                self.problem = (self.problem + "; " if self.problem else "") + str(result)
            return
        _, unique, records = rwc.read_counts(out)
        self.lost = sum((rwc.expected_counts(text) - unique).values())
        self.replayed = records - sum(unique.values())

    @property
    def ok(self) -> bool:
        loss_ok = self.args.mode == "atmost" or self.lost == 0
        return self.state == "FINISHED" and loss_ok and not self.leftovers \
            and not (self.problem and self.args.mode == "atleast")

    def __str__(self) -> str:
        line = (f"round {self.number} {self.name}: {self.state} in {self.seconds:.1f} s, "
                f"lost {self.lost} words, {self.replayed} replayed records, "
                f"longest stall {self.longest_stall:.1f} s")
        if self.problem:
            line += f"\n  problem: {self.problem}"
        if self.leftovers:
            line += "\n  left behind:\n    " + "\n    ".join(self.leftovers)
        return line


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the chaos lasts")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mode", choices=("atleast", "atmost"), default="atleast")
    parser.add_argument("--interval", type=_interval, default=(1.0, 3.0),
                        help="seconds between two signals, LOW-HIGH (default 1-3)")
    parser.add_argument("--kill-ratio", type=float, default=0.5,
                        help="share of SIGKILL among the signals (the rest are SIGSTOP)")
    parser.add_argument("--lines", type=int, default=50_000, help="corpus lines per round")
    parser.add_argument("--sleep-ms", type=float, default=2.0, help="split bolt delay per line")
    parser.add_argument("--stall-limit", type=float, default=120.0,
                        help="a round without progress for this many seconds is a hang")
    parser.add_argument("--finish-timeout", type=float, default=300.0,
                        help="a round still running this many seconds after the chaos is a hang")
    parser.add_argument("--verbose", action="store_true", help="print every signal sent")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="chaos_soak_"))
    conf = {"heron.statemgr": f"file://{root}/state", "heron.work.dir": f"{root}/work"}
    args.spark = _session()
    chaos = chaos_kit.Chaos(Path(conf["heron.work.dir"]), duration_secs=args.minutes * 60,
                            seed=args.seed, interval=args.interval, kill_ratio=args.kill_ratio,
                            log=(lambda line: print(f"  chaos {line}", flush=True))
                            if args.verbose else None)
    print(f"chaos soak: {args.minutes:g} min, mode {args.mode}, seed {args.seed}, "
          f"interval {args.interval[0]:g}-{args.interval[1]:g} s, {args.lines} lines per round, "
          f"folder {root}", flush=True)
    rounds: list[Round] = []
    began = time.monotonic()
    left: list[str] = []
    try:
        chaos.start()
        while True:
            rounds.append(Round(len(rounds) + 1, args, root, conf, chaos).run())
            print(rounds[-1], flush=True)
            if not rounds[-1].ok or not chaos.running:
                break
    finally:
        chaos.stop()
        left = chaos_kit.leftovers(Path(conf["heron.work.dir"]), chaos)
        chaos_kit.kill_leftovers(Path(conf["heron.work.dir"]), chaos)
        args.spark.stop()
    return _report(args, chaos, rounds, time.monotonic() - began, left, root)


def _report(args, chaos, rounds: list[Round], seconds: float, left: list[str], root: Path) -> int:
    worst = max(rounds, key=lambda r: r.longest_stall, default=None)
    final = rounds[-1].state if rounds else "NOT STARTED"
    ok = bool(rounds) and all(r.ok for r in rounds) and not left
    print(f"chaos: {len(chaos.actions)} signals: {chaos.summary()}")
    print(f"rounds: {len(rounds)} ({sum(r.state == 'FINISHED' for r in rounds)} FINISHED)")
    print(f"losses: {sum(r.lost for r in rounds)} words short of exact")
    print(f"duplicates: {sum(r.replayed for r in rounds)} replayed records")
    if worst is not None:
        print(f"longest stall: {worst.longest_stall:.1f} s (round {worst.number})")
    print(f"total time: {seconds:.1f} s")
    print(f"final state: {final}")
    print("left behind: " + ("none" if not left else "\n  " + "\n  ".join(left)))
    print(f"verdict: {'OK' if ok else 'FAILED'}")
    if not args.keep and ok:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
