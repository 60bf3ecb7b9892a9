"""The Topology Master's rules without sockets: TMasterCore fed events through a recording
transport and a fake clock (plan, liveness, failures, management verbs, the end, checkpoints)."""

from __future__ import annotations

import collections

import pytest

from heron_spark import Grouping, TopologyBuilder
from heron_spark.errors import TopologyStateError, TopologyValueError
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.proto import physical_plan_pb2, tmaster_pb2
from heron_spark.tmaster.core import TMasterCore, TopologyState
from heron_spark.wire import frames
from idle_components import Count, Words


class Recorder:
    """A TMasterTransport that records what the core asks for."""

    def __init__(self) -> None:
        self.to: dict[int, list[tmaster_pb2.TmasterToStmgr]] = collections.defaultdict(list)
        self.to_all: list[tmaster_pb2.TmasterToStmgr] = []
        self.dropped: list[int] = []
        self.recoveries: list[str] = []
        self.plans: list[physical_plan_pb2.PhysicalPlan] = []
        self.states: list[str] = []
        self.commits: list[tuple[int, int, float]] = []
        self.notices: list[bytes] = []  # the committed notices, sent once the commit is recorded

    def to_stmgr(self, index, frame):
        self.to[index].append(_decode(frame))

    def to_stmgrs(self, frame):
        self.to_all.append(_decode(frame))

    def drop_stmgr(self, index):
        self.dropped.append(index)

    def recover(self, reason):
        self.recoveries.append(reason)

    def save_plan(self, plan):
        self.plans.append(plan)

    def save_state(self, state):
        self.states.append(state.state)

    def checkpoint_committed(self, checkpoint_id, epoch, at, notice):
        self.commits.append((checkpoint_id, epoch, at))
        self.notices.append(notice)

    def file_response(self, response):
        pass

    def kinds(self) -> list[str]:
        return [m.WhichOneof("body") for m in self.to_all]


def _decode(frame: bytes) -> tmaster_pb2.TmasterToStmgr:
    return tmaster_pb2.TmasterToStmgr.FromString(frame[frames.PREFIX_BYTES:])


def _core(effectively_once: bool = False, **kwargs) -> tuple[TMasterCore, Recorder]:
    builder = TopologyBuilder("core")
    words = builder.add_spout("words", Words, par=2)
    builder.add_bolt("count", Count, par=2, inputs={words: Grouping.fields("word")})
    builder.set_config({"topology.stmgrs": 2, **({
        "topology.reliability.mode": "EFFECTIVELY_ONCE",
        "topology.stateful.checkpoint.interval.seconds": 2} if effectively_once else {})})
    logical = build_logical_plan(builder.build())
    io = Recorder()
    core = TMasterCore(PlanView(logical, pack(logical)), "core-1", io,
                       stmgr_heartbeat_timeout_secs=3.0, restart_max=2,
                       restart_window_secs=10.0, wall_offset_secs=1_000_000.0, **kwargs)
    return core, io


def _register(core: TMasterCore, index: int, now: float, port: int | None = None,
              generation: int = 0) -> None:
    tasks = core.plan.tasks_in(index)
    core.on_stmgr_message(index, tmaster_pb2.StmgrToTmaster(register=tmaster_pb2.RegisterStmgr(
        container_index=index, host="127.0.0.1", data_port=port or 7000 + index, pid=10 + index,
        generation=generation,
        instances=[physical_plan_pb2.InstanceInfo(task_id=t, container_index=index,
                                                  component=core.plan.task_component[t])
                   for t in tasks])), now)


def _start(core: TMasterCore, now: float = 100.0) -> None:
    for index in range(core.plan.container_count):
        _register(core, index, now)


def _message(**body) -> tmaster_pb2.StmgrToTmaster:
    return tmaster_pb2.StmgrToTmaster(**body)


def _heartbeat(core: TMasterCore, index: int, now: float) -> None:
    core.on_stmgr_message(index, _message(heartbeat=tmaster_pb2.StmgrHeartbeat(
        container_index=index)), now)


def _failed(core: TMasterCore, task: int, now: float, error: str = "ValueError: bad",
            permanent: bool = False) -> None:
    core.on_stmgr_message(core.plan.task_container[task], _message(
        instance_failed=tmaster_pb2.InstanceFailed(task_id=task, component="count",
                                                   error=f"Traceback...\n{error}",
                                                   permanent=permanent)), now)


def test_one_plan_is_broadcast_once_every_stmgr_registered():
    core, io = _core()
    _register(core, 0, 100.0)
    assert io.to_all == [] and core.state is TopologyState.STARTING
    _register(core, 1, 101.0)
    assert io.kinds() == ["plan"]
    plan = io.to_all[0].plan
    assert [(s.container_index, s.data_port) for s in plan.stmgrs] == [(0, 7000), (1, 7001)]
    assert sorted(i.task_id for i in plan.instances) == sorted(core.all_tasks)
    assert plan.state == physical_plan_pb2.RUNNING
    assert io.plans == [plan] and core.physical_plan == plan
    assert core.state is TopologyState.RUNNING
    assert core.started_at == 1_000_101.0  # the wall clock: now + the offset
    assert io.states[-1] == "RUNNING"
    assert core.status(101.0).registered == (0, 1)


def test_a_stmgr_registering_again_at_a_new_address_gets_the_plan_rebroadcast():
    core, io = _core()
    _start(core)
    _register(core, 1, 105.0)  # restarted at the same address: the plan to it alone
    assert io.kinds() == ["plan"]
    assert [m.WhichOneof("body") for m in io.to[1]] == ["plan"]
    _register(core, 1, 106.0, port=7999)  # moved: everyone learns its new address
    assert io.kinds() == ["plan", "plan"]
    assert {s.container_index: s.data_port for s in io.to_all[1].plan.stmgrs} == \
        {0: 7000, 1: 7999}


def test_a_stmgr_of_another_generation_is_ignored():
    core, io = _core()
    _register(core, 0, 100.0)
    _register(core, 1, 100.0, generation=5)
    assert io.to_all == [] and core.registrations.keys() == {0}


def test_heartbeat_silence_means_dead_then_after_as_long_again_a_stage_restart():
    core, io = _core()
    _start(core, 100.0)
    _heartbeat(core, 0, 102.0)
    _heartbeat(core, 1, 102.0)
    core.check_liveness(104.0)
    assert io.dropped == [] and io.recoveries == []
    _heartbeat(core, 0, 105.5)
    core.check_liveness(105.5)  # 1 silent for 3.5 s > 3 s: dead, its connection kept
    assert io.dropped == [] and core.status(105.5).dead_stmgrs == (1,)
    _heartbeat(core, 0, 108.0)
    core.check_liveness(108.0)
    assert io.recoveries == []  # dead for 2.5 s only
    core.check_liveness(108.6)
    assert io.dropped == [1]
    assert len(io.recoveries) == 1 and "container(s) [1]" in io.recoveries[0]
    core.check_liveness(120.0)
    assert len(io.recoveries) == 1  # asked once per generation
    core.begin_generation(1, None, 121.0)
    assert core.generation == 1 and core.physical_plan is None and core.registrations == {}


def test_a_dead_stmgr_that_heartbeats_again_is_alive_without_a_restart():
    """A partition longer than the timeout, healed before the second: nothing restarts."""
    core, io = _core()
    _start(core, 100.0)
    _heartbeat(core, 0, 103.0)
    core.check_liveness(103.5)
    assert core.status(103.5).dead_stmgrs == (1,)
    _heartbeat(core, 1, 105.0)  # healed: on the same connection
    _heartbeat(core, 0, 105.0)
    core.check_liveness(106.6)
    core.check_liveness(108.0)
    assert io.dropped == [] and io.recoveries == [] and core.status(108.0).dead_stmgrs == ()


def test_a_stmgr_that_registers_again_is_alive():
    core, io = _core()
    _start(core, 100.0)
    core.check_liveness(103.5)
    assert io.dropped == [] and core.status(103.5).dead_stmgrs == (0, 1)
    _register(core, 0, 104.0)
    _register(core, 1, 104.0)
    core.check_liveness(106.6)
    assert io.recoveries == []


def test_instance_failures_within_the_window_fail_the_topology_past_the_maximum():
    core, io = _core()
    _start(core)
    _failed(core, 2, 110.0)
    _failed(core, 2, 111.0)
    assert core.state is TopologyState.RUNNING and core.failures[2] == 2
    _failed(core, 2, 125.0)  # the first two are out of the 10 s window
    _failed(core, 2, 126.0)
    assert core.state is TopologyState.RUNNING
    _failed(core, 2, 127.0)  # three within 10 s > restart_max 2
    assert core.state is TopologyState.FAILED
    assert "task 2 of component 'count' failed 3 times within 10 s" in core.detail
    assert core.failure.task_id == 2 and core.status(127.0).instance_failures == {2: 5}
    shutdown = io.to_all[-1].shutdown
    assert shutdown.reason == tmaster_pb2.FAILED and io.states[-1] == "FAILED"
    assert core.ended_at == 1_000_127.0


def test_a_permanent_failure_fails_the_topology_at_once_and_a_plain_one_restores():
    core, io = _core()
    _start(core)
    _failed(core, 2, 110.0)  # a plain failure: its container restarts the task
    assert core.state is TopologyState.RUNNING and core.failures[2] == 1
    assert "shutdown" not in io.kinds() and "FAILED" not in io.states
    message = ("heron_spark.errors.ConnectorError: component 'count': Kafka: no topic 't'. "
               "Fix: create it")
    _failed(core, 3, 111.0, error=message, permanent=True)  # once, far below restart_max 2
    assert core.state is TopologyState.FAILED and core.failures[3] == 1
    assert "task 3 of component 'count' failed permanently" in core.detail
    assert "no topic 't'. Fix: create it" in core.detail
    assert core.failure.permanent and core.failure.task_id == 3
    assert io.to_all[-1].shutdown.reason == tmaster_pb2.FAILED and io.states[-1] == "FAILED"
    _failed(core, 2, 112.0, permanent=True)  # after the end: counted, the reason stays
    assert "task 3" in core.detail and core.failures[2] == 2


def test_failure_frame_marks_a_permanent_connector_error_even_when_wrapped():
    from heron_spark.errors import ConnectorError
    from heron_spark.instance.shell import failure_frame
    from heron_spark.proto import stmgr_pb2

    def decoded(exc):
        frame = failure_frame(4, "out", exc, "/log")
        return stmgr_pb2.InstanceToStmgr.FromString(frame[frames.PREFIX_BYTES:]).failed

    refused = ConnectorError("no topic 't'", system="Kafka", component="out", value="t",
                             fix="create it", permanent=True)
    failed = decoded(refused)
    assert failed.permanent and failed.error.strip().splitlines()[-1].endswith("Fix: create it")
    try:
        try:
            raise refused
        except ConnectorError as exc:
            msg = "the user's wrapper"
            raise RuntimeError(msg) from exc
    except RuntimeError as wrapped:
        failed = decoded(wrapped)
    assert failed.permanent and "component 'out': Kafka: no topic 't'" in \
        failed.error.strip().splitlines()[-1]
    transient = ConnectorError("no broker", system="Kafka", component="out", value="h:1",
                               fix="start it", permanent=False)
    assert not decoded(transient).permanent and not decoded(ValueError("bad")).permanent


def test_every_task_drained_finishes_the_topology():
    core, io = _core()
    _start(core)
    tasks = sorted(core.all_tasks)
    core.on_stmgr_message(0, _message(drained=tmaster_pb2.TaskDrained(task_ids=tasks[:2])),
                          101.0)
    assert core.state is TopologyState.RUNNING
    core.on_stmgr_message(1, _message(drained=tmaster_pb2.TaskDrained(task_ids=tasks[2:])),
                          102.0)
    assert core.state is TopologyState.FINISHED
    assert io.to_all[-1].shutdown.reason == tmaster_pb2.FINISHED


def test_deactivate_and_activate_change_the_state_and_tell_every_stmgr():
    core, io = _core()
    _start(core)
    core.set_paused(True, 101.0)
    assert core.state is TopologyState.PAUSED and core.physical_plan.state == physical_plan_pb2.PAUSED
    assert io.to_all[-1].activation.state == physical_plan_pb2.PAUSED
    assert io.plans[-1].state == physical_plan_pb2.PAUSED and io.states[-1] == "PAUSED"
    with pytest.raises(TopologyStateError, match="already deactivated"):
        core.set_paused(True, 102.0)
    core.set_paused(False, 103.0)
    assert core.state is TopologyState.RUNNING
    assert io.to_all[-1].activation.state == physical_plan_pb2.RUNNING
    with pytest.raises(TopologyStateError, match="already active"):
        core.set_paused(False, 104.0)


def test_a_topology_deactivated_before_it_starts_starts_paused():
    core, io = _core(deactivated=True)
    core.set_paused(False, 99.0)  # activated while STARTING: the plan says RUNNING
    core.set_paused(True, 99.5)
    _start(core)
    assert core.state is TopologyState.PAUSED
    assert io.to_all[-1].plan.state == physical_plan_pb2.PAUSED


def test_verbs_are_refused_in_the_wrong_state():
    core, io = _core()
    with pytest.raises(TopologyStateError, match="wait until it is RUNNING") as info:
        core.restart(None)
    assert (info.value.state, info.value.action) == ("STARTING", "restart it")
    with pytest.raises(TopologyStateError, match="wait until it is RUNNING"):
        core.check_update()
    _start(core)
    with pytest.raises(TopologyValueError):
        core.restart(7)
    assert core.restart(1) == [1]
    assert io.to[1][-1].shutdown.reason == tmaster_pb2.RESTARTING
    core.stop_generation("updating", 105.0)
    assert io.to_all[-1].shutdown.reason == tmaster_pb2.UPDATING
    with pytest.raises(TopologyStateError) as info:
        core.set_paused(True, 106.0)
    assert info.value.state == "UPDATING"
    core.kill("killed by the test", 107.0)
    for verb in (lambda: core.set_paused(True, 108.0), lambda: core.restart(None),
                 core.check_update):
        with pytest.raises(TopologyStateError, match="it has ended") as info:
            verb()
        assert info.value.state == "KILLED"


def test_an_update_stops_the_generation_and_its_new_plan_ends_the_updating_state():
    core, io = _core()
    _start(core)
    core.stop_generation("updating to {'count': 2}", 110.0)
    assert core.updating and io.states[-1] == "RUNNING"
    _register(core, 0, 111.0)  # a restart of the stopped generation: stopped too
    assert io.to[0][-1].shutdown.reason == tmaster_pb2.UPDATING
    core.begin_generation(1, None, 112.0)
    _register(core, 0, 113.0, generation=1)
    _register(core, 1, 113.0, generation=1)
    assert not core.updating and io.to_all[-1].plan.generation == 1


def test_kill_broadcasts_the_shutdown_once():
    core, io = _core()
    _start(core)
    core.kill("killed by the test", 110.0)
    assert core.state is TopologyState.KILLED and core.detail == "killed by the test"
    assert io.to_all[-1].shutdown == tmaster_pb2.Shutdown(reason=tmaster_pb2.KILLED,
                                                          detail="killed by the test")
    core.kill("again", 111.0)
    core.fail("too late", 112.0)
    assert io.kinds().count("shutdown") == 1 and core.state is TopologyState.KILLED
    core.check_liveness(500.0)
    assert io.dropped == []  # no liveness once ended


def test_an_executor_lost_restarts_the_current_generation_only():
    core, io = _core()
    _start(core)
    core.executor_lost("3", (1,), "heartbeat timed out", 0, 110.0)
    assert len(io.recoveries) == 1 and "executor 3" in io.recoveries[0]
    core.executor_lost("4", (0,), "lost", generation=-1, now=111.0)
    assert len(io.recoveries) == 1
    assert [loss["action"] for loss in core.executor_losses] == \
        ["restart", "none: generation 0 runs"]


def test_an_executor_loss_names_the_host_even_after_the_stage_was_replaced():
    """Spark may fail the stage (and a new generation begin) before the loss event arrives:
    the report still names the lost host, from the previous generation's registrations."""
    core, io = _core()
    _start(core)
    core.executor_lost("3", (1,), "worker lost", 0, 110.0)
    core.begin_generation(1, None, 111.0)
    core.executor_lost("4", (0,), "worker lost", 0, 112.0)
    assert [loss["hosts"] for loss in core.executor_losses] == [["127.0.0.1"], ["127.0.0.1"]]
    core.executor_lost("5", (0,), "worker lost", 7, 113.0)
    assert core.executor_losses[-1]["hosts"] == ["?"]


def _stored(core: TMasterCore, checkpoint: int, now: float) -> None:
    for task in sorted(core.all_tasks):
        core.on_stmgr_message(core.plan.task_container[task], _message(
            stored=tmaster_pb2.InstanceStateStored(task_id=task, checkpoint_id=checkpoint)), now)


def _restored(core: TMasterCore, epoch: int, now: float) -> None:
    for task in sorted(core.all_tasks):
        core.on_stmgr_message(core.plan.task_container[task], _message(
            restored=tmaster_pb2.InstanceRestored(task_id=task, epoch=epoch)), now)


def test_checkpoints_start_on_the_tick_and_commit_once_every_task_stored():
    core, io = _core(effectively_once=True)
    core.tick(100.0)
    assert io.to_all == []  # not running yet
    _start(core)
    assert io.kinds() == ["restore", "plan"]  # every task from no state, before the plan
    _restored(core, 1, 100.5)
    assert io.kinds()[-1] == "resume"
    core.tick(101.0)
    assert io.kinds()[-1] == "resume"  # the interval (2 s) is not up
    core.tick(102.6)
    assert io.to_all[-1].checkpoint.checkpoint_id == 1
    _stored(core, 1, 103.0)
    assert io.commits == [(1, 1, 1_000_103.0)]
    # the post-save notice goes to the transport with the record, not straight to the stmgrs
    assert [_decode(n).committed for n in io.notices] == [
        tmaster_pb2.CheckpointCommitted(checkpoint_id=1, epoch=1)]
    assert "committed" not in io.kinds()
    assert (core.status(103.0).checkpoint or {})["committed"] == 1
    _failed(core, 2, 104.0)  # a failure rolls every task back to checkpoint 1
    assert io.to_all[-1].restore == tmaster_pb2.RestoreState(epoch=2, checkpoint_id=1)
    core.tick(110.0)
    assert io.kinds()[-1] == "restore"  # no checkpoint while restoring
    _restored(core, 2, 110.5)
    core.tick(112.6)
    assert io.to_all[-1].checkpoint.checkpoint_id == 2


def test_drained_tasks_of_a_rolled_back_epoch_are_ignored():
    core, io = _core(effectively_once=True)
    _start(core)
    core.on_stmgr_message(0, _message(drained=tmaster_pb2.TaskDrained(
        task_ids=sorted(core.all_tasks))), 101.0)
    assert core.state is TopologyState.RUNNING  # still restoring epoch 1
    _restored(core, 1, 102.0)
    core.on_stmgr_message(0, _message(drained=tmaster_pb2.TaskDrained(
        task_ids=sorted(core.all_tasks))), 103.0)
    assert core.state is TopologyState.FINISHED
