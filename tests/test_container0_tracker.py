"""The tracker beside the TMaster in container 0 (``heron.tmaster.placement`` container).

A classic session in container placement (``spark``): container 0's TMaster child serves the
tracker on the executor's address and publishes its URL with the TMaster's location; it
answers Heron's routes only to a Bearer token or a session from a one-time login link, and a
new generation of container 0 publishes a new URL. Without Spark, on a real TMaster: the
``ui_link`` control view and the record the TMaster child stores when its task ends under a
live topology. The Spark Connect side (a client killed for good) is in
``tests/test_client_gone.py``.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

import fault_support as faults
import resilience_topologies as topo
from heron_spark import submit
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until
from heron_spark.entry.tmaster import task_ended_detail
from heron_spark.tracker.auth import SESSION_COOKIE, tracker_token
from test_tracker import Tracker


def _location(statemgr_url: str, name: str) -> dict:
    with open_state_manager(statemgr_url) as statemgr:
        return statemgr.get_tmaster_location(name) or {}


@pytest.mark.spark
def test_container_0_serves_the_tracker_and_a_new_generation_a_new_url(tmp_path):
    name = "c0-tracker"
    statemgr_url = f"file://{tmp_path}/state"
    conf = {"heron.statemgr": statemgr_url, "heron.work.dir": f"{tmp_path}/work",
            "heron.tmaster.placement": "container", "heron.kill.grace.secs": 5,
            "heron.tracker.port": 0, "heron.stage.resubmit.backoff.secs": 0.2}
    handle = submit(topo.numbers(name, tmp_path / "n", count=-1, sleep_ms=1), conf=conf,
                    master="local[4]")
    try:
        assert handle.wait_running(120), handle.status
        url = handle.tracker_url
        assert url is not None and urlsplit(url).hostname == "127.0.0.1"  # the executor's
        location = _location(statemgr_url, name)
        assert (location["tracker_url"], location["generation"]) == (url, 0)
        assert location["tracker_port"] == urlsplit(url).port
        with open_state_manager(statemgr_url) as statemgr:
            token = tracker_token(statemgr)
        tracker = Tracker(url, token)

        # Every route but /health and /login wants the token or a session.
        status, headers, _ = tracker.request("GET", "/topologies", auth=False)
        assert (status, headers["WWW-Authenticate"]) == (401, "Bearer")
        assert Tracker(url, "wrong").request("GET", "/topologies")[0] == 401
        assert name in json.dumps(tracker.get("/topologies"))
        plan = tracker.get("/topologies/physicalplan", topology=name)
        assert len(plan["stmgrs"]) == 2
        wait_until(lambda: tracker.get("/topologies/metrics", topology=name,
                                       component="slow")["metrics"], 60, interval=0.5,
                   message="live metrics from the TMaster through the tracker")

        # A one-time login link, minted by the TMaster in container 0.
        link = urlsplit(handle.ui_link())
        assert (link.path, link.netloc) == ("/login", urlsplit(url).netloc)
        status, headers, _ = tracker.request("GET", f"/login?{link.query}", auth=False)
        assert (status, headers["Location"]) == (303, "/")
        cookie = headers["Set-Cookie"].split(";")[0]
        assert cookie.startswith(f"{SESSION_COOKIE}=")
        assert tracker.request("GET", f"/login?{link.query}", auth=False)[0] == 403  # spent
        status, _, body = tracker.request("GET", "/topologies", headers={"Cookie": cookie},
                                          auth=False)
        assert status == 200 and name.encode() in body
        assert "/login?token=" in handle._repr_html_()  # the notebook view: a login link

        # Container 0 again (its TMaster killed): the next generation's tracker, a new URL.
        [tmaster] = faults.find(tmp_path / "work", "tmaster")
        faults.kill9(tmaster)
        wait_until(lambda: handle.status_detail()["generation"] == 1
                   and handle.physical_plan is not None, 120, interval=0.5,
                   message="generation 1 (a new container 0, TMaster and tracker) to run")
        new_url = handle.tracker_url
        assert new_url is not None and new_url != url
        location = _location(statemgr_url, name)
        assert (location["tracker_url"], location["generation"]) == (new_url, 1)
        assert name in json.dumps(Tracker(new_url, token).get("/topologies"))
        assert urlsplit(handle.ui_link()).netloc == urlsplit(new_url).netloc
    finally:
        handle.kill()
    assert handle.wait(timeout=60) == "KILLED"
    with open_state_manager(statemgr_url) as statemgr:
        stored = statemgr.get_execution_state(name)
    assert stored.state == "KILLED" and stored.detail != task_ended_detail(1)  # the handle's kill
    wait_until(lambda: not faults.processes_under(tmp_path / "work"), 30,
               message="every heron_spark process to exit")


# ---- no Spark: the TMaster child's pieces on a real TMaster (loopback listener) -------------
@pytest.fixture
def tmaster(tmp_path):
    import reliable_word_count as rwc
    from heron_spark.plan.prepare import prepare
    from heron_spark.tmaster.master import TMaster

    prepared = prepare(rwc.build("c0-unit", tmp_path / "c.txt", tmp_path / "out"))
    statemgr = open_state_manager(f"file://{tmp_path}/state")
    master = TMaster(prepared.view, statemgr, "s" * 64, "127.0.0.1", "c0-unit-1", 1 << 20,
                     generation=3)
    try:
        yield master
    finally:
        master.close()
        statemgr.close()


def test_the_ui_link_view_needs_a_tracker_beside_the_tmaster(tmaster):
    from heron_spark.proto import tmaster_pb2
    from heron_spark.contract.live_paths import LivePath
    from heron_spark.contract.topology_view import HandleView
    from heron_spark.tmaster.live_queries import answer

    query = tmaster_pb2.ViewQuery(path=LivePath.UI_LINK.value, params_json="{}")
    refused = answer(tmaster, query)
    assert (refused.ok, refused.code) == (False, 404)
    assert "heron.tracker.port" in refused.detail
    tmaster.login_link = lambda: "http://10.0.0.7:4000/login?token=x"
    tmaster.tracker_url = "http://10.0.0.7:4000"
    assert json.loads(answer(tmaster, query).json) == {"url": "http://10.0.0.7:4000/login?token=x"}
    handle_view = answer(tmaster, tmaster_pb2.ViewQuery(path=LivePath.HANDLE.value,
                                                        params_json="{}"))
    view = HandleView.from_json(handle_view.json)
    assert (view.tracker_url, view.status.generation) == ("http://10.0.0.7:4000", 3)


def test_a_stop_under_a_live_topology_is_stored_with_its_reason_an_ended_one_is_kept(tmaster):
    from heron_spark.entry.tmaster import _record_stop

    tmaster.start()  # stores STARTING, generation 3
    _record_stop(tmaster, tmaster.statemgr, "KILLED", task_ended_detail(3))
    stored = tmaster.statemgr.get_execution_state("c0-unit")
    assert (stored.state, stored.generation, stored.detail) == \
        ("KILLED", 3, task_ended_detail(3))
    tmaster.kill("killed by the test")  # ended: its own record stays
    _record_stop(tmaster, tmaster.statemgr, "KILLED", task_ended_detail(3))
    assert tmaster.statemgr.get_execution_state("c0-unit").detail == "killed by the test"


def test_the_final_metrics_wait_for_every_metrics_manager_to_hang_up(tmaster):
    """Container 0's TMaster writes the final metrics once every metrics manager hung up: the
    other containers stop on their own clock, and their last snapshot must be in."""
    from heron_spark.contract import roles
    from heron_spark.proto import metrics_pb2
    from heron_spark.wire import frames
    from heron_spark.wire.connection import Connection, dial

    tmaster.start()
    assert tmaster.await_final_metrics(0.0)  # none connected
    conn = Connection(dial("127.0.0.1", tmaster.port, "s" * 64, "c0-unit", roles.METRICSMGR, 1),
                      "test-metricsmgr", lambda *a: None, lambda c: None,
                      max_frame_bytes=1 << 20).start()
    wait_until(lambda: not tmaster.await_final_metrics(0.0), 10,
               message="the TMaster to adopt the metrics manager's connection")
    assert not tmaster.await_final_metrics(0.05)  # connected: waits, then says so
    snapshot = metrics_pb2.MetricsSnapshot(container_index=1, publishes=[
        metrics_pb2.MetricsPublish(component="count", task_id=6, metrics=[
            metrics_pb2.Metric(name="__execute-count/split/default", value=7433)])])
    conn.send(frames.control_frame(snapshot))
    conn.flush(5)
    conn.close()  # its last snapshot sent: hang up
    assert tmaster.await_final_metrics(10)
    assert tmaster.metrics_by_component()["count"]["__execute-count/split/default"] == 7433
