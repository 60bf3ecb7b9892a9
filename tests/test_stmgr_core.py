"""The stream manager's logic without sockets: StmgrCore fed frames through a recording
transport and a fake clock (relay, start and end of input, acking, backpressure, shutdown)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from heron_spark import Grouping, TopologyBuilder
from heron_spark.config import SystemConfig
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.proto import physical_plan_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.stmgr.ack_routing import TREES_DONE_HOLD_SECS
from heron_spark.stmgr.core import StmgrCore
from heron_spark.wire import frames, tree_ids
from idle_components import Count, Words


class Recorder:
    """A StmgrTransport that records what the core asks for."""

    def __init__(self) -> None:
        self.to_task: dict[int, list[bytes]] = collections.defaultdict(list)
        self.to_peers: dict[int, list[bytes]] = collections.defaultdict(list)
        self.tmaster: list[bytes] = []
        self.reading: dict[int, bool] = {}
        self.queued: dict[int, int] = collections.defaultdict(int)
        self.peers: dict[int, tuple[str, int]] = {}
        self.stopped = False

    def to_instance(self, task, frame):
        self.to_task[task].append(frame)
        return True

    def to_peer(self, container, frame):
        self.to_peers[container].append(frame)

    def to_tmaster(self, frame):
        self.tmaster.append(frame)

    def set_reading(self, task, reading):
        self.reading[task] = reading

    def instance_queued_bytes(self, task):
        return self.queued[task]

    def peer_queued_bytes(self):
        return 0

    def retarget_peers(self, addresses):
        self.peers.update(addresses)

    def announce_stop(self):
        self.stopped = True

    def failure_note(self, task):
        return None

    def instance_log(self, task):
        return f"task-{task}.log"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _core(reliable: bool = False, mode: str | None = None, topology: dict | None = None,
          spout_config: dict | None = None, **config):
    builder = TopologyBuilder("core")
    words = builder.add_spout("words", Words, par=2, config=spout_config)
    builder.add_bolt("count", Count, par=2, inputs={words: Grouping.fields("word")})
    mode = mode or ("ATLEAST_ONCE" if reliable else None)
    builder.set_config({"topology.stmgrs": 2, **(
        {"topology.reliability.mode": mode} if mode else {}), **(topology or {})})
    logical = build_logical_plan(builder.build())
    view = PlanView(logical, pack(logical))
    io, clock = Recorder(), Clock()
    core = StmgrCore(view, SystemConfig(**config), 0, io, clock)
    return core, io, clock, view


def _plan(view) -> bytes:
    plan = physical_plan_pb2.PhysicalPlan(topology_name="core", generation=3)
    for container in range(2):
        plan.stmgrs.add(container_index=container, host="127.0.0.1", data_port=7000 + container)
    return frames.control_frame(tmaster_pb2.TmasterToStmgr(plan=plan))


def _control(message) -> bytes:
    return frames.control_frame(stmgr_pb2.InstanceToStmgr(**message))


def _instance_message(frame: bytes) -> stmgr_pb2.StmgrToInstance:
    return stmgr_pb2.StmgrToInstance.FromString(frame[frames.PREFIX_BYTES:])


def _start(core, io, view):
    """Connect and register the local instances, then apply the plan."""
    for task in sorted(core.local_tasks):
        core.instance_connected(task)
        core.on_instance_frame(task, frames.CONTROL, _control(
            {"register": stmgr_pb2.RegisterInstance(task_id=task, pid=1000 + task)}))
    assert core.all_registered
    core.on_tmaster_frame(_plan(view))


def test_plan_starts_registered_instances_and_points_links_at_peers():
    core, io, _, view = _core()
    _start(core, io, view)
    assert io.peers == {1: ("127.0.0.1", 7001)}
    for task in core.local_tasks:
        first = _instance_message(io.to_task[task][0])
        assert first.WhichOneof("body") == "start" and first.start.generation == 3
    for spout in core.spout_tasks:  # spouts also learn the gate
        assert _instance_message(io.to_task[spout][1]).WhichOneof("body") == "gate"


def test_data_is_relayed_untouched_to_local_tasks_and_peers():
    core, io, _, view = _core()
    _start(core, io, view)
    spout = min(core.spout_tasks)
    local = min(t for t in core.local_tasks if view.task_component[t] == "count")
    remote = min(t for t, c in view.task_container.items() if c == 1 and
                 view.task_component[t] == "count")
    for dest in (local, remote, 999):
        core.on_instance_frame(spout, frames.DATA, frames.data_frame(
            frames.TUPLES, spout, dest, 7, b"default", b"arrow bytes"))
    assert io.to_task[local][-1] == frames.data_frame(frames.TUPLES, spout, local, 7,
                                                      b"default", b"arrow bytes")
    assert io.to_peers[1][-1] == frames.data_frame(frames.TUPLES, spout, remote, 7,
                                                   b"default", b"arrow bytes")
    assert core.tuples_routed == 14 and core.tuples_dropped == 7  # task 999 does not exist
    assert core.queued_tuples(local) == 7
    core.on_instance_frame(local, frames.CONTROL, _control(
        {"progress": stmgr_pb2.InstanceProgress(executed=5)}))
    assert core.queued_tuples(local) == 2


def test_end_of_input_goes_downstream_and_is_replayed_to_a_restarted_bolt():
    core, io, _, view = _core()
    _start(core, io, view)
    spout = min(core.spout_tasks)
    core.on_instance_frame(spout, frames.CONTROL, _control(
        {"exhausted": stmgr_pb2.InstanceExhausted(task_id=spout)}))
    drained = tmaster_pb2.StmgrToTmaster.FromString(io.tmaster[-1][frames.PREFIX_BYTES:])
    assert list(drained.drained.task_ids) == [spout]
    for dest in view.downstream_tasks(spout):
        sent = io.to_task[dest] if view.task_container[dest] == 0 else io.to_peers[1]
        assert frames.data_head(sent[-1])[:3] == (frames.END_OF_STREAM, spout, dest)
    bolt = min(t for t in core.local_tasks if t not in core.spout_tasks)
    core.instance_closed(bolt)  # it dies, and comes back
    io.to_task[bolt].clear()
    core.instance_connected(bolt)
    core.on_instance_frame(bolt, frames.CONTROL, _control(
        {"register": stmgr_pb2.RegisterInstance(task_id=bolt, pid=42)}))
    kinds = [frames.data_head(f)[:2] for f in io.to_task[bolt] if f[4] == frames.DATA]
    assert kinds == [(frames.END_OF_STREAM, spout)]
    failed = tmaster_pb2.StmgrToTmaster.FromString(io.tmaster[-1][frames.PREFIX_BYTES:])
    assert failed.WhichOneof("body") == "instance_failed" and failed.instance_failed.task_id == bolt


def test_trees_complete_once_every_edge_is_acked_and_remote_ones_are_forwarded():
    core, io, clock, view = _core(reliable=True)
    _start(core, io, view)
    spout = min(core.spout_tasks)  # its trees are owned here
    roots = np.array([(spout << tree_ids.ROOT_TASK_SHIFT) + i for i in (1, 2)], dtype=np.uint64)
    edges = np.array([11, 22], dtype=np.uint64)
    core.on_instance_frame(spout, frames.CONTROL, _control({"opened": stmgr_pb2.TreesOpened(
        roots=tree_ids.pack(roots), edges=stmgr_pb2.XorBatch(
            roots=tree_ids.pack(roots), values=tree_ids.pack(edges)))}))
    bolt = min(t for t in core.local_tasks if t not in core.spout_tasks)
    other = max(core.spout_tasks | set(view.component_tasks["words"]))  # owned by container 1
    remote_root = (other << tree_ids.ROOT_TASK_SHIFT) + 9
    acks = stmgr_pb2.XorBatch(roots=tree_ids.pack([int(roots[0]), remote_root]),
                              values=tree_ids.pack([11, 5]))
    core.on_instance_frame(bolt, frames.CONTROL, _control({"edges": acks}))
    assert not any(_instance_message(f).WhichOneof("body") == "trees"
                   for f in io.to_task[spout])  # nothing before the end of the turn
    core.tick(clock())
    done = [_instance_message(f).trees for f in io.to_task[spout]
            if _instance_message(f).WhichOneof("body") == "trees"]
    assert [tree_ids.unpack(d.acked).tolist() for d in done] == [[int(roots[0])]]
    forwarded = stmgr_pb2.StmgrToStmgr.FromString(io.to_peers[1][-1][frames.PREFIX_BYTES:])
    assert tree_ids.unpack(forwarded.xor.roots).tolist() == [remote_root]
    assert core.trees_acked == 1 and len(core.ledger) == 1  # root 2 still waits for its ack


def _trees_sent(io, spout) -> list[stmgr_pb2.TreesDone]:
    return [_instance_message(f).trees for f in io.to_task[spout]
            if _instance_message(f).WhichOneof("body") == "trees"]


def test_an_uncapped_spout_hears_of_completed_trees_at_most_every_hold_interval():
    core, io, clock, view = _core(reliable=True, topology={"topology.max.spout.pending": None})
    _start(core, io, view)
    spout = min(core.spout_tasks)
    roots = [(spout << tree_ids.ROOT_TASK_SHIFT) + i for i in (1, 2, 3)]
    core.on_instance_frame(spout, frames.CONTROL, _control({"opened": stmgr_pb2.TreesOpened(
        roots=tree_ids.pack(roots), edges=stmgr_pb2.XorBatch(
            roots=tree_ids.pack(roots), values=tree_ids.pack([11, 22, 33])))}))
    bolt = min(t for t in core.local_tasks if t not in core.spout_tasks)

    def ack(root, edge):
        core.on_instance_frame(bolt, frames.CONTROL, _control({"edges": stmgr_pb2.XorBatch(
            roots=tree_ids.pack([root]), values=tree_ids.pack([edge]))}))
        core.tick(clock())

    assert core.next_deadline() is None
    ack(roots[0], 11)
    first = clock()
    assert core.trees_acked == 1 and _trees_sent(io, spout) == []  # held
    assert core.next_deadline() == pytest.approx(first + TREES_DONE_HOLD_SECS)
    clock.now += TREES_DONE_HOLD_SECS / 2
    ack(roots[1], 22)
    assert _trees_sent(io, spout) == []  # still held: the first one is not due yet
    clock.now = first + TREES_DONE_HOLD_SECS
    core.tick(clock())
    sent = _trees_sent(io, spout)
    assert [tree_ids.unpack(d.acked).tolist() for d in sent] == [roots[:2]]  # one frame, both
    assert core.next_deadline() is None
    core.on_instance_frame(bolt, frames.CONTROL, _control(
        {"fails": stmgr_pb2.FailBatch(roots=tree_ids.pack([roots[2]]))}))
    core.tick(clock())  # a failed tree is replayed: no wait
    assert tree_ids.unpack(_trees_sent(io, spout)[-1].failed).tolist() == [roots[2]]


def test_a_capped_spout_hears_of_completed_trees_at_the_end_of_the_turn():
    core, io, clock, view = _core(reliable=True, topology={"topology.max.spout.pending": 10})
    _start(core, io, view)
    spout = min(core.spout_tasks)
    root = (spout << tree_ids.ROOT_TASK_SHIFT) + 1
    core.on_instance_frame(spout, frames.CONTROL, _control({"opened": stmgr_pb2.TreesOpened(
        roots=tree_ids.pack([root]), edges=stmgr_pb2.XorBatch(
            roots=tree_ids.pack([root]), values=tree_ids.pack([11])))}))
    bolt = min(t for t in core.local_tasks if t not in core.spout_tasks)
    core.on_instance_frame(bolt, frames.CONTROL, _control({"edges": stmgr_pb2.XorBatch(
        roots=tree_ids.pack([root]), values=tree_ids.pack([11]))}))
    core.end_turn()
    assert [tree_ids.unpack(d.acked).tolist() for d in _trees_sent(io, spout)] == [[root]]
    assert core.next_deadline() is None


@pytest.mark.parametrize("trees", [3, 300])  # a few pairs as lists of ints; many with NumPy
def test_a_turns_updates_complete_local_trees_and_forward_remote_ones_whatever_their_size(trees):
    core, io, clock, view = _core(reliable=True)
    _start(core, io, view)
    spout = min(core.spout_tasks)
    other = max(set(view.component_tasks["words"]) - core.spout_tasks)  # owned by container 1
    roots = [(spout << tree_ids.ROOT_TASK_SHIFT) + i for i in range(1, trees + 1)]
    remote = [(other << tree_ids.ROOT_TASK_SHIFT) + i for i in range(1, trees + 1)]
    edges = [1000 + i for i in range(trees)]
    core.on_instance_frame(spout, frames.CONTROL, _control({"opened": stmgr_pb2.TreesOpened(
        roots=tree_ids.pack(roots), edges=stmgr_pb2.XorBatch(
            roots=tree_ids.pack(roots + roots), values=tree_ids.pack(edges + [7] * trees)))}))
    bolt = min(t for t in core.local_tasks if t not in core.spout_tasks)
    for part in (slice(0, trees // 2), slice(trees // 2, trees)):  # two frames, one turn
        core.on_instance_frame(bolt, frames.CONTROL, _control({"edges": stmgr_pb2.XorBatch(
            roots=tree_ids.pack(roots[part] + remote[part] + roots[part]),
            values=tree_ids.pack(edges[part] + edges[part] + [7] * len(roots[part])))}))
    core.tick(clock())
    done = [_instance_message(f).trees for f in io.to_task[spout]
            if _instance_message(f).WhichOneof("body") == "trees"]
    assert [tree_ids.unpack(d.acked).tolist() for d in done] == [roots]
    forwarded = [stmgr_pb2.StmgrToStmgr.FromString(f[frames.PREFIX_BYTES:]).xor
                 for f in io.to_peers[1]]
    forwarded = [x for x in forwarded if x.roots]
    assert len(forwarded) == 1  # one message per owner per turn
    assert tree_ids.unpack(forwarded[0].roots).tolist() == remote
    assert tree_ids.unpack(forwarded[0].values).tolist() == edges
    assert core.trees_acked == trees and len(core.ledger) == 0


def _open_trees(core, spout, sequences, edge=11) -> list[int]:
    """Open one tree per sequence number for local ``spout``, each with one edge ``edge``."""
    roots = [(spout << tree_ids.ROOT_TASK_SHIFT) + i for i in sequences]
    core.on_instance_frame(spout, frames.CONTROL, _control({"opened": stmgr_pb2.TreesOpened(
        roots=tree_ids.pack(roots), edges=stmgr_pb2.XorBatch(
            roots=tree_ids.pack(roots), values=tree_ids.pack([edge] * len(roots))))}))
    return roots


def _ack_later(core, clock, bolt, roots, after_secs, edge=11) -> None:
    """Let ``after_secs`` pass in ticks of a second (the stmgr's expiry runs), then ack ``roots``."""
    for _ in range(int(after_secs)):
        clock.now += 1.0
        core.tick(clock())
    core.on_instance_frame(bolt, frames.CONTROL, _control({"edges": stmgr_pb2.XorBatch(
        roots=tree_ids.pack(roots), values=tree_ids.pack([edge] * len(roots)))}))
    core.tick(clock())


def _acked(io, spout) -> list[int]:
    return [root for done in _trees_sent(io, spout) for root in tree_ids.unpack(done.acked).tolist()]


def test_with_message_timeouts_off_a_tree_lives_until_its_last_ack_however_late():
    """``topology.enable.message.timeouts: false``: the spout never fails a tree by time, so
    its stmgr must not forget one either (a bolt acking 75 s after the tuple came, past twice
    the 30 s topology timeout)."""
    core, io, clock, view = _core(reliable=True, topology={
        "topology.enable.message.timeouts": False, "topology.message.timeout.secs": 30})
    _start(core, io, view)
    spout = min(core.spout_tasks)
    bolt = min(t for t in core.local_tasks if t not in core.spout_tasks)
    roots = _open_trees(core, spout, [1, 2])
    _ack_later(core, clock, bolt, roots[:1], after_secs=75)
    assert _acked(io, spout) == roots[:1] and core.trees_expired == 0
    _ack_later(core, clock, bolt, roots[1:], after_secs=3600)
    assert _acked(io, spout) == roots and core.trees_expired == 0 and len(core.ledger) == 0


def test_a_spouts_own_longer_timeout_keeps_its_trees_and_still_bounds_them():
    """A spout component's ``topology.message.timeout.secs`` (120 s) overrides the topology's
    (30 s) for its trees in the stmgr, as it does in the spout: a tree acked after 100 s
    completes; one never acked is forgotten once the spout has failed it (twice its timeout)."""
    core, io, clock, view = _core(reliable=True, topology={"topology.message.timeout.secs": 30},
                                  spout_config={"topology.message.timeout.secs": 120})
    _start(core, io, view)
    spout = min(core.spout_tasks)
    bolt = min(t for t in core.local_tasks if t not in core.spout_tasks)
    roots = _open_trees(core, spout, [1, 2])
    _ack_later(core, clock, bolt, roots[:1], after_secs=100)
    assert _acked(io, spout) == roots[:1] and core.trees_expired == 0
    _ack_later(core, clock, bolt, [], after_secs=2 * 120 + 2 - 100)
    assert core.trees_expired == 1 and len(core.ledger) == 0


def test_with_timeouts_off_a_spout_that_restarts_leaves_no_trees_behind():
    """A restarted spout task replays with new root ids and forgets its old trees: without
    timeouts nothing else would ever drop them, so the stmgr drops them when it disconnects
    (the ledger then holds at most ``topology.max.spout.pending`` trees per spout task)."""
    core, io, clock, view = _core(reliable=True, topology={
        "topology.enable.message.timeouts": False})
    _start(core, io, view)
    spout = min(core.spout_tasks)
    roots = _open_trees(core, spout, range(1, 51))
    assert len(core.ledger) == len(roots)
    core.instance_closed(spout)
    assert len(core.ledger) == 0
    core.instance_connected(spout)
    bolt = min(t for t in core.local_tasks if t not in core.spout_tasks)
    _ack_later(core, clock, bolt, roots[:3], after_secs=1)  # late acks of the old trees
    assert _acked(io, spout) == [] and len(core.ledger) == 0


def test_a_restore_drops_the_old_epoch_but_not_the_new_one_sent_before_the_resume():
    """A peer that got the TMaster's resume first sends the new epoch's tuples at once; they
    arrive before this stmgr's resume and must reach the bolt (losing them lost spout lines
    whose offsets the next checkpoint commits)."""
    core, io, _, view = _core(mode="EFFECTIVELY_ONCE")
    _start(core, io, view)
    bolt = min(t for t in core.local_tasks if t not in core.spout_tasks)
    remote_spout = min(t for t, c in view.task_container.items()
                       if c == 1 and t in view.component_tasks["words"])

    def tmaster(**body):
        core.on_tmaster_frame(frames.control_frame(tmaster_pb2.TmasterToStmgr(**body)))

    def from_peer(rows):
        io.to_task[bolt].clear()
        core.on_peer_frame(frames.DATA, frames.data_frame(frames.TUPLES, remote_spout, bolt,
                                                          rows, b"default", b"x"))
        return [f for f in io.to_task[bolt] if f[4] == frames.DATA]

    def from_bolt(rows):
        routed = core.tuples_routed
        core.on_instance_frame(bolt, frames.DATA, frames.data_frame(
            frames.TUPLES, bolt, bolt, rows, b"default", b"x"))
        return core.tuples_routed - routed

    def fence(epoch):
        core.on_peer_frame(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToStmgr(
            fence=stmgr_pb2.EpochFence(container_index=1, epoch=epoch))))

    tmaster(restore=tmaster_pb2.RestoreState(epoch=1, checkpoint_id=0))  # the start's
    fence(1)
    tmaster(resume=tmaster_pb2.ResumeProcessing(epoch=1))
    assert len(from_peer(3)) == 1 and from_bolt(3) == 3
    tmaster(restore=tmaster_pb2.RestoreState(epoch=2, checkpoint_id=5))
    assert _instance_message(io.to_task[bolt][-1]).restore.epoch == 2
    assert from_peer(4) == [] and from_bolt(4) == 0  # the rolled-back epoch's: dropped
    fence(2)
    core.on_instance_frame(bolt, frames.CONTROL, _control({"restored": tmaster_pb2.InstanceRestored(
        task_id=bolt, epoch=2, checkpoint_id=5)}))
    assert core.restoring  # no resume yet, but the peer's spouts were resumed
    assert len(from_peer(5)) == 1 and from_bolt(5) == 5
    assert core.frames_dropped_in_restore == 2


def test_a_restarted_task_connected_before_the_restore_hears_it_before_its_start():
    """A killed bolt's new process is sent data once connected, before it registers; when the
    TMaster's restore comes in between, that data is of the rolled-back epoch. The restore goes
    to it after that data and before its StartProcessing of the new epoch, so the task knows
    which of what it holds to drop (``BoltExecutor.drop_held_input``)."""
    core, io, _, view = _core(mode="EFFECTIVELY_ONCE")
    _start(core, io, view)
    bolt = min(t for t in core.local_tasks if t not in core.spout_tasks)
    remote_spout = min(t for t, c in view.task_container.items()
                       if c == 1 and t in view.component_tasks["words"])
    core.on_peer_frame(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToStmgr(
        fence=stmgr_pb2.EpochFence(container_index=1, epoch=0))))
    core.instance_closed(bolt)  # kill -9
    core.instance_connected(bolt)  # its new process dialled in, not registered yet
    io.to_task[bolt].clear()
    core.on_peer_frame(frames.DATA, frames.data_frame(frames.WATERMARK, remote_spout, bolt, 0,
                                                      b"5000"))
    core.on_tmaster_frame(frames.control_frame(tmaster_pb2.TmasterToStmgr(
        restore=tmaster_pb2.RestoreState(epoch=1, checkpoint_id=4))))
    core.on_instance_frame(bolt, frames.CONTROL, _control(
        {"register": stmgr_pb2.RegisterInstance(task_id=bolt, pid=4242)}))
    kinds = ["data" if f[4] == frames.DATA else _instance_message(f).WhichOneof("body")
             for f in io.to_task[bolt]]
    assert kinds == ["data", "restore", "start"]
    start = _instance_message(io.to_task[bolt][2]).start
    assert (start.epoch, start.checkpoint_id, start.hold) == (1, 4, True)


def test_a_full_queue_pauses_spouts_everywhere_until_it_drains():
    core, io, clock, view = _core(**{"backpressure_high_water_bytes": 1000,
                                     "backpressure_low_water_bytes": 500})
    _start(core, io, view)
    bolt = min(t for t in core.local_tasks if t not in core.spout_tasks)
    spout = min(core.spout_tasks)
    io.queued[bolt] = 2000
    core.tick(clock())
    assert io.reading[spout] is False
    signal = stmgr_pb2.StmgrToStmgr.FromString(io.to_peers[1][-1][frames.PREFIX_BYTES:])
    assert signal.backpressure.active and signal.backpressure.container_index == 0
    assert _instance_message(io.to_task[spout][-1]).gate.paused
    clock.now += 1.5
    io.queued[bolt] = 400
    core.tick(clock())
    assert io.reading[spout] is True and not _instance_message(io.to_task[spout][-1]).gate.paused
    assert core.backpressure.episodes == 1 and core.backpressure.total_secs >= 1.5


def test_shutdown_and_a_lost_tmaster_end_the_stmgr():
    core, io, _, view = _core()
    _start(core, io, view)
    shutdown = tmaster_pb2.TmasterToStmgr(shutdown=tmaster_pb2.Shutdown(
        reason=tmaster_pb2.FINISHED))
    assert core.on_tmaster_frame(frames.control_frame(shutdown)) == 0
    assert io.stopped and all(_instance_message(frames_[-1]).WhichOneof("body") == "shutdown"
                              for frames_ in io.to_task.values())
    assert core.tmaster_lost() is None  # already stopping
    other, io2, _, _ = _core()
    assert other.tmaster_lost() == 2 and io2.stopped
