"""Chaos tests: a word count while random processes are SIGKILLed or SIGSTOPped every 1-3 s.

``reliable_word_count`` on ``local[4]``, two containers; a ``chaos_support.Chaos`` killer hits
instances, stmgrs, metrics managers and containers (the Spark Python workers running the
barrier tasks) for ``CHAOS_SECS`` and never continues what it stopped: stalls must be found by
the runtime (``heron.stall.timeout.secs``), not by the test. Restart budgets are raised so that
only a runtime that cannot recover fails.

- At-least-once: the topology ends FINISHED within a bounded time, loses nothing (counts exact
  after de-duplication, every line acked, committed acked_total = line count), never goes
  more than ``MAX_STALL_SECS`` without progress, and leaves no process behind.
- At-most-once: the topology ends FINISHED within a bounded time (a hang is the failure, loss
  is allowed) and leaves no process behind.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

import chaos_support as chaos_kit
import reliable_word_count as rwc
from heron_spark.errors import TopologyRuntimeError
from heron_spark.scheduler.submit import submit

pytestmark = pytest.mark.chaos

SPOUTS = 2
SLEEP_MS = 3                  # per line in the split bolt: a sleep-bound, load-independent pace
ALO_LINES = 20_000            # ~35 s without chaos on 2 cores
ALO_CHAOS_SECS = 40
AMO_LINES = 12_000            # ~20 s without chaos
AMO_CHAOS_SECS = 20
MAX_STALL_SECS = 45           # longest time without a word counted while the topology runs
FINISH_AFTER_CHAOS_SECS = 90  # the topology must end this long after the chaos ends
LEFTOVER_GRACE_SECS = 20      # its processes must be gone this long after it ended
MIN_SIGNALS = 5               # fewer means the chaos did not really hit the topology
# At-most-once has no spout pending cap: shallow queues keep the work in the spouts' file (and
# the run as long as the chaos) instead of in queues that a killed container takes with it.
AMO_QUEUE_MARKS = {"heron.stmgr.backpressure.high.water.tuples": 1000,
                   "heron.stmgr.backpressure.low.water.tuples": 500}
LIVE = ("STARTING", "RUNNING")


@dataclasses.dataclass
class ChaosRun:
    """One word count run under chaos, after it ended."""

    name: str
    text: list[str]
    out: Path
    handle: object
    chaos: chaos_kit.Chaos
    progress: chaos_kit.ProgressMonitor
    seconds: float = 0.0
    leftovers: list[str] = dataclasses.field(default_factory=list)

    def summary(self, extra: str) -> str:
        detail = self.handle.status_detail()
        failures = sum(detail.get("instance_failures", {}).values())
        stalls = ", ".join(f"{length:.1f} s at +{at:.1f} s" for at, length in self.progress.stalls)
        actions = "".join(f"\n  {action}" for action in self.chaos.actions)
        return (f"{self.name}: {self.chaos.summary()}; {extra}; longest stall "
                f"{self.progress.longest_stall_secs:.1f} s; total {self.seconds:.1f} s; "
                f"generation {detail.get('generation')}; {failures} instance failures"
                f"\n  stalls over 2 s: {stalls or 'none'}{actions}")


def _diagnosis(run: ChaosRun, work: Path) -> str:
    """What the engineer needs when a run hangs or fails: status, signals, stalls, processes."""
    detail = run.handle.status_detail()
    actions = "\n".join(f"  {a}" for a in run.chaos.actions) or "  (none)"
    stalls = ", ".join(f"{length:.1f} s at +{at:.1f} s" for at, length in run.progress.stalls)
    return (f"state {detail.get('state')} ({detail.get('detail')}), generation "
            f"{detail.get('generation')}, instance failures {detail.get('instance_failures')}\n"
            f"chaos: {run.chaos.summary()}\n{actions}\n"
            f"stalls over 2 s: {stalls or 'none'}; longest {run.progress.longest_stall_secs:.1f} s\n"
            f"processes under {work}:\n{chaos_kit.describe_processes(work)}")


def _run_under_chaos(spark, tmp_path, hconf, name: str, lines: int, chaos_secs: float,
                     seed: int, mode: str, config: dict | None = None) -> ChaosRun:
    """Run the word count under chaos until it ends; fail (with a diagnosis) on a hang or a
    failure. Every process of the run is gone afterwards, whatever happened."""
    corpus, out, work = tmp_path / "corpus.txt", tmp_path / "out", tmp_path / "work" / name
    text = rwc.write_corpus(corpus, lines)
    topology = rwc.build(name, corpus, out, spouts=SPOUTS, config={
        **chaos_kit.CHAOS_CONF, rwc.SLEEP_MS: SLEEP_MS, "topology.reliability.mode": mode,
        **(config or {})})
    began = time.monotonic()
    handle = submit(topology, spark=spark.session, conf=hconf, master="local[4]")
    run = ChaosRun(name, text, out, handle, chaos_kit.Chaos(work, duration_secs=chaos_secs, seed=seed),
                   chaos_kit.ProgressMonitor(lambda: chaos_kit.output_bytes(out),
                                             done=lambda: handle.status not in LIVE))
    try:
        assert handle.wait_running(timeout=120), f"{name} never ran: {handle.status_detail()}"
        problem = None
        with run.chaos, run.progress:
            try:
                handle.wait(timeout=chaos_secs + FINISH_AFTER_CHAOS_SECS)
            except TimeoutError:
                problem = (f"HANG: {name} still {handle.status} {FINISH_AFTER_CHAOS_SECS} s after "
                           f"the chaos ended\n{_diagnosis(run, work)}")
            except TopologyRuntimeError as exc:
                problem = (f"FAILED: {exc} (component {exc.component}, task {exc.task_id}, log "
                           f"{exc.log_path})\n{_diagnosis(run, work)}")
        run.seconds = time.monotonic() - began
        if problem is not None:
            pytest.fail(problem)
        run.leftovers = chaos_kit.wait_no_leftovers(work, run.chaos, LEFTOVER_GRACE_SECS)
        return run
    finally:
        run.chaos.stop()
        run.progress.stop()
        if handle.status in LIVE:
            handle.kill()
        killed = chaos_kit.kill_leftovers(work, run.chaos)
        if killed:
            print(f"{name}: tear-down killed pids {killed}")


def test_at_least_once_word_count_survives_chaos(spark, tmp_path, hconf):
    name = "chaos-alo"
    run = _run_under_chaos(spark, tmp_path, hconf, name, ALO_LINES, ALO_CHAOS_SECS, seed=11,
                           mode="ATLEAST_ONCE")
    result = chaos_kit.audit(run.text, run.out, hconf["heron.statemgr"], name, SPOUTS)
    print(run.summary(f"{result.replayed} replayed records"))
    assert run.handle.status == "FINISHED"
    assert len(run.chaos.actions) >= MIN_SIGNALS, run.chaos.summary()
    assert not result.lost, f"words counted fewer times than they occur: {result}"
    assert not result.unexpected, str(result)
    assert result.unacked_lines == 0, str(result)
    assert result.committed == len(run.text), str(result)
    assert run.progress.longest_stall_secs <= MAX_STALL_SECS, \
        f"no progress for {run.progress.longest_stall_secs:.1f} s; stalls {run.progress.stalls}"
    assert not run.leftovers, "processes left behind:\n" + "\n".join(run.leftovers)


def test_at_most_once_word_count_ends_under_chaos(spark, tmp_path, hconf):
    name = "chaos-amo"
    run = _run_under_chaos(spark, tmp_path, hconf, name, AMO_LINES, AMO_CHAOS_SECS, seed=12,
                           mode="ATMOST_ONCE", config=AMO_QUEUE_MARKS)
    _, unique, records = rwc.read_counts(run.out)
    expected = rwc.expected_counts(run.text)
    lost = sum((expected - unique).values())
    print(run.summary(f"lost {lost} of {sum(expected.values())} words, "
                      f"{records - sum(unique.values())} records seen twice"))
    assert run.handle.status == "FINISHED"
    assert len(run.chaos.actions) >= MIN_SIGNALS, run.chaos.summary()
    assert not unique - expected  # lost or not, nothing is invented
    assert not run.leftovers, "processes left behind:\n" + "\n".join(run.leftovers)
