"""Event time through whole topologies (in-process): timestamps, watermarks in band, idleness.

Each test builds input with known event times and checks, from what bolts saw, the rules of
``heron_spark.api.event_time`` computed here: timestamps carried and inherited, a bolt's
watermark the minimum over its upstream tasks, never above a tuple still to come.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from heron_spark import Bolt, Grouping, TopologyBuilder, TopologyValueError
from heron_spark.api.event_time import WATERMARK_MAX, WATERMARK_MIN
from heron_spark.testing import (COLLECT_DIR, CollectingBolt, Pause, ScriptedSpout, Stamped,
                                 Watermark, run_local)

TIMEOUT = 60
FAST = {"topology.bolts.watermark.event.interval.ms": 10}


class Double(Bolt):
    """Emits each value doubled: the emit inherits the input's timestamp."""

    outputs = ["value"]

    def process(self, tup):
        self.emit([tup.values[0] * 2])


class Restamp(Bolt):
    """Emits each value with a timestamp of its own: input's + 1 s."""

    outputs = ["value"]

    def process(self, tup):
        self.emit([tup.values[0]], timestamp=tup.timestamp + 1_000)


class EventLog(Bolt):
    """Logs, in order, every tuple (its timestamp, the watermark then) and every watermark."""

    outputs = []

    def initialize(self, config, context):
        self.context = context
        self.path = Path(config[COLLECT_DIR]) / f"log-{context.get_task_id()}.pkl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.events = []

    def process(self, tup):
        self.events.append(("tuple", tup.timestamp, self.context.get_current_watermark(),
                            tup.values[0]))

    def process_watermark(self, watermark_ms):
        self.events.append(("watermark", watermark_ms))

    def end_of_input(self):
        self.events.append(("end",))
        self.path.write_bytes(pickle.dumps(self.events))


def _scripted(builder: TopologyBuilder, name: str, par: int, **kwargs):
    spec = ScriptedSpout.spec(name=name, par=par, **kwargs)
    builder.add_spec(spec)
    return spec


def _logs(folder: Path) -> dict[int, list]:
    return {int(p.stem.split("-")[1]): pickle.loads(p.read_bytes())
            for p in folder.glob("log-*.pkl")}


@pytest.mark.parametrize("reliability", ["ATMOST_ONCE", "ATLEAST_ONCE"])
def test_timestamps_travel_with_tuples_and_emits_inherit_them(tmp_path, reliability):
    script = [Stamped((i,), 1_000_000 + 7 * i) for i in range(300)]
    builder = TopologyBuilder("stamps")
    spout = _scripted(builder, "numbers", 2, script=script)
    double = builder.add_bolt("double", Double, par=2, inputs={spout: Grouping.SHUFFLE})
    restamp = builder.add_bolt("restamp", Restamp, par=1, inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("doubled", CollectingBolt, par=1, inputs={double: Grouping.SHUFFLE})
    builder.add_bolt("restamped", CollectingBolt, par=1, inputs={restamp: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 2, "topology.reliability.mode": reliability,
                        "topology.bolt.auto.ack": True})
    run = run_local(builder.build(), timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    doubled = sorted((c.values[0], c.timestamp) for c in run.collected("doubled"))
    assert doubled == [(2 * i, 1_000_000 + 7 * i) for i in range(300)]
    restamped = sorted((c.values[0], c.timestamp) for c in run.collected("restamped"))
    assert restamped == [(i, 1_001_000 + 7 * i) for i in range(300)]


def test_a_timestamp_field_on_the_spout_stamps_each_tuple(tmp_path):
    script = [(f"e{i}", 5_000 + i) for i in range(50)] + [("bad", "not a time")]
    builder = TopologyBuilder("stamp_field")
    spout = _scripted(builder, "events", 1, script=script,
                              fields=("name", "at"),
                              config={"topology.bolts.tuple.timestamp.field.name": "at"})
    builder.add_bolt("sink", CollectingBolt, par=1, inputs={spout: Grouping.SHUFFLE})
    run = run_local(builder.build(), timeout=TIMEOUT, collect_dir=tmp_path)
    got = {c.values[0]: c.timestamp for c in run.collected("sink")}
    assert got == {**{f"e{i}": 5_000 + i for i in range(50)}, "bad": None}


def _fast_and_slow(slow_pause: float, idle_ms: int) -> TopologyBuilder:
    """Two spout tasks on one stream, one 40x slower, both over the same event times."""
    fast = [Stamped((f"f{i}",), 10_000 + 10 * i) for i in range(400)]
    slow = []
    for i in range(0, 400, 40):
        slow += [Stamped((f"s{j}",), 10_000 + 10 * j) for j in range(i, i + 40)]
        slow.append(Pause(slow_pause))
    builder = TopologyBuilder("fast_and_slow")
    spout = _scripted(builder, "events", 2, scripts=[fast, slow],
                              config={"heron.watermark.idle.ms": idle_ms})
    builder.add_bolt("log", EventLog, par=2, inputs={spout: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 2, **FAST})
    return builder


def test_no_tuple_of_a_slow_upstream_task_is_late_when_a_fast_one_runs_ahead(tmp_path):
    # Storm and Heron keep one watermark per input stream, moved by its fastest task: the
    # slow task's tuples then fall behind it. Here each task's upstream tasks count alone.
    run = run_local(_fast_and_slow(0.03, 10_000).build(), timeout=TIMEOUT,
                    collect_dir=tmp_path)
    assert run.status == "FINISHED"
    logs = _logs(tmp_path)
    tuples = [e for log in logs.values() for e in log if e[0] == "tuple"]
    assert len(tuples) == 800
    late = [e for e in tuples if e[1] < e[2]]
    assert late == []
    # the watermark did move while tuples still came (so the check above could fail)
    assert max(e[2] for e in tuples) > 10_000
    for log in logs.values():
        marks = [e[1] for e in log if e[0] == "watermark"]
        assert marks == sorted(marks) and marks[-1] == WATERMARK_MAX
        assert log[-1] == ("end",) and log[-2] == ("watermark", WATERMARK_MAX)
        # a watermark never passes a tuple that comes after it
        seen = WATERMARK_MIN
        for event in log:
            if event[0] == "watermark":
                seen = event[1]
            elif event[0] == "tuple":
                assert event[1] >= seen


def test_an_idle_upstream_task_stops_holding_the_watermark_back(tmp_path):
    # Task 0 emits up to 10,990 and then waits 1.5 s before its last tuple (idle after 0.2 s);
    # task 1 runs on towards 13,990: meanwhile the watermark passes 10,990 without task 0.
    early = [Stamped((f"a{i}",), 10_000 + 10 * i) for i in range(100)]
    busy = []
    for i in range(0, 400, 10):  # 0.8 s in all: on after task 0 went idle
        busy += [Stamped((f"b{j}",), 10_000 + 10 * j) for j in range(i, i + 10)]
        busy.append(Pause(0.02))
    builder = TopologyBuilder("idle_task")
    spout = _scripted(builder, "events", 2,
                      scripts=[[*early, Pause(1.5), Stamped(("late",), 10_500)], busy],
                      config={"heron.watermark.idle.ms": 200})
    builder.add_bolt("log", EventLog, par=1, inputs={spout: Grouping.SHUFFLE})
    builder.set_config(FAST)
    run = run_local(builder.build(), timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    (log,) = _logs(tmp_path).values()
    marks = [e[1] for e in log if e[0] == "watermark" and e[1] != WATERMARK_MAX]
    assert max(marks) > 12_000
    last = next(e for e in log if e[0] == "tuple" and e[3] == "late")
    assert last[2] > 10_500  # it came back behind the watermark: late, and it was seen


def test_an_explicit_watermark_goes_downstream_after_the_tuples_before_it(tmp_path):
    script = [Stamped(("x",), 100), Watermark(5_000), Stamped(("y",), 6_000),
              Watermark(9_000)]
    builder = TopologyBuilder("explicit")
    spout = _scripted(builder, "events", 1, script=script)
    builder.add_bolt("log", EventLog, par=1, inputs={spout: Grouping.SHUFFLE})
    run = run_local(builder.build(), timeout=TIMEOUT, collect_dir=tmp_path)
    (log,) = _logs(tmp_path).values()
    assert [e[:3] for e in log] == [("tuple", 100, WATERMARK_MIN), ("watermark", 5_000),
                                    ("tuple", 6_000, 5_000), ("watermark", 9_000),
                                    ("watermark", WATERMARK_MAX), ("end",)]
    metrics = run.handle.metrics()
    assert metrics["log"]["__watermark"] == float(WATERMARK_MAX)


def test_bad_event_time_settings_are_refused_before_launch():
    builder = TopologyBuilder("bad_lag")
    with pytest.raises(TopologyValueError) as caught:
        _scripted(builder, "events", 1, script=[],
                  config={"topology.bolts.tuple.timestamp.max.lag.ms": -5})
        run_local(builder.build(), timeout=TIMEOUT)
    assert caught.value.component == "events"
    builder = TopologyBuilder("bad_field")
    with pytest.raises(TopologyValueError) as caught:
        _scripted(builder, "events", 1, script=[], fields=("a",),
                  config={"topology.bolts.tuple.timestamp.field.name": "at"})
        run_local(builder.build(), timeout=TIMEOUT)
    assert caught.value.component == "events"
    assert caught.value.value == "at"


def test_emits_of_timestamped_input_reach_direct_and_custom_groupings(tmp_path):
    # The stamping fast path must leave streams chosen per tuple to the general emit.
    from heron_spark.api.custom_grouping import ICustomGrouping

    class Evens(ICustomGrouping):
        def prepare(self, context, component, stream, target_tasks):
            self.tasks = target_tasks

        def choose_tasks(self, values):
            return [self.tasks[values[0] % len(self.tasks)]]

    script = [Stamped((i,), 2_000 + i) for i in range(10)]
    builder = TopologyBuilder("stamped_custom")
    spout = _scripted(builder, "numbers", 1, script=script)
    double = builder.add_bolt("double", Double, par=1, inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("sink", CollectingBolt, par=2,
                     inputs={double: Grouping.custom(Evens())})
    run = run_local(builder.build(), timeout=TIMEOUT, collect_dir=tmp_path)
    got = sorted((c.values[0], c.timestamp) for c in run.collected("sink"))
    assert got == [(2 * i, 2_000 + i) for i in range(10)]


def test_event_time_keys_may_be_set_for_the_whole_topology(tmp_path):
    # heron.watermark.idle.ms is the topology's (each spout reads it), not a runtime key
    early = [Stamped((f"a{i}",), 10_000 + 10 * i) for i in range(10)]
    busy = []
    for i in range(0, 100, 10):
        busy += [Stamped((f"b{j}",), 10_000 + 10 * j) for j in range(i, i + 10)]
        busy.append(Pause(0.02))
    builder = TopologyBuilder("idle_topology_wide")
    spout = _scripted(builder, "events", 2, scripts=[[*early, Pause(0.4)], busy])
    builder.add_bolt("log", EventLog, par=1, inputs={spout: Grouping.SHUFFLE})
    builder.set_config({**FAST, "heron.watermark.idle.ms": 100,
                        "heron.window.allowed.lateness.ms": 0})
    run = run_local(builder.build(), timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    (log,) = _logs(tmp_path).values()
    marks = [e[1] for e in log if e[0] == "watermark" and e[1] != WATERMARK_MAX]
    assert max(marks) > 10_090  # past task 0's last tuple while it waited: it was idle
