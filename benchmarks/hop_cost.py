"""What one small frame costs each instance of the word count: CPU microseconds per turn.

At paced rates every hop of the word count carries small frames (a few sentences, tens of
words), so the fixed cost of a turn sets the CPU the topology needs, and on a saturated
machine its latency. This benchmark measures that cost without sockets, Spark or other
processes: it builds the plain-style word count (written as the README teaches), creates the
real executors of one sentence spout, one split and one count task in this process, and feeds
each the frames the previous one produced:

- sentence: one turn in which ``next_tuple`` emits ``--sentences`` sentences and they leave
  as one frame, plus the turn the loop takes right after (``next_tuple`` emits nothing);
- split: one turn taking that frame (ten words per sentence, anchored, the sentence acked);
- count: one turn taking the split's frames for it (both count tasks' frames are counted
  once each, so all words are).

Each turn is timed by this thread's CPU clock, so time other processes take from this one
does not count; what remains is the interpreter, NumPy and Arrow, with warm caches (a real
instance, woken by a frame after other processes ran, pays cache misses on top). Control
frames (edges, acks) go nowhere: the stmgr's side is not measured here.

Run: ``python benchmarks/hop_cost.py [--sentences 1,10] [--turns 3000] [--runs 3]``.
``--profile sentence|split|count`` prints a cProfile of that task's turns (one run, at most once
mode and at least once).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's heron_spark

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder  # noqa: E402
from heron_spark.config import SystemConfig  # noqa: E402
from heron_spark.instance.shell import build_executor  # noqa: E402
from heron_spark.plan.logical import build_logical_plan  # noqa: E402
from heron_spark.plan.packing import pack  # noqa: E402
from heron_spark.plan.view import PlanView  # noqa: E402
from heron_spark.proto import stmgr_pb2  # noqa: E402
from heron_spark.wire import frames  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wc_topologies import WordSplitBolt  # noqa: E402  the word count benchmark's plain split

SENTENCE = "the quick brown fox jumps over the lazy dog again"  # ten words
MODES = ("ATMOST_ONCE", "ATLEAST_ONCE")
ROLES = ("sentence", "split", "count")
_NEXT = {"sentence": "split", "split": "count"}  # where each role's tuple frames go


# ---- the word count, plain style --------------------------------------------------------------
class SentenceSpout(Spout):
    """Emits ``due`` sentences per call (set by the benchmark); a message id at least once."""

    outputs = ["sentence", "ts"]

    def initialize(self, config, context):
        self.reliable = config.get("topology.reliability.mode") == "ATLEAST_ONCE"
        self.pending = {}
        self.next_id = 0
        self.due = 0

    def next_tuple(self):
        for _ in range(self.due):
            ts = time.time()
            if self.reliable:
                self.next_id += 1
                self.pending[self.next_id] = SENTENCE
                self.emit([SENTENCE, ts], tup_id=self.next_id)
            else:
                self.emit([SENTENCE, ts])
        self.due = 0

    def ack(self, tup_id):
        del self.pending[tup_id]

    def fail(self, tup_id):
        pass


class WordCountBolt(Bolt):
    def initialize(self, config, context):
        self.counts = {}
        self.ages = 0.0

    def process(self, tup):
        word, ts = tup.values
        self.counts[word] = self.counts.get(word, 0) + 1
        self.ages += time.time() - ts
        self.ack(tup)


def _plan(mode: str) -> PlanView:
    builder = TopologyBuilder("hop_cost")
    spout = builder.add_spout("sentence", SentenceSpout, par=2)
    split = builder.add_bolt("split", WordSplitBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("count", WordCountBolt, par=2, inputs={split: Grouping.fields("word")})
    builder.set_config({"topology.reliability.mode": mode, "topology.stmgrs": 2,
                        "topology.max.spout.pending": None})
    logical = build_logical_plan(builder.build())
    return PlanView(logical, pack(logical))


# ---- driving the executors --------------------------------------------------------------------
class _Task:
    """One task's executor, started, with the frames it sends collected whole."""

    def __init__(self, plan: PlanView, task: int) -> None:
        self.sent: list = []
        # linger 0: every turn sends what it made, as an idle task does at paced rates
        self.executor = build_executor(plan, task, SystemConfig(batch_linger_ms=0),
                                       self.sent.append)
        self.executor.offer(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
            start=stmgr_pb2.StartProcessing(generation=0))))
        self.executor.turn(time.monotonic())
        self.sent.clear()

    def data_frames(self) -> list[tuple[int, bytes]]:
        """Return and forget the tuple frames it sent, as (destination task, frame)."""
        out = []
        for frame in self.sent:
            whole = b"".join(bytes(p) for p in frame) if isinstance(frame, (list, tuple)) \
                else bytes(frame)
            if frames.PREFIX.unpack_from(whole)[1] != frames.DATA:
                continue
            kind, _, dest, _, _ = frames.data_head(whole)
            if kind == frames.TUPLES:
                out.append((dest, whole))
        self.sent.clear()
        return out


def measure(mode: str, sentences: int, turns: int, profile: str | None = None) -> dict:
    """Return each role's median CPU microseconds per turn over ``turns`` rounds."""
    plan = _plan(mode)
    tasks = {role: _Task(plan, plan.component_tasks[role][0]) for role in ROLES}
    next_tasks = {role: set(plan.component_tasks[role]) for role in _NEXT.values()}
    spout = tasks["sentence"].executor
    cpu: dict[str, list[float]] = {role: [] for role in ROLES}
    profiler = cProfile.Profile() if profile else None
    clock = time.thread_time_ns
    warm = min(200, turns // 5)
    thresholds = gc.get_threshold()
    gc.collect()  # as an instance process does before its loop (heron.python.gc.young.objects)
    gc.set_threshold(SystemConfig().python_gc_young_objects, *thresholds[1:])
    try:
        for i in range(turns + warm):
            spout.component.due = sentences
            took = {}
            for role in ROLES:
                executor = tasks[role].executor
                if profiler is not None and role == profile and i >= warm:
                    profiler.enable()
                started = clock()
                executor.turn(time.monotonic())
                if role == "sentence":
                    executor.turn(time.monotonic())  # the loop's next turn: nothing is due
                took[role] = clock() - started
                if profiler is not None and role == profile:
                    profiler.disable()
                after = _NEXT.get(role)
                # the frames for either task of the next component go to the one task here
                for dest, frame in tasks[role].data_frames():
                    if after is not None and dest in next_tasks[after]:
                        tasks[after].executor.offer(frames.DATA, frame)
            if i >= warm:
                for role in ROLES:
                    cpu[role].append(took[role] / 1000.0)
    finally:
        gc.set_threshold(*thresholds)
    counted = sum(tasks["count"].executor.component.counts.values())
    expected = (turns + warm) * sentences * len(SENTENCE.split())
    if counted != expected:
        raise RuntimeError(f"the count task counted {counted} words, expected {expected}")
    if profiler is not None:
        print(f"\ncProfile of the {profile} task's turns, {mode}, {sentences} sentence(s) per turn:")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    return {role: statistics.median(values) for role, values in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", default="1,10",
                        help="comma-separated sentences per spout turn (default 1,10)")
    parser.add_argument("--turns", type=int, default=3000, help="rounds per run (default 3000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (default 3)")
    parser.add_argument("--profile", choices=ROLES, default=None,
                        help="print a cProfile of this task's turns instead of the figures")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sentences.split(",")]
    if args.turns < 10 or args.runs < 1 or not sizes or min(sizes) < 1:
        parser.error("--turns >= 10, --runs >= 1, --sentences >= 1")
    if args.profile:
        for mode in MODES:
            measure(mode, sizes[0], args.turns, args.profile)
        return
    print(f"CPU microseconds per turn (this thread's CPU clock, warm caches), median over "
          f"{args.turns} turns, median of {args.runs} runs [every run]")
    for sentences in sizes:
        figures = {}
        for mode in MODES:
            runs = [measure(mode, sentences, args.turns) for _ in range(args.runs)]
            figures[mode] = {role: statistics.median(r[role] for r in runs) for role in ROLES}
            figures[mode]["all"] = statistics.median(sum(r.values()) for r in runs)
            listed = {role: ", ".join(f"{r[role]:.1f}" for r in runs) for role in ROLES}
            print(f"  {mode:13s} {sentences:3d} sentence(s)/turn: " + "; ".join(
                f"{role} {figures[mode][role]:.1f} [{listed[role]}]" for role in ROLES)
                + f"; all three {figures[mode]['all']:.1f}")
        ratio = {role: figures["ATLEAST_ONCE"][role] / figures["ATMOST_ONCE"][role]
                 for role in (*ROLES, "all")}
        print(f"  at least once / at most once, {sentences} sentence(s)/turn: "
              + ", ".join(f"{role} {value:.2f}" for role, value in ratio.items()))


if __name__ == "__main__":
    main()
