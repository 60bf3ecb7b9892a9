"""A task's logic without sockets: spout and bolt executors fed frames, with a fake clock,
answering through a list (batching and linger, acks riding with emits, exhaustion)."""

from __future__ import annotations

import logging

import numpy as np

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.config import SystemConfig
from heron_spark.api.event_time import WATERMARK_MAX
from heron_spark.instance.bolt_executor import ACK_HOLD_SECS, ACKS_HELD_MAX, BoltExecutor
from heron_spark.instance.spout_executor import SpoutExecutor
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.proto import stmgr_pb2
from heron_spark.wire import frames, tree_ids, tuple_batch

SEEN: list = []


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.left = 5

    def next_tuple(self):
        if self.left:
            self.emit([self.left], tup_id=self.left)
            self.left -= 1
        else:
            self.declare_exhausted()


class Echo(Bolt):
    outputs = ["n", "double"]

    def initialize(self, config, context):
        self.ack_now = self.ack  # kept in initialize: must still be the fast path

    def process(self, tup):
        SEEN.append(tup)
        self.emit([tup.values[0], 2 * tup.values[0]], anchors=[tup])
        self.ack_now(tup)


class Sink(Bolt):
    def process(self, tup):
        pass


class AckingSink(Bolt):
    def process(self, tup):
        self.ack(tup)


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def _view(reliable: bool, acker: bool = False, **config) -> PlanView:
    builder = TopologyBuilder("exec")
    numbers = builder.add_spout("numbers", Numbers, par=1)
    echo = builder.add_bolt("echo", Echo, par=1, inputs={numbers: Grouping.SHUFFLE})
    builder.add_bolt("sink", Sink, par=2, inputs={echo: Grouping.fields("n")})
    if acker:
        builder.add_bolt("acker", AckingSink, par=1, inputs={numbers: Grouping.SHUFFLE})
    builder.set_config({"topology.reliability.mode":
                        "ATLEAST_ONCE" if reliable else "ATMOST_ONCE", **config})
    logical = build_logical_plan(builder.build())
    return PlanView(logical, pack(logical))


def _executor(cls, view, component, linger_ms=1.0):
    sent: list = []
    clock = Clock()
    task = view.component_tasks[component][0]
    executor = cls(view, task, SystemConfig(batch_linger_ms=linger_ms), sent.append,
                   logging.getLogger("test"), clock=clock)
    executor.on_frame(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
        start=stmgr_pb2.StartProcessing(generation=0))))
    return executor, sent, clock


def _joined(frame) -> bytes:
    return b"".join(bytes(part) for part in frame) if isinstance(frame, list) else frame


def _kinds(sent) -> list[str]:
    out = []
    for frame in map(_joined, sent):
        if frame[4] == frames.DATA:
            kind = frames.data_head(frame)[0]
            out.append("watermark" if kind == frames.WATERMARK else "data")
        else:
            out.append(stmgr_pb2.InstanceToStmgr.FromString(
                frame[frames.PREFIX_BYTES:]).WhichOneof("body"))
    return out


def test_spout_slices_stop_when_next_tuple_is_idle_and_exhaustion_follows_the_acks():
    view = _view(reliable=True)
    spout, sent, clock = _executor(SpoutExecutor, view, "numbers")
    assert spout.run_slice(clock())  # five tuples, then next_tuple emits nothing
    spout.end_turn(clock())
    # out of input: its watermark goes to the end of time at once (the trees stay open)
    assert _kinds(sent) == ["opened", "data", "watermark"] and len(spout.trees) == 5
    head = frames.data_head(_joined(sent[2]))
    assert frames.data_stream(_joined(sent[2]), head[4]) == str(WATERMARK_MAX)
    opened = stmgr_pb2.InstanceToStmgr.FromString(_joined(sent[0])[frames.PREFIX_BYTES:]).opened
    roots = tree_ids.unpack(opened.roots)
    assert not spout.run_slice(clock())  # exhausted now, but trees are open: no announcement
    spout.end_turn(clock())
    assert "exhausted" not in _kinds(sent)
    spout.on_frame(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
        trees=stmgr_pb2.TreesDone(acked=tree_ids.pack(roots)))))
    spout.end_turn(clock())
    assert _kinds(sent)[-1] == "exhausted" and spout.trees.acked == 5


def test_bolt_batches_linger_and_acks_travel_with_the_edges_of_their_children():
    SEEN.clear()
    view = _view(reliable=True)
    bolt, sent, clock = _executor(BoltExecutor, view, "echo")
    spout_task = view.component_tasks["numbers"][0]
    base = spout_task << tree_ids.ROOT_TASK_SHIFT

    def deliver(values, first_root):
        batch = tuple_batch.build(["n"], [(v,) for v in values])
        count = len(values)
        roots = np.arange(base + first_root, base + first_root + count, dtype=np.uint64)
        batch = tuple_batch.with_roots(batch, roots, np.ones(count, dtype=np.int64))
        batch = tuple_batch.with_keys(batch, np.arange(100 + first_root, 100 + first_root + count,
                                                       dtype=np.uint64))
        bolt.on_frame(frames.DATA, frames.data_frame(
            frames.TUPLES, spout_task, bolt.task_id, count, b"default",
            tuple_batch.encode_batch(batch)))

    deliver([1, 2, 3], 1)
    bolt.end_turn(clock())  # idle until now: its batch leaves at once
    assert _kinds(sent)[:2] == ["edges", "data"]
    xor = stmgr_pb2.InstanceToStmgr.FromString(_joined(sent[0])[frames.PREFIX_BYTES:]).edges
    per_root = dict(zip(tree_ids.unpack(xor.roots).tolist(), tree_ids.unpack(xor.values).tolist()))
    assert sorted(per_root) == [base + 1, base + 2, base + 3]  # ack and child edge, combined
    assert all(per_root[base + i] != 100 + i for i in (1, 2, 3))  # the child's edge is in it
    sent.clear()
    clock.now += 0.0002
    deliver([4], 4)
    bolt.end_turn(clock())  # a batch left 0.2 ms ago: this one waits for the linger
    assert sent == [] and bolt.next_deadline(clock()) <= clock() + 0.001
    clock.now += 0.001
    bolt.end_turn(clock())
    assert _kinds(sent)[:2] == ["edges", "data"]
    assert [t.values for t in SEEN] == [(1,), (2,), (3,), (4,)]
    assert bolt.acks.acked_count == 4  # the ack kept in initialize was the fast one


def test_at_most_once_bolt_sends_data_only_and_reports_progress():
    view = _view(reliable=False)
    bolt, sent, clock = _executor(BoltExecutor, view, "echo", linger_ms=0)
    spout_task = view.component_tasks["numbers"][0]
    bolt.on_frame(frames.DATA, frames.data_frame(
        frames.TUPLES, spout_task, bolt.task_id, 2, b"default",
        tuple_batch.encode(["n"], [(7,), (8,)])))
    bolt.end_turn(clock())
    kinds = _kinds(sent)
    assert set(kinds) == {"data", "progress"} and kinds[-1] == "progress"
    rows = []
    for frame in map(_joined, sent):
        if frame[4] == frames.DATA:
            _, _, _, _, length = frames.data_head(frame)
            body = memoryview(frame)[frames.data_body_offset(length):]
            rows += tuple_batch.rows(tuple_batch.decode(body), 2)
    assert sorted(rows) == [(7, 14), (8, 16)]


def _deliver_rooted(bolt, view, values, first_root):
    spout_task = view.component_tasks["numbers"][0]
    base = spout_task << tree_ids.ROOT_TASK_SHIFT
    count = len(values)
    batch = tuple_batch.build(["n"], [(v,) for v in values])
    batch = tuple_batch.with_roots(batch, np.arange(base + first_root, base + first_root + count,
                                                    dtype=np.uint64), np.ones(count, dtype=np.int64))
    batch = tuple_batch.with_keys(batch, np.arange(1, count + 1, dtype=np.uint64))
    bolt.on_frame(frames.DATA, frames.data_frame(frames.TUPLES, spout_task, bolt.task_id, count,
                                                 b"default", tuple_batch.encode_batch(batch)))


def test_acks_alone_leave_once_per_hold_when_no_spout_is_capped_else_once_per_linger():
    for pending, every in ((None, ACK_HOLD_SECS), (10, 0.001)):
        view = _view(reliable=True, acker=True, **{"topology.max.spout.pending": pending})
        bolt, sent, clock = _executor(BoltExecutor, view, "acker")
        _deliver_rooted(bolt, view, [1, 2], 1)
        bolt.turn(clock())  # the first acks leave at once
        assert _kinds(sent) == ["edges", "progress"]
        sent.clear()
        first = clock()
        clock.now += 0.0005
        _deliver_rooted(bolt, view, [3], 3)
        assert bolt.turn(clock()) == first + every and sent == []  # held until then
        clock.now = first + every
        bolt.turn(clock())
        assert _kinds(sent)[0] == "edges"
        assert bolt.acks.acked_count == 3


def test_held_acks_leave_early_once_acks_held_max_tuples_wait():
    """Uncapped, acks alone wait for the hold, unless ACKS_HELD_MAX acked tuples are held."""
    view = _view(reliable=True, acker=True, **{"topology.max.spout.pending": None})
    bolt, sent, clock = _executor(BoltExecutor, view, "acker")
    _deliver_rooted(bolt, view, [0], 1)
    bolt.turn(clock())  # the first ack leaves at once: the hold starts now
    sent.clear()
    clock.now += 0.0005
    _deliver_rooted(bolt, view, list(range(ACKS_HELD_MAX - 1)), 10)
    bolt.turn(clock())
    assert sent == []  # one short of the limit: held
    clock.now += 0.0005
    _deliver_rooted(bolt, view, [7], 5000)
    bolt.turn(clock())  # the limit reached, well inside the hold
    assert _kinds(sent)[0] == "edges"
    assert bolt.acks.acked_count == ACKS_HELD_MAX + 1 and not bolt.acks

