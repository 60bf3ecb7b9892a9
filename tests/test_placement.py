"""The TMaster in container 0 (``heron.tmaster.placement`` container).

Unit tests (no Spark): the placement rule, the child's argv, the location lookup. A classic
session in container placement (``spark``): the TMaster resumes after kill -9 and updates. The
word count exact with the TMaster a child of container 0, found through the state manager and
asked by the handle, runs on both session kinds in ``tests/test_session_parity.py``; the netns
test (``connect``) is in ``tests/test_connect.py``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

import reliable_word_count as rwc
from heron_spark import submit
from heron_spark.config import ConfigError, build_system_config, tmaster_placement
from heron_spark.contract.child_args import (StmgrArgs, TMasterArgs, statemgr_generation,
                                             tmaster_from_statemgr)
from heron_spark.statemgr import open_state_manager, tmaster_address
from heron_spark.statemgr.base import wait_tmaster
from heron_spark.testing import wait_until


def test_placement_auto_is_driver_for_classic_and_container_for_connect():
    auto = build_system_config({})
    assert auto.tmaster_placement == "auto"
    assert tmaster_placement(auto, connect=False) == "driver"
    assert tmaster_placement(auto, connect=True) == "container"
    forced = build_system_config({"heron.tmaster.placement": "container"})
    assert tmaster_placement(forced, connect=False) == "container"
    with pytest.raises(ConfigError, match="heron.tmaster.placement"):
        build_system_config({"heron.tmaster.placement": "laptop"})


def test_tmaster_args_round_trip_and_the_statemgr_address():
    args = TMasterArgs(Path("/w/c-0"), 3, "10.0.0.7", 1)
    assert TMasterArgs.from_argv(args.to_argv()) == args
    lookup = tmaster_from_statemgr(3)
    stmgr = StmgrArgs(Path("/w/c-1"), 1, lookup, "10.0.0.8", 3)
    assert StmgrArgs.from_argv(stmgr.to_argv()) == stmgr
    assert statemgr_generation(lookup) == 3
    assert statemgr_generation("10.0.0.7:4100") is None


def test_stmgrs_wait_for_the_tmaster_of_their_generation(tmp_path):
    url = f"file://{tmp_path}/state"
    with open_state_manager(url) as statemgr:
        statemgr.set_tmaster_location("t", "127.0.0.1", 1111, -1, 1, "s")  # generation unset
        with pytest.raises(TimeoutError, match="generation 1"):
            wait_tmaster(statemgr, "t", 1, 0.3, poll_secs=0.05)

    def claim_later() -> None:
        time.sleep(0.3)
        with open_state_manager(url) as other:
            other.claim_tmaster("t", {"host": "127.0.0.1", "port": 2222, "pid": os.getpid(),
                                      "generation": 1, "secret": "s"})
            time.sleep(1.0)

    thread = threading.Thread(target=claim_later)
    thread.start()
    try:
        assert tmaster_address(tmaster_from_statemgr(1), url, "t", 10) == ("127.0.0.1", 2222)
    finally:
        thread.join()
    assert tmaster_address("h:5", url, "t", 1) == ("h", 5)


def _heron_processes(folder) -> list[str]:
    import subprocess

    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True,
                         text=True).stdout
    return [line for line in out.splitlines() if "heron_spark." in line and str(folder) in line]


@pytest.mark.spark
def test_tmaster_in_container_0_resumes_after_kill_9_and_updates(tmp_path):
    """kill -9 of the TMaster: the stage is resubmitted, the new TMaster resumes; then update."""
    import fault_support as faults
    import manage_topologies as mt

    name = "placed-resume"
    conf = {"heron.statemgr": f"file://{tmp_path}/state", "heron.work.dir": f"{tmp_path}/work",
            "heron.tmaster.placement": "container", "heron.kill.grace.secs": 5,
            "heron.stage.resubmit.backoff.secs": 0.2}
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = rwc.write_corpus(corpus, 4000)
    topology = mt.build_word_count(name, corpus, out, spouts=2, config={
        "topology.message.timeout.secs": 4, "topology.max.spout.pending": 300,
        rwc.SLEEP_MS: 3})
    handle = submit(topology, conf=conf, master="local[4]")
    try:
        assert handle.wait_running(120), handle.status
        first_id = handle.status_detail()["id"]
        wait_until(lambda: sum(p.stat().st_size for p in out.glob("count-*.log")) > 20_000,
                   90, message="the word count to make progress")
        [tmaster] = faults.find(tmp_path / "work", "tmaster")
        faults.kill9(tmaster)
        wait_until(lambda: handle.status_detail()["generation"] == 1
                   and handle.physical_plan is not None
                   and len(handle.status_detail()["registered"]) == 2, 120, interval=0.5,
                   message="generation 1 (a new container 0 and TMaster) to run")
        assert handle.status_detail()["id"] == first_id  # resumed, not a new topology
        assert handle.update({"count": 3}, timeout=120) == 2
        assert sorted(i.component_index for i in handle.physical_plan.instances
                      if i.component == "count") == [0, 1, 2]
        assert handle.wait(timeout=240) == "FINISHED"
    finally:
        handle.kill()
    rwc.check_exact(text, out, conf["heron.statemgr"], name, 2)  # nothing lost
    wait_until(lambda: not _heron_processes(tmp_path / "work"), 30,
               message="every heron_spark process to exit")


# ---- the submitter's view of a TMaster in container 0, with a fake control port -------------
def _remote(tmp_path, answers: list, scheduler=None):
    """A RemoteTMaster over a fake asker answering from ``answers`` (None: no TMaster)."""
    from heron_spark.plan.prepare import prepare
    from heron_spark.scheduler.remote import RemoteTMaster

    prepared = prepare(rwc.build("remote", tmp_path / "c.txt", tmp_path / "out"))
    asked = []

    def ask(request):
        asked.append(request.WhichOneof("body"))
        return answers.pop(0) if answers else None

    statemgr = open_state_manager(f"file://{tmp_path}/state")
    return (RemoteTMaster(prepared.view, "remote-1", ask, 0, statemgr, scheduler=scheduler),
            asked, statemgr)


def _view_answer(state: str, started: float | None = 1.0, generation: int = 0,
                 plan: bool = False):
    from heron_spark.contract.topology_view import HandleView, TopologyStatus
    from heron_spark.proto import physical_plan_pb2, tmaster_pb2

    physical = None
    if plan:  # the physical plan of ``generation``, one stmgr per container
        physical = physical_plan_pb2.PhysicalPlan(
            topology_name="remote", generation=generation,
            stmgrs=[physical_plan_pb2.StmgrInfo(container_index=i) for i in (0, 1)])
    view = HandleView(TopologyStatus("remote", "remote-1", state, started_at=started,
                                     generation=generation, registered=(0, 1)),
                      {"count": {"__execute-count/split/default": 7.0}}, physical)
    return tmaster_pb2.ControlResponse(ok=True, code=200, json=view.to_json())


def _final(state: str, detail: str, metrics: dict | None = None) -> dict:
    """Container 0's TMaster's last word in its stage summary."""
    from heron_spark.contract.topology_view import HandleView, TopologyStatus

    return HandleView(TopologyStatus("remote", "remote-1", state, detail=detail, started_at=1.0,
                                     ended_at=2.0), metrics or {}).as_dict()


def test_remote_tmaster_reads_the_view_and_caches_it(tmp_path):
    from heron_spark.scheduler.handle import TopologyHandle

    remote, asked, statemgr = _remote(tmp_path, [_view_answer("RUNNING")])
    handle = TopologyHandle("remote", remote, 1.0)
    assert handle.status == "RUNNING" and remote.running.is_set()
    assert handle.metrics() == {"count": {"__execute-count/split/default": 7.0}}  # cached
    assert asked == ["query"]
    assert handle.status_detail()["registered"] == [0, 1]
    statemgr.close()


def test_remote_tmaster_kill_without_an_answer_cancels_the_stage(tmp_path):
    cancelled = []

    class Stage:  # the run's side of the StageScheduler interface
        def update(self, parallelism):
            raise AssertionError("not asked")

        def cancel(self):
            cancelled.append(True)

    remote, asked, statemgr = _remote(tmp_path, [], Stage())
    remote.kill("by the test")
    assert asked == ["kill"] and cancelled == [True]
    remote.end_with_stage(None, RuntimeError("stage cancelled"), True,
                          "the Spark job was cancelled")
    assert remote.done.is_set() and remote.state.value == "KILLED"
    assert statemgr.get_execution_state("remote").state == "KILLED"  # stored for it
    statemgr.close()


def test_a_kill_asked_by_the_handle_keeps_its_detail(tmp_path):
    """As with a TMaster in the driver: whether container 0 answered or the stage was cancelled."""
    final = _final("KILLED", "killed through the control port")
    for summaries, error in (([{"container": 0, "tmaster": final}], None),
                             (None, RuntimeError("cancelled"))):
        remote, asked, statemgr = _remote(tmp_path, [_view_answer("KILLED")])
        remote.cancel_stage = lambda: None
        remote.kill("killed by the handle")
        remote.end_with_stage(summaries, error, error is not None,
                              "the Spark job was cancelled")
        assert (remote.state.value, remote.detail) == ("KILLED", "killed by the handle")
        assert asked == ["kill"]
        statemgr.close()


def test_remote_tmaster_takes_container_0s_last_word(tmp_path):
    remote, _asked, statemgr = _remote(tmp_path, [])
    final = _final("FINISHED", "every spout finished", {"count": {"x": 1.0}})
    remote.end_with_stage([{"container": 1}, {"container": 0, "tmaster": final}], None, False,
                          "unused")
    assert remote.state.value == "FINISHED" and remote.running.is_set()
    assert remote.detail == "every spout finished" and remote.metrics_by_component()["count"]
    statemgr.close()


def test_remote_tmaster_forgets_the_plan_of_a_replaced_generation(tmp_path):
    """After an update or a resubmission the old plan is gone, as in the driver's TMaster:
    ``wait_generation`` waits for the new TMaster's plan, and a late answer of the old
    generation's TMaster does not bring its plan back."""
    remote, asked, statemgr = _remote(tmp_path, [
        _view_answer("RUNNING", plan=True), _view_answer("RUNNING", plan=True),
        _view_answer("RUNNING", generation=1, plan=True)])
    remote.refresh(0)
    assert remote.physical_plan.generation == 0 and not remote.updating
    remote.begin_generation(1, remote.plan)  # an update's switch, in the stage's thread
    assert remote.physical_plan is None and remote.updating and remote.generation == 1
    assert remote.status().registered == ()
    remote.refresh(0)  # generation 0's TMaster, answering late
    assert remote.physical_plan is None
    remote.refresh(0)
    assert remote.physical_plan.generation == 1 and not remote.updating
    assert asked == ["query"] * 3
    statemgr.close()


def test_remote_tmaster_refusals_keep_the_tmasters_error_code_and_fields(tmp_path):
    import json as json_

    from heron_spark.errors import TopologyStateError
    from heron_spark.proto import tmaster_pb2

    fields = {"topology": "remote", "state": "PAUSED", "action": "deactivate it",
              "fix": "it is already deactivated"}
    refusal = tmaster_pb2.ControlResponse(ok=False, state="PAUSED", error="TopologyStateError",
                                          error_code="TOPOLOGY_STATE",
                                          error_fields_json=json_.dumps(fields))
    remote, asked, statemgr = _remote(tmp_path, [refusal])
    with pytest.raises(TopologyStateError) as refused:
        remote.set_paused(True)
    assert (refused.value.code, refused.value.fields()) == ("TOPOLOGY_STATE", fields)
    with pytest.raises(TopologyStateError) as unanswered:
        remote.set_paused(False)  # nobody answers
    assert (unanswered.value.code, unanswered.value.action) == ("TOPOLOGY_STATE", "activate it")
    assert asked == ["deactivate", "activate"]
    statemgr.close()
