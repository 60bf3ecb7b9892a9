"""Task hooks: every event of every task counted by hooks and checked against exact numbers,
in a topology run in this process (``run_local``), and hook details an executor shows with a
fake clock (timeouts, what a task without hooks runs)."""

from __future__ import annotations

import collections
import logging

import pytest

from heron_spark import Bolt, ConfigError, Grouping, Spout, TopologyBuilder, TopologyTypeError
from heron_spark.api.task_hook import (BoltAckInfo, BoltExecuteInfo, BoltFailInfo, EmitInfo,
                                       ITaskHook, SpoutAckInfo, SpoutFailInfo)
from heron_spark.api.tuple import HeronTuple
from heron_spark.config import SystemConfig
from heron_spark.instance.bolt_executor import BoltExecutor
from heron_spark.instance.spout_executor import SpoutExecutor
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.proto import stmgr_pb2
from heron_spark.testing import run_local
from heron_spark.wire import frames, tree_ids

N = 40  # tuples per spout task
EVENTS: collections.Counter = collections.Counter()   # (hook kind, component, event) -> count
INFOS: list = []                                       # (component, info) of every event


class CountingHook(ITaskHook):
    """Counts every call, by component; the auto hook (``topology.auto.task.hooks``)."""

    kind = "auto"

    def prepare(self, conf, context):
        self.component = context.get_component_id()
        self.task_id = context.get_task_id()
        EVENTS[(self.kind, self.component, "prepare")] += 1

    def _count(self, event, info):
        EVENTS[(self.kind, self.component, event)] += 1
        if self.kind == "auto":
            INFOS.append((self.component, self.task_id, info))

    def clean_up(self):
        EVENTS[(self.kind, self.component, "clean_up")] += 1

    def emit(self, emit_info):
        self._count("emit", emit_info)

    def spout_ack(self, spout_ack_info):
        self._count("spout_ack", spout_ack_info)

    def spout_fail(self, spout_fail_info):
        self._count("spout_fail", spout_fail_info)

    def bolt_execute(self, bolt_execute_info):
        self._count("bolt_execute", bolt_execute_info)

    def bolt_ack(self, bolt_ack_info):
        self._count("bolt_ack", bolt_ack_info)

    def bolt_fail(self, bolt_fail_info):
        self._count("bolt_fail", bolt_fail_info)


class AddedHook(CountingHook):
    """The same counts from a hook a component adds in ``initialize``."""

    kind = "added"


class Numbers(Spout):
    """Emits N reliable tuples; a failed one is not replayed."""

    outputs = ["n"]

    def initialize(self, config, context):
        self.n = 0
        self.acked, self.failed = set(), set()

    def next_tuple(self):
        if self.n == N:
            self.declare_exhausted()
            return
        self.n += 1
        self.emit([self.n], tup_id=self.n)

    def ack(self, tup_id):
        self.acked.add(tup_id)

    def fail(self, tup_id):
        self.failed.add(tup_id)


class Half(Bolt):
    """Emits each input on (anchored), then acks the even ones and fails the odd ones."""

    outputs = ["n"]

    def initialize(self, config, context):
        context.add_task_hook(AddedHook())

    def process(self, tup):
        self.emit([tup.values[0]], anchors=[tup])
        if tup.values[0] % 2 == 0:
            self.ack(tup)
        else:
            self.fail(tup)


class Sink(Bolt):
    auto_ack = True  # every input acked after process: bolt_ack from the automatic ack

    def process(self, tup):
        pass


def _topology(name: str = "hooks") -> TopologyBuilder:
    builder = TopologyBuilder(name)
    numbers = builder.add_spout("numbers", Numbers, par=2)
    half = builder.add_bolt("half", Half, par=2, inputs={numbers: Grouping.SHUFFLE})
    builder.add_bolt("sink", Sink, par=2, inputs={half: Grouping.fields("n")})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE",
                        "topology.auto.task.hooks": ["test_task_hooks.CountingHook"]})
    return builder


def test_hooks_see_every_event_of_every_task():
    EVENTS.clear()
    INFOS.clear()
    run = run_local(_topology())
    assert run.status == "FINISHED"
    total = 2 * N
    expected = {
        ("auto", "numbers", "prepare"): 2, ("auto", "numbers", "clean_up"): 2,
        ("auto", "numbers", "emit"): total,
        ("auto", "numbers", "spout_ack"): total // 2, ("auto", "numbers", "spout_fail"): total // 2,
        ("auto", "half", "prepare"): 2, ("auto", "half", "clean_up"): 2,
        ("auto", "half", "bolt_execute"): total, ("auto", "half", "emit"): total,
        ("auto", "half", "bolt_ack"): total // 2, ("auto", "half", "bolt_fail"): total // 2,
        ("auto", "sink", "prepare"): 2, ("auto", "sink", "clean_up"): 2,
        ("auto", "sink", "bolt_execute"): total, ("auto", "sink", "bolt_ack"): total,
    }
    # the hook "half" adds in initialize sees what the auto hook of "half" sees
    expected.update({("added",) + key[1:]: count for key, count in expected.items()
                     if key[1] == "half"})
    assert dict(EVENTS) == expected
    metrics = run.handle.metrics()
    assert metrics["numbers"]["__ack-count"] == total // 2
    assert metrics["numbers"]["__fail-count"] == total // 2


def test_at_most_once_bolts_still_report_acks_and_fails():
    """As in Heron, ``bolt_ack``/``bolt_fail`` follow the bolt's calls whatever the mode; no
    tree closes, so spouts report nothing, and auto-ack is an at-least-once feature."""
    EVENTS.clear()
    builder = _topology("hooks_at_most_once")
    builder.set_config({"topology.reliability.mode": "ATMOST_ONCE",
                        "topology.auto.task.hooks": [CountingHook]})
    assert run_local(builder).status == "FINISHED"
    total = 2 * N
    auto = {key[1:]: count for key, count in EVENTS.items() if key[0] == "auto"}
    assert auto[("half", "bolt_ack")] == auto[("half", "bolt_fail")] == total // 2
    assert auto[("numbers", "emit")] == auto[("half", "emit")] == total
    assert auto[("sink", "bolt_execute")] == total
    assert ("numbers", "spout_ack") not in auto and ("numbers", "spout_fail") not in auto
    assert ("sink", "bolt_ack") not in auto


def test_hook_infos_carry_heron_fields():
    EVENTS.clear()
    INFOS.clear()
    run_local(_topology("hook_infos"))
    kinds = collections.defaultdict(list)
    for component, task_id, info in INFOS:
        kinds[(component, type(info))].append((task_id, info))
    for task_id, info in kinds[("numbers", EmitInfo)]:
        assert info.task_id == task_id and info.stream_id == "default"
        assert info.out_tasks is None and 1 <= info.values[0] <= N
    for task_id, info in kinds[("numbers", SpoutAckInfo)]:
        assert info.spout_task_id == task_id and info.message_id % 2 == 0
        assert isinstance(info.complete_latency_ms, float) and info.complete_latency_ms >= 0
    for task_id, info in kinds[("numbers", SpoutFailInfo)]:
        assert info.spout_task_id == task_id and info.message_id % 2 == 1
        assert info.fail_latency_ms >= 0
    for task_id, info in kinds[("half", BoltExecuteInfo)]:
        assert info.executing_task_id == task_id and isinstance(info.heron_tuple, HeronTuple)
        assert info.heron_tuple.component == "numbers" and info.execute_latency_ms >= 0
    for task_id, info in kinds[("half", BoltAckInfo)]:
        assert info.acking_task_id == task_id and info.heron_tuple.values[0] % 2 == 0
        assert info.process_latency_ms >= 0
    for task_id, info in kinds[("half", BoltFailInfo)]:
        assert info.failing_task_id == task_id and info.heron_tuple.values[0] % 2 == 1
        assert info.fail_latency_ms >= 0
    assert sorted(v for _, i in kinds[("numbers", SpoutAckInfo)] for v in [i.message_id]) == \
        sorted(2 * [n for n in range(2, N + 1, 2)])


def test_field_names_are_heronpys():
    assert EmitInfo._fields == ("values", "stream_id", "task_id", "out_tasks")
    assert SpoutAckInfo._fields == ("message_id", "spout_task_id", "complete_latency_ms")
    assert SpoutFailInfo._fields == ("message_id", "spout_task_id", "fail_latency_ms")
    assert BoltExecuteInfo._fields == ("heron_tuple", "executing_task_id", "execute_latency_ms")
    assert BoltAckInfo._fields == ("heron_tuple", "acking_task_id", "process_latency_ms")
    assert BoltFailInfo._fields == ("heron_tuple", "failing_task_id", "fail_latency_ms")
    from heronpy.api.task_hook import ITaskHook as HeronpyITaskHook

    assert HeronpyITaskHook is ITaskHook


def test_a_bad_hook_class_fails_before_launch():
    builder = _topology("bad_hooks")
    builder.set_config({"topology.auto.task.hooks": ["test_task_hooks.NoSuchHook"]})
    with pytest.raises(ConfigError) as caught:
        run_local(builder)
    assert caught.value.key == "topology.auto.task.hooks"
    with pytest.raises(ConfigError):
        run_local(_topology("not_a_hook"),
                  conf={"topology.auto.task.hooks": ["test_task_hooks.Numbers"]})


# ---- executors with a fake clock ------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


class Recorder(ITaskHook):
    """Remembers every info (the hook a unit test adds)."""

    def __init__(self) -> None:
        self.infos: list = []

    def emit(self, emit_info):
        self.infos.append(emit_info)

    def spout_ack(self, spout_ack_info):
        self.infos.append(spout_ack_info)

    def spout_fail(self, spout_fail_info):
        self.infos.append(spout_fail_info)


def _executors(hooked: bool):
    builder = _topology("hooks_unit")
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE",
                        "topology.message.timeout.secs": 5,
                        **({"topology.auto.task.hooks": [Recorder]} if hooked else {})})
    logical = build_logical_plan(builder.build())
    view = PlanView(logical, pack(logical))
    clock = Clock()
    made = {}
    for component, cls in (("numbers", SpoutExecutor), ("half", BoltExecutor),
                           ("sink", BoltExecutor)):
        executor = cls(view, view.component_tasks[component][0], SystemConfig(), [].append,
                       logging.getLogger("test"), clock=clock)
        executor.on_frame(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
            start=stmgr_pb2.StartProcessing(generation=0))))
        made[component] = executor
    return made, clock


def test_spout_hooks_get_tree_latencies_and_the_timeout():
    made, clock = _executors(hooked=True)
    spout = made["numbers"]
    recorder = spout.context.task_hooks[0]
    spout.run_slice(clock())                   # opens trees 1..N at t=50
    assert [type(i) for i in recorder.infos] == [EmitInfo] * N
    recorder.infos.clear()
    roots = list(spout.trees._open)
    clock.now += 2.0
    spout.on_frame(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
        trees=stmgr_pb2.TreesDone(acked=tree_ids.pack(roots[:2]),
                                  failed=tree_ids.pack(roots[2:3])))))
    assert [type(i) for i in recorder.infos] == [SpoutAckInfo, SpoutAckInfo, SpoutFailInfo]
    assert [i.message_id for i in recorder.infos] == [1, 2, 3]
    assert [i[2] for i in recorder.infos] == pytest.approx([2000.0, 2000.0, 2000.0])
    recorder.infos.clear()
    clock.now += 10.0                          # the other trees time out (5 s)
    spout.on_time(clock())
    assert len(recorder.infos) == len(roots) - 3
    assert {type(i) for i in recorder.infos} == {SpoutFailInfo}
    assert {i.fail_latency_ms for i in recorder.infos} == {5000.0}


def test_emit_info_names_the_tasks_an_emit_asked_for():
    made, _ = _executors(hooked=True)
    spout = made["numbers"]
    recorder = spout.context.task_hooks[0]
    targets = spout.component.emit([7], need_task_ids=True)
    assert targets and set(targets) <= set(spout.plan.component_tasks["half"])
    assert recorder.infos == [EmitInfo([7], "default", spout.task_id, targets)]


def test_a_task_without_hooks_keeps_its_fast_paths():
    made, _ = _executors(hooked=False)
    assert made["half"].hooks is not None                  # it adds one in initialize
    for executor in (made["numbers"], made["sink"]):
        assert executor.hooks is None
        assert "emit" not in executor.__dict__             # no hooked wrapper
    spout = made["numbers"]
    assert spout.component.__dict__["emit"] == spout.collector.spout_emit_tracked  # fast path
    made, _ = _executors(hooked=True)
    for executor in made.values():
        assert executor.hooks is not None
        assert "emit" not in executor.component.__dict__
        assert "emit" in executor.__dict__


def test_add_task_hook_takes_task_hooks_only():
    made, _ = _executors(hooked=False)
    with pytest.raises(TopologyTypeError) as caught:
        made["half"].context.add_task_hook(object())
    assert caught.value.component == "half"
