"""Event-time window bolts in whole topologies (in this process): several spout tasks emitting
out-of-order event times at different speeds, every window checked against windows computed
here from the event times alone; allowed lateness refiring a window; the late stream; tuples
without event time; and, under effectively once, a crash that the pending windows survive."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import event_window_eo as eo
import fault_support as faults
from heron_spark import (Grouping, SessionWindowBolt, SlidingWindowBolt, Spout, TopologyBuilder,
                         TumblingWindowBolt)
from heron_spark.inprocess import InProcessTopology
from heron_spark.scheduler.submit import submit
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import COLLECT_DIR, CollectingBolt, run_local, wait_until

TIMEOUT = 30
FAST_WATERMARKS = {"topology.bolts.watermark.event.interval.ms": 10}
LAG = "topology.bolts.tuple.timestamp.max.lag.ms"


def _task_events(seed: int, tasks: int, count: int, disorder: int) -> list[list[list]]:
    """Per spout task, [name, ts] in emit order: rising by 0..30 ms with up to ``disorder`` ms
    of jitter (out of order within the task, by less than its lag)."""
    rng = random.Random(seed)
    out = []
    for task in range(tasks):
        base, events = 10_000 + rng.randrange(50), []
        for n in range(count):
            base += rng.randrange(31)
            events.append([f"t{task}-{n}", base + rng.randrange(disorder + 1)])
        out.append(events)
    return out


class EventSpout(Spout):
    """Task k emits ``events.per.task[k]`` ([name, ts]), one every k + 1 calls (so the tasks
    run at different speeds), each at its event time ``ts``."""

    outputs = ["name", "ts"]

    def initialize(self, config, context):
        self.events = list(config["events.per.task"][context.get_task_index()])
        self.every = context.get_task_index() + 1
        self.use_field = bool(config.get("topology.bolts.tuple.timestamp.field.name"))
        self.calls = 0

    def next_tuple(self):
        self.calls += 1
        if self.calls % self.every:
            return
        if not self.events:
            self.declare_exhausted()
            return
        name, ts = self.events.pop(0)
        if self.use_field:  # the spout takes the event time from its field "ts"
            self.emit([name, ts])
        else:
            self.emit([name, ts], timestamp=ts)


class Report:
    """processWindow for the three window bolts: emit (start, end, names, watermark)."""

    outputs = ["start", "end", "names", "watermark"]

    def initialize(self, config, context):
        super().initialize(config, context)  # type: ignore[misc]
        self.context = context

    def processWindow(self, window_info, tuples):  # noqa: N802 (heronpy's name)
        self.emit([window_info.start, window_info.end, sorted(t.values[0] for t in tuples),  # type: ignore[attr-defined]
                   self.context.get_current_watermark()])


class ReportTumbling(Report, TumblingWindowBolt):
    pass


class ReportSliding(Report, SlidingWindowBolt):
    pass


class ReportSessions(Report, SessionWindowBolt):
    pass


def _topology(name, bolt, bolt_config, events, *, bolts=1, spout_config=None, config=None):
    builder = TopologyBuilder(name)
    spout = builder.add_spout("events", EventSpout, par=len(events),
                              config={"events.per.task": events, **(spout_config or {})})
    windows = builder.add_bolt("windows", bolt, par=bolts, inputs={spout: Grouping.SHUFFLE},
                               config=bolt_config)
    builder.add_bolt("collect", CollectingBolt, par=1, inputs={windows: Grouping.SHUFFLE})
    builder.set_config({**FAST_WATERMARKS, **(config or {})})
    return builder


def _aligned(ts, size, slide):
    out, k = [], ts // slide
    while k * slide + size > ts:
        out.append((k * slide, k * slide + size))
        k -= 1
    return out


def _expected_windows(events, size, slide) -> dict:
    expected: dict = {}
    for name, ts in (e for task in events for e in task):
        for bounds in _aligned(ts, size, slide):
            expected.setdefault(bounds, []).append(name)
    return {k: sorted(v) for k, v in expected.items()}


def _expected_sessions(events, gap) -> dict:
    ordered = sorted(((ts, name) for task in events for name, ts in task))
    out, group = {}, [ordered[0]]
    for ts, name in ordered[1:]:
        if ts - group[-1][0] >= gap:
            out[(group[0][0], group[-1][0] + gap)] = sorted(n for _, n in group)
            group = []
        group.append((ts, name))
    out[(group[0][0], group[-1][0] + gap)] = sorted(n for _, n in group)
    return out


def _check_firings(run, expected: dict) -> None:
    """Every window fired once per task, at ts end - 1, once the watermark passed its end;
    the windows of all tasks together hold exactly the expected names."""
    got: dict = {}
    fired = run.collected("collect")
    for c in fired:
        start, end, names, watermark = c.values
        assert watermark >= end and c.timestamp == end - 1
        got.setdefault((start, end), []).extend(names)
    assert {k: sorted(v) for k, v in got.items()} == expected
    # (how many fire before the end of input depends on timing; the lateness test below
    # waits for windows that must fire while the spout still runs)


@pytest.mark.parametrize("seed", [1, 2])
def test_tumbling_windows_of_out_of_order_spouts_hold_exactly_their_event_times(tmp_path, seed):
    events = _task_events(seed, tasks=3, count=120, disorder=40)
    bolt_config = {"heron.window.event.time": True, "tumblingwindowbolt_duration_secs": 0.1}
    run = run_local(_topology(f"tumbling-{seed}", ReportTumbling, bolt_config, events,
                              bolts=2, spout_config={LAG: 40}),
                    timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    _check_firings(run, _expected_windows(events, 100, 100))


def test_sliding_windows_of_spouts_taking_the_time_from_a_field(tmp_path):
    events = _task_events(3, tasks=3, count=100, disorder=25)
    bolt_config = {"heron.window.event.time": True,
                   "topology.bolts.window.length.duration.ms": 100,
                   "topology.bolts.window.sliding.interval.duration.ms": 40}
    spout_config = {LAG: 25, "topology.bolts.tuple.timestamp.field.name": "ts"}
    run = run_local(_topology("sliding", ReportSliding, bolt_config, events,
                              spout_config=spout_config), timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    _check_firings(run, _expected_windows(events, 100, 40))


def test_sessions_read_from_the_bolts_timestamp_field(tmp_path):
    events = _task_events(4, tasks=2, count=120, disorder=20)
    bolt_config = {"topology.bolts.tuple.timestamp.field.name": "ts",
                   "sessionwindowbolt_gap_ms": 25}
    run = run_local(_topology("sessions", ReportSessions, bolt_config, events,
                              spout_config={LAG: 20}), timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    expected = _expected_sessions(events, 25)
    assert len(expected) > 5  # the input has gaps: several sessions
    _check_firings(run, expected)


class UserSessions(ReportSessions):
    """Sessions per user (a name's number modulo 3)."""

    def session_key(self, tup):
        return int(tup.values[0].split("-")[1]) % 3


def test_sessions_kept_per_key(tmp_path):
    events = _task_events(8, tasks=2, count=150, disorder=20)
    builder = TopologyBuilder("user-sessions")
    spout = builder.add_spout("events", EventSpout, par=2,
                              config={"events.per.task": events, LAG: 20})
    windows = builder.add_bolt("windows", UserSessions, par=1,
                               inputs={spout: Grouping.SHUFFLE},
                               config={"heron.window.event.time": True,
                                       "sessionwindowbolt_gap_ms": 40})
    builder.add_bolt("collect", CollectingBolt, par=1, inputs={windows: Grouping.SHUFFLE})
    builder.set_config(FAST_WATERMARKS)
    run = run_local(builder, timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    expected: dict = {}
    for user in range(3):
        mine = [[[n, ts] for n, ts in task if int(n.split("-")[1]) % 3 == user]
                for task in events]
        expected.update({(user, *k): v for k, v in _expected_sessions(mine, 40).items()})
    got = sorted((int(c.values[2][0].split("-")[1]) % 3, c.values[0], c.values[1],
                  c.values[2]) for c in run.collected("collect"))
    assert got == sorted((*k, v) for k, v in expected.items())


# --- lateness, the late stream, tuples without event time -------------------------------------

WAIT = "wait"


class ScriptSpout(Spout):
    """Emits ``script`` items [name, ts] (ts None: no event time) with message ids; an item
    ["wait", names] waits until those names were acked. Acks and fails go to a log file."""

    outputs = ["name", "ts"]

    def initialize(self, config, context):
        self.script = list(config["script"])
        self.acked: set = set()
        self.log = open(Path(config[COLLECT_DIR]) / "spout.log", "a")  # noqa: SIM115

    def next_tuple(self):
        if not self.script:
            # the input is over: the task's watermark goes to WATERMARK_MAX at once, so the
            # last windows fire while the trees of their tuples are still open
            self.declare_exhausted()
            return
        first, second = self.script[0]
        if first == WAIT:
            if set(second) <= self.acked:
                self.script.pop(0)
            return
        self.script.pop(0)
        self.emit([first, second], tup_id=first, timestamp=second)

    def ack(self, tup_id):
        self.acked.add(tup_id)
        self.log.write(f"ack {tup_id}\n")
        self.log.flush()

    def fail(self, tup_id):
        self.log.write(f"fail {tup_id}\n")
        self.log.flush()

    def close(self):
        self.log.close()


def _spout_log(folder: Path) -> dict:
    out: dict = {"ack": [], "fail": []}
    for line in (folder / "spout.log").read_text().splitlines():
        kind, name = line.split()
        out[kind].append(name)
    return out


class Windows(TumblingWindowBolt):
    outputs = ["start", "end", "names"]

    def processWindow(self, window_info, tuples):  # noqa: N802
        self.emit([window_info.start, window_info.end, [t.values[0] for t in tuples]])


def _late_topology(name, script, bolt_config):
    builder = TopologyBuilder(name)
    spout = builder.add_spout("events", ScriptSpout, par=1, config={"script": script})
    windows = builder.add_bolt("windows", Windows, par=1, inputs={spout: Grouping.SHUFFLE},
                               config=bolt_config)
    builder.add_bolt("collect", CollectingBolt, par=1,
                     inputs={windows: Grouping.SHUFFLE, windows["late"]: Grouping.SHUFFLE}
                     if "topology.bolts.late.tuple.stream" in bolt_config
                     else {windows: Grouping.SHUFFLE}, config={"topology.bolt.auto.ack": True})
    builder.set_config({**FAST_WATERMARKS, "topology.reliability.mode": "ATLEAST_ONCE",
                        "topology.message.timeout.secs": 10})
    return builder


def test_a_late_tuple_refires_its_kept_window_and_later_ones_take_the_late_stream(tmp_path):
    script = [["a", 100], ["b", 600], ["c", 1500],
              [WAIT, ["a", "b"]],   # [0, 1000) fired: the watermark is 1500
              ["e", 700],           # late, but [0, 1000) is kept until 4000: it fires again
              ["f", 9000],
              [WAIT, ["c"]],        # [1000, 2000) fired: the watermark is 9000
              ["g", 800], ["h", 1800],  # both windows purged: late tuples
              ["i", 8500]]          # late, [8000, 9000) kept until 12000: fires at once
    config = {"heron.window.event.time": True, "tumblingwindowbolt_duration_secs": 1,
              "heron.window.allowed.lateness.ms": 3000,
              "topology.bolts.late.tuple.stream": "late"}
    run = run_local(_late_topology("late", script, config), timeout=TIMEOUT,
                    collect_dir=tmp_path)
    assert run.status == "FINISHED"
    collected = run.collected("collect")
    windows = [tuple(c.values) for c in collected if c.stream == "default"]
    assert windows == [(0, 1000, ["a", "b"]), (0, 1000, ["a", "b", "e"]), (1000, 2000, ["c"]),
                       (8000, 9000, ["i"]), (9000, 10000, ["f"])]
    assert [c.values for c in collected if c.stream == "late"] == [(("g", 800),),
                                                                   (("h", 1800),)]
    log = _spout_log(tmp_path)
    assert sorted(log["ack"]) == list("abcefghi") and not log["fail"]
    assert run.handle.metrics()["windows"]["__late-tuples"] == 2


def test_without_a_late_stream_late_tuples_are_acked_and_untimed_ones_fail(tmp_path):
    script = [["a", 100], ["b", 2500], [WAIT, ["a"]], ["late", 50], ["untimed", None]]
    config = {"heron.window.event.time": True, "tumblingwindowbolt_duration_secs": 1}
    run = run_local(_late_topology("no-late-stream", script, config), timeout=TIMEOUT,
                    collect_dir=tmp_path)
    assert run.status == "FINISHED"
    assert [tuple(c.values) for c in run.collected("collect")] == [(0, 1000, ["a"]),
                                                                   (2000, 3000, ["b"])]
    log = _spout_log(tmp_path)
    assert sorted(log["ack"]) == ["a", "b", "late"] and log["fail"] == ["untimed"]
    assert run.handle.metrics()["windows"]["__late-tuples"] == 2  # the late and the untimed


def test_untimed_tuples_take_the_late_stream_when_there_is_one(tmp_path):
    script = [["a", 100], ["untimed", None], ["b", 300]]
    config = {"topology.bolts.tuple.timestamp.field.name": "ts",
              "tumblingwindowbolt_duration_secs": 1, "topology.bolts.late.tuple.stream": "late"}
    run = run_local(_late_topology("untimed", script, config), timeout=TIMEOUT,
                    collect_dir=tmp_path)
    collected = run.collected("collect")
    assert [tuple(c.values) for c in collected if c.stream == "default"] == [
        (0, 1000, ["a", "b"])]
    assert [c.values for c in collected if c.stream == "late"] == [(("untimed", None),)]
    assert sorted(_spout_log(tmp_path)["ack"]) == ["a", "b", "untimed"]


# --- effectively once: the pending windows survive a crash --------------------------------------

@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_effectively_once_windows_survive_a_crash_exactly(tmp_path, backend):
    """The window task raises once, mid-run, after checkpoints: the rollback restores its
    pending windows (without them, the tuples of windows open at the checkpoint are lost: the
    spouts rewind only to the checkpoint)."""
    events = _task_events(5, tasks=2, count=150, disorder=30)
    topology = eo.build("eo-windows", events, tmp_path, pace_ms=1, crash_at=200,
                        extra={**FAST_WATERMARKS, "heron.state.backend": backend,
                               "topology.stateful.checkpoint.interval.seconds": 0.05})
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work")})
    assert run.run(timeout=TIMEOUT) == "FINISHED"
    assert (tmp_path / "crashed").exists()
    status = run.checkpoints.status()
    assert status["restores"] == 2 and status["restored_from"][1] > 0, status
    assert eo.read_windows(tmp_path) == _expected_windows(events, 200, 200)


@pytest.mark.fault
def test_effectively_once_windows_survive_a_kill_9_exactly(spark, tmp_path, hconf):
    """kill -9 of a window task's process after two committed checkpoints: exact windows."""
    events = _task_events(6, tasks=2, count=1500, disorder=30)
    name = "eo-windows-kill"
    topology = eo.build(name, events, tmp_path, pace_ms=4, crash_at=0, windows=2,
                        extra={**FAST_WATERMARKS, "topology.stmgrs": 2,
                               "topology.stateful.checkpoint.interval.seconds": 0.5})
    handle = submit(topology, spark=spark.session, conf=hconf, master="local[4]")
    handle.wait_running(timeout=120)
    with open_state_manager(hconf["heron.statemgr"]) as statemgr:
        wait_until(lambda: int((statemgr.get_committed_checkpoint(name) or {}).get("id", 0))
                   >= 2, 90, message="2 committed checkpoints")
    [victim, *_] = faults.find(tmp_path / "work" / name, "instance", component="windows")
    faults.kill9(victim)
    assert handle.wait(timeout=240) == "FINISHED", handle.status_detail()
    assert sum(handle.status_detail()["instance_failures"].values()) >= 1
    assert max(handle.status_detail()["checkpoint"]["restored_from"]) > 0
    assert eo.read_windows(tmp_path) == _expected_windows(events, 200, 200)
