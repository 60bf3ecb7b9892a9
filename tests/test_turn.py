"""One instance turn (``TaskExecutor.turn``), driven without sockets and with a fake clock:
directly, by the instance process's loop (``runtime.serve``, on a fake loop and channel) and by
the in-process runner. The output gate opens and closes with the same hysteresis everywhere,
and ``turn`` returns when the task next needs one."""

from __future__ import annotations

import collections

import pytest

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.config import SystemConfig
from heron_spark.inprocess import InProcessTopology
from heron_spark.instance.executor import OutputGate, Stop
from heron_spark.instance.runtime import serve
from heron_spark.instance.shell import build_executor, failure_frame
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.proto import stmgr_pb2, tmaster_pb2
from heron_spark.wire import frames, tuple_batch

HIGH = 1000  # heron.instance.out.queue.bytes of these tests: the gate reopens at 500


class Clock:
    """A monotonic clock that moves only when told (``sleep`` moves it)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, secs: float) -> None:
        self.now += secs


class Count(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.left = 3

    def next_tuple(self):
        if self.left:
            self.emit([self.left])
            self.left -= 1


class Slowish(Bolt):
    """Moves the fake clock by ``cost`` per tuple (set by the test)."""

    clock: Clock | None = None
    cost = 0.0

    def process(self, tup):
        if Slowish.clock is not None:
            Slowish.clock.now += Slowish.cost


def _view(conf: dict | None = None) -> PlanView:
    builder = TopologyBuilder("turns")
    count = builder.add_spout("count", Count, par=1)
    builder.add_bolt("slowish", Slowish, par=1, inputs={count: Grouping.SHUFFLE})
    builder.set_config({"topology.reliability.mode": "ATMOST_ONCE", **(conf or {})})
    logical = build_logical_plan(builder.build())
    return PlanView(logical, pack(logical))


def _start_frame() -> bytes:
    return frames.control_frame(stmgr_pb2.StmgrToInstance(
        start=stmgr_pb2.StartProcessing(generation=0)))


def _data_frame(view: PlanView, rows: int) -> bytes:
    src = view.component_tasks["count"][0]
    dest = view.component_tasks["slowish"][0]
    return frames.data_frame(frames.TUPLES, src, dest, rows, b"default",
                             tuple_batch.encode(["n"], [(i,) for i in range(rows)]))


def _executor(component: str, queued: list, clock: Clock, conf: dict | None = None,
              **system):
    view = _view(conf)
    sent: list = []
    config = SystemConfig(instance_out_queue_bytes=HIGH, batch_linger_ms=0, **system)
    executor = build_executor(view, view.component_tasks[component][0], config, sent.append,
                              clock=clock, output_queued=lambda: queued[0])
    return view, executor, sent


def test_the_gate_closes_past_the_high_mark_and_opens_at_half_of_it():
    gate = OutputGate(HIGH)
    assert [gate.check(q) for q in (0, HIGH, HIGH + 1, HIGH, 501, 500, 900, HIGH + 1)] == \
        [True, True, False, False, False, True, True, False]
    assert gate.closings == 2


def test_a_bolt_takes_input_only_while_its_output_gate_is_open():
    clock, queued = Clock(), [0]
    view, bolt, _ = _executor("slowish", queued, clock)
    assert bolt.turn(clock()) is None  # not started: it waits for input only
    bolt.offer(frames.CONTROL, _start_frame())
    wake_at = bolt.turn(clock())
    assert bolt.started and wake_at == bolt.next_deadline(clock()) and wake_at > clock()
    for _ in range(3):
        bolt.offer(frames.DATA, _data_frame(view, 10))
    inbox = bolt.inbox_bytes
    assert inbox > 0 and not bolt.accepting()  # it holds input: the shell reads no more

    queued[0] = HIGH + 1  # the stmgr has not taken our output: the gate closes
    assert bolt.turn(clock()) > clock() and bolt.executed == 0 and bolt.inbox_bytes == inbox
    queued[0] = HIGH // 2 + 1  # above the low mark: still closed
    assert bolt.turn(clock()) > clock() and bolt.executed == 0 and bolt.gate.closings == 1
    queued[0] = HIGH // 2
    assert bolt.turn(clock()) > clock() and bolt.executed == 30 and bolt.inbox_bytes == 0
    assert bolt.accepting()

    # the output passes the mark while the turn takes its input: the rest waits
    for _ in range(3):
        bolt.offer(frames.DATA, _data_frame(view, 10))
    bolt.output_queued = lambda: HIGH + 1 if bolt.executed >= 40 else 0
    assert bolt.turn(clock()) > clock() and bolt.executed == 40
    assert not bolt.accepting() and bolt.gate.closings == 2


def test_a_bolt_turn_takes_input_for_one_flush_interval_then_comes_back_at_once():
    clock, queued = Clock(), [0]
    view, bolt, _ = _executor("slowish", queued, clock, batch_flush_interval_ms=5.0)
    bolt.offer(frames.CONTROL, _start_frame())
    bolt.turn(clock())
    Slowish.clock, Slowish.cost = clock, 0.001  # 1 ms per tuple, 3 ms per frame
    try:
        for _ in range(4):
            bolt.offer(frames.DATA, _data_frame(view, 3))
        assert bolt.turn(clock()) == clock()  # two frames in 6 ms: out of time, due at once
        assert bolt.executed == 6 and not bolt.accepting()
        assert bolt.turn(clock()) > clock() and bolt.executed == 12
    finally:
        Slowish.clock = None


def test_a_bolt_wakes_for_its_ticks_and_its_metrics():
    clock, queued = Clock(), [0]
    _, bolt, _ = _executor("slowish", queued, clock, {"topology.tick.tuple.freq.secs": 0.25},
                           metrics_interval_ms=1000)
    bolt.offer(frames.CONTROL, _start_frame())
    assert bolt.turn(clock()) == pytest.approx(100.25)  # the tick, before the metrics
    clock.now = 100.25
    assert bolt.turn(clock()) == pytest.approx(100.5)


def test_a_spout_calls_next_tuple_only_while_its_output_gate_is_open():
    clock, queued = Clock(), [HIGH + 1]
    _, spout, sent = _executor("count", queued, clock)
    spout.offer(frames.CONTROL, _start_frame())
    assert spout.turn(clock()) > clock() and spout.collector.sent == 0  # gate closed
    queued[0] = HIGH // 2 + 1
    assert spout.turn(clock()) > clock() and spout.collector.sent == 0  # still closed
    queued[0] = HIGH // 2
    assert spout.turn(clock()) == clock()  # it emitted: another turn at once
    assert spout.collector.sent == 3 and spout.gate.closings == 1
    # next_tuple emits nothing now: wait a little for input (acks, the gate)
    assert clock() < spout.turn(clock()) <= clock() + 0.001
    assert spout.accepting()  # a spout always reads: acks and its gate arrive meanwhile


class _FakeLoop:
    """``wire.loop.Loop`` as ``serve`` uses it: ``poll`` moves the clock to the deadline and
    hands the next scripted frames to the executor while the channel reads."""

    def __init__(self, clock: Clock, channel: "_FakeChannel", script: list) -> None:
        self.clock = clock
        self.channel = channel
        self.script = collections.deque(script)
        self.timeouts: list = []

    def poll(self, timeout: float | None) -> None:
        self.timeouts.append(timeout)
        if timeout:
            self.clock.now += timeout
        if self.channel.reading and self.script:
            action = self.script.popleft()
            action()

    def flush(self) -> None:
        """Output is queued in the fake channel: nothing to write."""


class _FakeChannel:
    def __init__(self) -> None:
        self.reading = True
        self.changes: list[bool] = []

    def pause_reading(self) -> None:
        if self.reading:
            self.reading = False
            self.changes.append(False)

    def resume_reading(self) -> None:
        if not self.reading:
            self.reading = True
            self.changes.append(True)


def test_the_process_shell_reads_while_the_gate_is_open_and_sleeps_until_wake_at():
    clock, queued = Clock(), [0]
    view, bolt, _ = _executor("slowish", queued, clock, {"topology.tick.tuple.freq.secs": 0.25},
                              metrics_interval_ms=1000)
    channel = _FakeChannel()

    def offer(frame: bytes, out_bytes: int = 0):
        def action():
            bolt.offer(frame[4], frame)
            queued[0] = out_bytes  # what the kernel did not take of our output
        return action

    shutdown = frames.control_frame(stmgr_pb2.StmgrToInstance(
        shutdown=tmaster_pb2.Shutdown(reason=tmaster_pb2.FINISHED)))
    script = [offer(_start_frame()), offer(_data_frame(view, 5)),
              offer(_data_frame(view, 5), HIGH + 1)]
    loop = _FakeLoop(clock, channel, script)

    def after_poll():  # called after poll n, turn n - 1 done
        polls = len(loop.timeouts)
        if polls == 4:  # the third turn: the second frame came with our output stuck
            assert not channel.reading and bolt.executed == 5
            queued[0] = HIGH // 2 + 1  # the poll wrote some: above the low mark
        elif polls == 5:
            assert not channel.reading
            queued[0] = HIGH // 2  # written down to the low mark
        elif polls == 6:
            assert channel.reading and bolt.executed == 10  # open again
            loop.script.append(offer(shutdown))

    with pytest.raises(Stop) as stop:
        serve(bolt, loop, channel, after_poll)
    assert stop.value.code == 0
    assert channel.changes == [False, True]
    assert bolt.executed == 10 and bolt.gate.closings == 1
    assert loop.timeouts[0] is None  # not started: it waits for input only
    assert loop.timeouts[1] == pytest.approx(0.25)  # then until its first tick


def test_when_the_stmgr_went_away_the_task_takes_what_it_sent_before_gate_or_not():
    clock, queued = Clock(), [0]
    view, bolt, _ = _executor("slowish", queued, clock)
    bolt.offer(frames.CONTROL, _start_frame())
    bolt.turn(clock())
    queued[0] = HIGH + 1
    bolt.offer(frames.DATA, _data_frame(view, 4))
    bolt.offer(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
        shutdown=tmaster_pb2.Shutdown(reason=tmaster_pb2.KILLED))))
    bolt.turn(clock())
    assert bolt.executed == 0  # gated
    with pytest.raises(Stop) as stop:
        bolt.take_all_input()
    assert stop.value.code == 0 and bolt.executed == 4


class Endless(Spout):
    outputs = ["n"]

    def next_tuple(self):
        self.emit([1])


class Slow(Bolt):
    """The in-process runner's clock is the test's: each tuple takes 1 ms of it."""

    clock: Clock | None = None

    def process(self, tup):
        Slow.clock.now += 0.001


def test_in_process_a_slow_bolt_closes_and_reopens_the_spouts_output_gate():
    clock = Clock()
    Slow.clock = clock
    builder = TopologyBuilder("gated_in_process")
    src = builder.add_spout("src", Endless, par=1)
    builder.add_bolt("slow", Slow, par=1, inputs={src: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 1})
    runner = InProcessTopology(builder.build(), conf={
        "heron.batch.max.tuples": 16,
        "heron.instance.out.queue.bytes": 1000,
        "heron.stmgr.backpressure.high.water.tuples": 200,
        "heron.stmgr.backpressure.low.water.tuples": 100}, clock=clock, sleep=clock.sleep)
    with pytest.raises(TimeoutError):
        runner.run(timeout=2)  # two seconds of the fake clock: 2,000 tuples of the slow bolt
    spout = runner.tasks[runner.plan.component_tasks["src"][0]].executor
    # a slice ends past the mark: the gate closes until the stmgr took the output (in
    # process, the next turn, unless backpressure paused the spout); it closed, reopened
    # (the spout emitted again) and closed again
    assert spout.gate.closings >= 2
    assert runner.metrics()["__stmgr__"]["__backpressure-episodes"] >= 1
    assert runner.metrics()["slow"]["__execute-count"] >= 1900


class Fanout(Bolt):
    outputs = ["n"]

    def process(self, tup):
        for i in range(50):
            self.emit([i])


class Sink(Bolt):
    def process(self, tup):
        pass


class Ten(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.left = 200

    def next_tuple(self):
        if self.left:
            self.emit([self.left])
            self.left -= 1
        else:
            self.declare_exhausted()


def test_in_process_a_bolt_whose_output_passes_the_mark_waits_and_loses_nothing():
    clock = Clock()
    builder = TopologyBuilder("fanout_in_process")
    src = builder.add_spout("src", Ten, par=1)
    fan = builder.add_bolt("fan", Fanout, par=1, inputs={src: Grouping.SHUFFLE})
    builder.add_bolt("sink", Sink, par=1, inputs={fan: Grouping.SHUFFLE})
    runner = InProcessTopology(builder.build(), conf={
        "heron.batch.max.tuples": 16, "heron.instance.out.queue.bytes": 256},
        clock=clock, sleep=clock.sleep)
    assert runner.run(timeout=60) == "FINISHED"
    fan = runner.tasks[runner.plan.component_tasks["fan"][0]].executor
    assert fan.gate.closings >= 1
    metrics = runner.metrics()
    assert metrics["fan"]["__execute-count"] == 200
    assert metrics["sink"]["__execute-count"] == 200 * 50


def test_the_failure_report_names_the_task_and_keeps_the_traceback():
    try:
        raise ValueError("broken 7f1a")
    except ValueError as exc:
        frame = failure_frame(3, "split", exc, "/logs/split-3.log")
    failed = stmgr_pb2.InstanceToStmgr.FromString(frame[frames.PREFIX_BYTES:]).failed
    assert (failed.task_id, failed.component, failed.log_path, failed.exit_code) == \
        (3, "split", "/logs/split-3.log", 1)
    assert "Traceback" in failed.error and "broken 7f1a" in failed.error
