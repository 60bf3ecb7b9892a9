"""The typed views of a topology and the TMaster's control port, without Spark.

A real TMaster listens on loopback; the control clients (``tmaster.client``) and the tracker's
verbs reach it through its secret-checked port, as the CLI and the tracker do. Refusals come
back as the TMaster's own error, by its stable ``code`` with its fields.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import reliable_word_count as rwc
from examples import word_count
from heron_spark.contract.live_paths import TRACKER_PATHS, LivePath
from heron_spark.contract.topology_view import (CommittedCheckpoint, HandleView,
                                                TMasterLocation, TopologyStatus)
from heron_spark.errors import (ClusterCapacityError, TopologyStateError, TopologyValueError,
                                refusal)
from heron_spark.inprocess import InProcessTopology
from heron_spark.inprocess.view import InProcessTMasterView
from heron_spark.plan.prepare import prepare
from heron_spark.proto import physical_plan_pb2, tmaster_pb2
from heron_spark.testing import COLLECT_DIR
from heron_spark.statemgr.localfs import LocalFileStateManager
from heron_spark.tmaster import client
from heron_spark.tmaster.live_queries import answer
from heron_spark.tmaster.master import TMaster
from heron_spark.tracker import auth
from heron_spark.tracker.app import TrackerApp
from heron_spark.tracker.http import Request

SECRET = "s" * 64


class LockProbe(LocalFileStateManager):
    """A local state manager that notes, on each write, whether the TMaster's lock is free.

    Another thread tries the lock: a write made under it would keep that thread out.
    """

    tmaster: TMaster | None = None

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.lock_free: list[bool] = []

    def put(self, topology: str, key: str, value: bytes, private: bool = False) -> None:
        if self.tmaster is not None:
            got: list[bool] = []

            def probe() -> None:
                lock = self.tmaster._lock  # noqa: SLF001 - the probe is about this lock
                got.append(lock.acquire(timeout=2))
                if got[0]:
                    lock.release()

            thread = threading.Thread(target=probe)
            thread.start()
            thread.join()
            self.lock_free.append(got[0])
        super().put(topology, key, value, private)


@pytest.fixture
def master(tmp_path):
    prepared = prepare(rwc.build("views", tmp_path / "c.txt", tmp_path / "out"))
    statemgr = LockProbe(str(tmp_path / "state"))
    tmaster = TMaster(prepared.view, statemgr, SECRET, "127.0.0.1", "views-1", 1 << 20,
                      generation=2)
    statemgr.tmaster = tmaster
    from heron_spark.scheduler.update import topology_proto

    statemgr.set_topology(topology_proto(prepared.logical, "views-1", b""))
    statemgr.claim_tmaster("views", TMasterLocation("127.0.0.1", tmaster.port, 1,
                                                    SECRET).as_dict())
    try:
        yield tmaster.start()
    finally:
        tmaster.close()
        statemgr.close()


def test_refusals_cross_the_control_port_as_their_code_and_fields(master):
    statemgr = master.statemgr
    with pytest.raises(TopologyStateError) as active:
        client.activate_topology(statemgr, "views")
    assert active.value.code == "TOPOLOGY_STATE"
    assert (active.value.topology, active.value.action) == ("views", "activate it")
    assert active.value.state.startswith("STARTING")
    with pytest.raises(TopologyStateError) as update:
        client.update_topology(statemgr, "views", {"count": 2})
    assert (update.value.code, update.value.action) == ("TOPOLOGY_STATE", "update it")
    assert client.deactivate_topology(statemgr, "views") == "STARTING"
    assert master.paused


def test_a_refusal_is_rebuilt_from_its_fields_with_the_same_message():
    for exc in (TopologyStateError("t", "RUNNING", "activate it", "it is active"),
                TopologyValueError("no such container", value=5, kind="container", fix="0-1"),
                ClusterCapacityError(4, 2, "local[2]")):
        again = refusal(exc.code, json.loads(json.dumps(exc.fields())))
        assert (type(again), again.code, str(again)) == (type(exc), exc.code, str(exc))
        assert again.fields() == exc.fields()


def test_the_tracker_answers_a_refused_verb_with_its_code(master):
    app = TrackerApp(master.statemgr, auth.Authenticator(lambda: "t0ken"))
    bearer = {"authorization": "Bearer t0ken"}
    response = app.handle(Request("POST", "/topologies/restart",
                                  {"topology": ["views"], "container": ["7"]}, bearer))
    body = json.loads(response.body)
    assert response.status == 409, body  # STARTING: nothing to restart yet
    assert (body["code"], body["fields"]["topology"], body["fields"]["action"]) == \
        ("TOPOLOGY_STATE", "views", "restart it")


def test_state_manager_writes_happen_outside_the_tmaster_lock(master):
    writes = len(master.statemgr.lock_free)
    master.set_paused(True)
    master.kill("killed by the test")
    assert len(master.statemgr.lock_free) > writes  # the state was stored, twice
    assert all(master.statemgr.lock_free)
    stored = master.statemgr.get_execution_state("views")
    assert (stored.state, stored.paused, stored.generation) == ("KILLED", True, 2)


def test_the_handle_view_is_one_typed_document(master):
    master.tracker_url = "http://10.0.0.7:4000"
    query = tmaster_pb2.ViewQuery(path=LivePath.HANDLE.value, params_json="{}")
    view = HandleView.from_json(answer(master, query).json)
    assert (view.status.name, view.status.state, view.status.generation) == \
        ("views", "STARTING", 2)
    assert view.status.containers == master.plan.container_count
    assert view.physical_plan is None and view.failure is None
    assert view.tracker_url == "http://10.0.0.7:4000"
    status = answer(master, tmaster_pb2.ViewQuery(path=LivePath.STATUS.value, params_json="{}"))
    assert TopologyStatus.from_dict(json.loads(status.json)) == master.status()


def test_typed_views_round_trip():
    plan = physical_plan_pb2.PhysicalPlan(topology_name="t", generation=3)
    failure = tmaster_pb2.InstanceFailed(component="c", task_id=4, error="boom")
    status = TopologyStatus("t", "t-1", "RUNNING", started_at=5.0, containers=2,
                            registered=(0, 1), heartbeats={0: 4.5}, dead_stmgrs=(1,),
                            dead_stmgr_hosts={1: "h"}, instance_failures={4: 2},
                            checkpoint={"committed": 3}, received={"stmgr.frames": 9})
    view = HandleView(status, {"c": {"__emit-count/default": 7.0}}, plan, failure, "http://h:1")
    again = HandleView.from_json(view.to_json())
    assert again.status == status and again.metrics == view.metrics
    assert (again.physical_plan, again.failure, again.tracker_url) == (plan, failure,
                                                                       "http://h:1")
    record = status.record()
    assert (record.state, record.started_at, dict(record.instance_failures)) == \
        ("RUNNING", 5.0, {4: 2})
    assert TopologyStatus.from_record(record).instance_failures == {4: 2}
    location = TMasterLocation("h", 9, 1, "secret", 4000, "http://h:4000", 2)
    assert TMasterLocation.from_stored(location.as_dict()) == location
    assert TMasterLocation.from_stored(None) is None
    committed = CommittedCheckpoint(3, 1, "file:///c", 12.5)
    assert CommittedCheckpoint.from_stored(committed.as_dict()) == committed


def test_the_tracker_forwards_only_the_shared_live_paths():
    assert LivePath.METRICS.value in TRACKER_PATHS
    assert LivePath.HANDLE.value not in TRACKER_PATHS


def test_an_in_process_run_is_a_tmaster_view(tmp_path):
    runner = InProcessTopology(word_count.build(200), conf={COLLECT_DIR: str(tmp_path)})
    view = InProcessTMasterView(runner)
    assert view.status().state == "STARTING" and not view.running.is_set()
    runner.run(timeout=60)
    view.refresh()
    assert view.done.is_set() and view.running.is_set()
    status = view.status()
    assert (status.state, status.containers, status.generation) == \
        (runner.status, runner.plan.container_count, 0)
    assert status.registered == tuple(range(runner.plan.container_count))
    with pytest.raises(TopologyStateError) as refused:
        view.restart(0)
    assert refused.value.code == "TOPOLOGY_STATE"


def test_no_module_outside_the_tmaster_takes_its_lock_or_asks_its_kind():
    """The TMaster's lock is master.py's alone; readers use ``TMasterView``, not isinstance."""
    import re

    import heron_spark

    root = Path(heron_spark.__file__).parent
    lock = re.compile(r"\btmaster\._lock\b|\bwith \w+\._lock\b(?<!self\._lock)")
    kind = re.compile(r"isinstance\([^)]*(RemoteTMaster|TMaster|InProcessTMasterView)\b")
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(root).as_posix()
        assert not (where != "tmaster/master.py" and "tmaster._lock" in text), where
        assert not lock.search(text) or where == "tmaster/master.py", where
        assert not kind.search(text), where
