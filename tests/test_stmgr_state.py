"""StmgrCore's lifecycle as one enum (``StmgrState``): each change, and each wrong (state,
action) pair ignored or refused with its own error. Sans-I/O: the recording transport and the
plan helpers of test_stmgr_core."""

from __future__ import annotations

import pytest
from test_stmgr_core import _control, _core, _instance_message, _plan, _start

from heron_spark.contract.exit_codes import ExitCode
from heron_spark.errors import HeronSparkError
from heron_spark.proto import metrics_pb2, physical_plan_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.stmgr.lifecycle import StmgrState, StmgrStateError
from heron_spark.wire import frames


def _shutdown(reason=tmaster_pb2.FINISHED) -> bytes:
    return frames.control_frame(tmaster_pb2.TmasterToStmgr(
        shutdown=tmaster_pb2.Shutdown(reason=reason, detail="test")))


def _register(core, task, pid):
    core.instance_connected(task)
    core.on_instance_frame(task, frames.CONTROL, _control(
        {"register": stmgr_pb2.RegisterInstance(task_id=task, pid=pid)}))


def test_a_stmgr_waits_for_its_plan_then_runs():
    core, io, _, view = _core()
    assert core.state is StmgrState.WAITING_PLAN and not core.stopping
    for task in core.local_tasks:  # registering before the plan starts nothing
        _register(core, task, 1000 + task)
    assert core.all_registered and not io.to_task
    core.on_tmaster_frame(_plan(view))
    assert core.state is StmgrState.RUNNING
    assert {_instance_message(f[0]).WhichOneof("body") for f in io.to_task.values()} == {"start"}
    core.on_tmaster_frame(_plan(view))  # a later plan only retargets
    assert core.state is StmgrState.RUNNING


@pytest.mark.parametrize("started", [False, True])
def test_shutdown_stops_from_any_live_state(started):
    core, io, _, view = _core()
    if started:
        _start(core, io, view)
    assert core.on_tmaster_frame(_shutdown()) == 0
    assert core.state is StmgrState.STOPPING and core.stopping and io.stopped


@pytest.mark.parametrize("started", [False, True])
def test_restart_exits_for_the_supervisor_without_telling_the_instances(started):
    core, io, _, view = _core()
    if started:
        _start(core, io, view)
    sent = {task: len(f) for task, f in io.to_task.items()}
    assert core.on_tmaster_frame(_shutdown(tmaster_pb2.RESTARTING)) == ExitCode.RESTART
    assert core.state is StmgrState.RESTARTING and core.stopping
    assert not io.stopped and {task: len(f) for task, f in io.to_task.items()} == sent


def test_a_lost_tmaster_stops_once():
    core, io, _, _ = _core()
    assert core.tmaster_lost() == 2 and core.state is StmgrState.STOPPING and io.stopped
    assert core.tmaster_lost() is None


def test_tmaster_frames_after_the_end_are_ignored():
    core, io, _, view = _core()
    for task in core.local_tasks:
        _register(core, task, 1000 + task)
    assert core.on_tmaster_frame(_shutdown(tmaster_pb2.RESTARTING)) == ExitCode.RESTART
    # a plan, a second shutdown, an activation: none starts, stops or tells an instance anything
    assert core.on_tmaster_frame(_plan(view)) is None
    assert core.on_tmaster_frame(_shutdown()) is None
    assert core.on_tmaster_frame(frames.control_frame(tmaster_pb2.TmasterToStmgr(
        activation=tmaster_pb2.SetTopologyState(state=physical_plan_pb2.PAUSED)))) is None
    assert core.state is StmgrState.RESTARTING and not io.to_task and not io.peers
    assert not core.paused


def test_after_the_end_disconnects_are_not_failures_and_registrations_start_nothing():
    core, io, _, view = _core()
    _start(core, io, view)
    task = min(core.local_tasks)
    core.on_tmaster_frame(_shutdown())
    sent = len(io.to_task[task])
    core.instance_closed(task)
    assert core.instances_lost == 0 and not io.tmaster
    _register(core, task, 77)  # a late registration is recorded, not started
    assert core.instance_pids[task] == 77 and len(io.to_task[task]) == sent


def test_close_is_idempotent_and_keeps_a_restart():
    core, _, _, _ = _core()
    core.close()
    core.close()
    assert core.state is StmgrState.STOPPING
    restarting, _, _, _ = _core()
    restarting.on_tmaster_frame(_shutdown(tmaster_pb2.RESTARTING))
    restarting.close()
    assert restarting.state is StmgrState.RESTARTING


@pytest.mark.parametrize("state, wanted", [
    (StmgrState.RUNNING, StmgrState.WAITING_PLAN),
    (StmgrState.RUNNING, StmgrState.RUNNING),
    (StmgrState.STOPPING, StmgrState.RUNNING),
    (StmgrState.STOPPING, StmgrState.RESTARTING),
    (StmgrState.RESTARTING, StmgrState.STOPPING),
])
def test_a_forbidden_change_is_its_own_error(state, wanted):
    core, _, _, _ = _core()
    core.state = state
    with pytest.raises(StmgrStateError) as caught:
        core._enter(wanted)
    error = caught.value
    assert isinstance(error, HeronSparkError) and isinstance(error, RuntimeError)
    assert (error.index, error.state, error.wanted) == (0, state, wanted)
    assert core.state is state


def test_the_metrics_snapshot_carries_the_time_it_is_given():
    core, io, _, view = _core()
    _start(core, io, view)
    publish = core.metrics_snapshot(3, timestamp_ms=1234)
    assert isinstance(publish, metrics_pb2.MetricsPublish)
    assert publish.timestamp_ms == 1234 and publish.task_id == -1
    assert {m.name: m.value for m in publish.metrics}["__peer-frames-dropped"] == 3
    assert core.metrics_snapshot(0).timestamp_ms == 0  # unstamped (the in-process runner)
