"""The in-process runner: whole topologies on the stmgr and instance cores, without Spark.

Results are compared with expectations computed here, without the engine; failures, replays
and backpressure go through the same core code as on Spark.
"""

from __future__ import annotations

import collections
import time

import pytest

from examples import word_count
from heron_spark import (Bolt, Grouping, Spout, Topology, TopologyBuilder, TopologyRuntimeError,
                         TopologyValueError)
from heron_spark.inprocess import InProcessTopology
from heron_spark.testing import CollectingBolt, ManualClock, Pause, ScriptedSpout, run_local

TIMEOUT = 60


def test_word_count_is_exact_on_two_containers(tmp_path):
    run = run_local(word_count.build(2_000), timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    assert word_count.final_counts(run.collected()) == word_count.expected_counts(2_000, 2)
    metrics = run.handle.metrics()
    assert metrics["split"]["__execute-count"] == 4_000
    assert metrics["__stmgr__"]["__tuples-routed"] > 0
    assert len(run.handle.physical_plan.stmgrs) == 2


class Lines(Spout):
    """Emits lines ``i`` for i in range(n) with message ids; replays what fails."""

    outputs = ["line"]

    def initialize(self, config, context):
        self.next = context.get_task_index()
        self.step = context.get_component_parallelism(context.get_component_id())
        self.limit = int(config["lines"])
        self.replay = collections.deque()
        self.failed = 0

    def next_tuple(self):
        if self.replay:
            line = self.replay.popleft()
        elif self.next < self.limit:
            line, self.next = self.next, self.next + self.step
        else:
            self.declare_exhausted()
            return
        self.emit([line], tup_id=line)

    def fail(self, tup_id):
        self.failed += 1
        self.replay.append(tup_id)


class FailFirstSight(Bolt):
    """Fails every 7th line the first time it sees it; passes the rest on, anchored."""

    outputs = ["line"]

    def initialize(self, config, context):
        self.seen = set()

    def process(self, tup):
        line = tup.values[0]
        if line % 7 == 0 and line not in self.seen:
            self.seen.add(line)
            self.fail(tup)
            return
        self.emit([line], anchors=[tup])
        self.ack(tup)


class AckingCollector(CollectingBolt):
    def process(self, tup):
        super().process(tup)
        self.ack(tup)


def _replaying_topology(lines: int):
    builder = TopologyBuilder("replay_in_process")
    spout = builder.add_spout("lines", Lines, par=2)
    gate = builder.add_bolt("gate", FailFirstSight, par=2, inputs={spout: Grouping.fields("line")})
    builder.add_bolt("sink", AckingCollector, par=2, inputs={gate: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 2, "topology.reliability.mode": "ATLEAST_ONCE",
                        "lines": lines})
    return builder.build()


def test_at_least_once_replays_failed_tuples_exactly(tmp_path):
    run = run_local(_replaying_topology(700), timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    got = collections.Counter(item.values[0] for item in run.collected("sink"))
    assert got == collections.Counter(range(700))  # every line once: failed ones replayed
    metrics = run.handle.metrics()
    assert metrics["lines"]["__fail-count"] == 100  # 0, 7, ..., 693
    assert metrics["lines"]["__ack-count"] == 700
    assert metrics["__stmgr__"]["__trees-open"] == 0


class Flaky(Bolt):
    """Raises on value 3 the first time any task sees it in this process."""

    raised: set = set()

    def process(self, tup):
        if tup.values[0] == 3 and "once" not in Flaky.raised:
            Flaky.raised.add("once")
            raise RuntimeError("flaky bolt 3b9c")


class FlakyTopology(Topology):
    src = ScriptedSpout.spec(par=1, script=[(i,) for i in range(10)])
    flaky = Flaky.spec(par=1, inputs={src: Grouping.SHUFFLE})


def test_a_crashing_task_is_restarted_and_the_run_finishes():
    runner = InProcessTopology(FlakyTopology)
    assert runner.run(timeout=TIMEOUT) == "FINISHED"
    assert runner.metrics()["flaky"]["__instance-failures"] == 1
    assert "flaky bolt 3b9c" in runner.failure.error


class AlwaysRaises(Bolt):
    def process(self, tup):
        raise ValueError("broken bolt 51e2")


class BrokenTopology(Topology):
    src = ScriptedSpout.spec(par=1, script=[item for i in range(50)
                                            for item in ((i,), Pause(0.02))])  # a batch each
    broken = AlwaysRaises.spec(par=1, inputs={src: Grouping.SHUFFLE})


def test_a_task_failing_too_often_fails_the_run_naming_it():
    with pytest.raises(TopologyRuntimeError) as info:
        run_local(BrokenTopology, timeout=TIMEOUT, conf={"heron.instance.restart.max": 2})
    assert info.value.component == "broken"
    assert "broken bolt 51e2" in str(info.value)


class Endless(Spout):
    outputs = ["n"]

    def next_tuple(self):
        self.emit([1])


class Slow(Bolt):
    def process(self, tup):
        time.sleep(0.0005)


def test_an_unbounded_run_times_out_with_backpressure_bounding_its_queues(tmp_path):
    builder = TopologyBuilder("endless_in_process")
    src = builder.add_spout("src", Endless, par=1)
    builder.add_bolt("slow", Slow, par=1, inputs={src: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 1})
    runner = InProcessTopology(builder.build(), conf={
        "heron.batch.max.tuples": 256,
        "heron.stmgr.backpressure.high.water.tuples": 2_000,
        "heron.stmgr.backpressure.low.water.tuples": 1_000})
    with pytest.raises(TimeoutError):
        runner.run(timeout=3)
    assert runner.status == "KILLED"
    stmgr = runner.metrics()["__stmgr__"]
    assert stmgr["__backpressure-episodes"] >= 1
    emitted = runner.metrics()["src"]["__emit-count/default"]
    executed = runner.metrics()["slow"]["__execute-count"]
    assert emitted - executed <= 2_000 + 2 * 256  # the tuple mark, plus what was in flight


def test_run_local_names_the_engines_it_knows():
    with pytest.raises(TopologyValueError) as info:
        run_local(FlakyTopology, engine="threads")
    assert info.value.value == "threads"


class FortyIds(Spout):
    """Emit 40 tuples with message ids, then end; record what the stmgr reports back."""

    outputs = ["n"]
    acked: list = []
    failed: list = []

    def initialize(self, config, context):
        self.left = 40

    def next_tuple(self):
        if self.left:
            self.emit([self.left], tup_id=self.left)
            self.left -= 1
        else:
            self.declare_exhausted()

    def ack(self, tup_id):
        FortyIds.acked.append(tup_id)

    def fail(self, tup_id):
        FortyIds.failed.append(tup_id)


class HoldThenAck(Bolt):
    """Hold each tuple ``HOLD_SECS`` of the test's clock, then ack it (a window bolt's way)."""

    HOLD_SECS = 5.0
    clock: ManualClock | None = None

    def initialize(self, config, context):
        self.held = collections.deque()

    def process(self, tup):
        self.held.append((HoldThenAck.clock(), tup))

    def process_tick(self, tup):
        while self.held and self.held[0][0] <= HoldThenAck.clock() - self.HOLD_SECS:
            self.ack(self.held.popleft()[1])


def test_with_message_timeouts_off_trees_acked_long_after_the_timeout_complete():
    """Timeouts off, a bolt acking each tuple 5 s after it came, past twice the 2 s message
    timeout: every tree completes and the bounded run finishes (the fake clock moves only
    while the runner idles, so this takes a fraction of a second)."""
    clock = ManualClock()
    HoldThenAck.clock = clock
    FortyIds.acked, FortyIds.failed = [], []
    builder = TopologyBuilder("late_acks_in_process")
    src = builder.add_spout("src", FortyIds, par=1)
    builder.add_bolt("hold", HoldThenAck, par=2, inputs={src: Grouping.SHUFFLE},
                     config={"topology.tick.tuple.freq.secs": 0.5})
    builder.set_config({"topology.stmgrs": 2, "topology.reliability.mode": "ATLEAST_ONCE",
                        "topology.message.timeout.secs": 2,
                        "topology.enable.message.timeouts": False})
    runner = InProcessTopology(builder.build(), clock=clock, sleep=clock.sleep)
    assert runner.run(timeout=30) == "FINISHED"
    assert sorted(FortyIds.acked) == list(range(1, 41)) and FortyIds.failed == []
    assert runner.metrics()["__stmgr__"]["__trees-expired"] == 0
