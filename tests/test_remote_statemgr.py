"""``RemoteStateManager`` without Spark: the request/response encoding and the executor side.

The runner that would be a one-task Spark job is ``execute`` called in this process, on a local
folder state manager, so these check what crosses the job: calls in order, results back,
the executor's exceptions back as their own class, and the typed helpers on the primitives.
"""

from __future__ import annotations

import pytest

from heron_spark.contract import execution_state
from heron_spark.errors import TopologyStateError
from heron_spark.proto import packing_pb2, topology_pb2
from heron_spark.scheduler import remote_statemgr as remote
from heron_spark.scheduler.remote_statemgr import RemoteStateError, RemoteStateManager, run_on
from heron_spark.statemgr import open_state_manager


class Unimportable(Exception):
    """An exception whose class the client cannot import (its module is renamed below)."""


def _refuse(statemgr, name: str) -> None:
    raise TopologyStateError(name, "RUNNING", "submit it again", f"kill it first: {name}")


def _put_and_count(statemgr, name: str, count: int) -> int:
    for index in range(count):
        statemgr.put(name, f"k{index}", b"v")
    return len(statemgr.keys(name))


@pytest.fixture
def requests(tmp_path):
    """A RemoteStateManager whose jobs run here; yield (it, the requests it sent)."""
    sent: list[bytes] = []

    def runner(request: bytes) -> bytes:
        sent.append(request)
        return remote.execute(request)

    return RemoteStateManager(None, str(tmp_path / "state"), runner=runner), sent


def test_a_batch_runs_in_order_in_one_request(requests):
    statemgr, sent = requests
    results = statemgr.batch([("put", ("t", "a", b"1"), {}), ("get", ("t", "a"), {}),
                              ("keys", ("t",), {}), ("delete", ("t", "a"), {}),
                              ("get", ("t", "a"), {})])
    assert results == [None, b"1", ["a"], None, None]
    assert len(sent) == 1 and statemgr.jobs == 1


def test_the_typed_helpers_work_on_the_primitives(requests, tmp_path):
    statemgr, sent = requests
    proto = topology_pb2.Topology(name="t", id="t-1")
    statemgr.set_topology(proto)
    statemgr.set_packing_plan("t", packing_pb2.PackingPlan(topology_name="t"))
    statemgr.set_execution_state("t", execution_state.from_status(
        {"name": "t", "id": "t-1", "state": "STARTING", "generation": 0}))
    statemgr.set_spout_state("t", "s.1", {"offset": 3})
    statemgr.clear_spout_states("t")
    assert statemgr.get_topology("t") == proto
    assert statemgr.get_packing_plan("t").topology_name == "t"
    assert statemgr.get_execution_state("t").state == "STARTING"
    assert statemgr.get_spout_state("t", "s.1") is None
    assert statemgr.topologies() == ["t"]
    with open_state_manager(str(tmp_path / "state")) as direct:  # really stored there
        assert direct.get_topology("t") == proto
    assert statemgr.jobs == len(sent) > 5  # one job per primitive


def test_run_on_sends_a_function_as_one_job_and_calls_it_directly_otherwise(requests, tmp_path):
    statemgr, sent = requests
    assert run_on(statemgr, _put_and_count, "t", 4) == 4
    assert len(sent) == 1
    with open_state_manager(str(tmp_path / "direct")) as direct:
        assert run_on(direct, _put_and_count, "t", 2) == 2


def test_an_executor_exception_comes_back_as_its_class_with_its_attributes(requests):
    statemgr, _sent = requests
    with pytest.raises(TopologyStateError, match="kill it first: t") as raised:
        statemgr.batch([("put", ("t", "a", b"1"), {}), (_refuse, ("t",), {}),
                        ("put", ("t", "b", b"2"), {})])
    assert raised.value.topology == "t" and raised.value.state == "RUNNING"
    assert statemgr.keys("t") == ["a"]  # the calls after the failing one did not run


def test_an_exception_whose_class_is_not_importable_here_is_a_remote_state_error(
        monkeypatch):
    def fail(statemgr) -> None:
        raise Unimportable("gone")

    monkeypatch.setattr(Unimportable, "__module__", "no_such_module_here")
    response = remote.execute(remote.encode_request("unused", [(fail, (), {})]),
                              statemgr=object())  # type: ignore[arg-type]
    with pytest.raises(RemoteStateError, match="no_such_module_here.Unimportable: gone"):
        remote.decode_response(response)


def test_a_bad_url_fails_on_the_executor_with_the_config_error(requests):
    from heron_spark.errors import ConfigError

    response = remote.execute(remote.encode_request("nope://x", [("keys", ("t",), {})]))
    with pytest.raises(ConfigError):
        remote.decode_response(response)


def test_claims_are_refused_and_the_location_hides_a_password():
    statemgr = RemoteStateManager(None, "zk://me:secret@127.0.0.1:2181/root",
                                  runner=lambda request: b"")
    with pytest.raises(TopologyStateError):
        statemgr.claim_tmaster("t", {"port": 1})
    statemgr.release_tmaster("t")  # holds none: nothing happens
    assert "secret" not in statemgr.location and "127.0.0.1:2181/root" in statemgr.location
    assert statemgr.jobs == 0


def test_submits_steps_travel_as_plain_bytes(requests, tmp_path):
    """Protobuf messages do not pickle: submit's and update's steps pass bytes both ways."""
    from heron_spark.scheduler.remote import store_final_state
    from heron_spark.scheduler.placement import write_container_run
    from heron_spark.scheduler.submit import _prior_run
    from heron_spark.scheduler.update import store_plans

    statemgr, sent = requests
    starting = execution_state.from_status({"name": "t", "id": "t-1", "state": "STARTING",
                                            "generation": 0})
    topology = topology_pb2.Topology(name="t", id="t-1")
    run_on(statemgr, write_container_run, "t", str(tmp_path / "ckpt"),
           execution_state.encode(starting), topology.SerializeToString(),
           packing_pb2.PackingPlan(topology_name="t").SerializeToString())
    prior, stored = run_on(statemgr, _prior_run, "t")  # STARTING is live: a resume
    assert execution_state.decode(prior).id == "t-1"
    assert topology_pb2.Topology.FromString(stored) == topology
    run_on(statemgr, store_plans, "t", topology.SerializeToString(),
           packing_pb2.PackingPlan(topology_name="t2").SerializeToString())
    run_on(statemgr, store_final_state, "t", "t-1", {"state": "FAILED", "detail": "stage"})
    assert len(sent) == 4
    assert statemgr.get_packing_plan("t").topology_name == "t2"
    assert statemgr.get_execution_state("t").state == "FAILED"
