"""The tracker's parts without Spark: container file access, auth, static files, shapes.

Real files in a temporary work dir, the real spark-core jar of the installed pyspark, an
injected clock for expiry.
"""

from __future__ import annotations

import os
import stat

import pytest

from heron_spark.container import file_view
from heron_spark.contract import execution_state
from heron_spark.errors import TrackerRequestError
from heron_spark.proto import tmaster_pb2, topology_pb2
from heron_spark.statemgr import open_state_manager
from heron_spark.tracker import auth, shapes, static
from heron_spark.tracker.app import TrackerApp
from heron_spark.tracker.http import Request


@pytest.fixture
def workdir(tmp_path):
    root = tmp_path / "container-0"
    (root / "logs").mkdir(parents=True)
    (root / "logs" / "instance-count-3.log").write_bytes(b"0123456789" * 10)
    (tmp_path / "outside.txt").write_text("secret")
    os.symlink(tmp_path / "outside.txt", root / "escape.txt")
    return root


def test_file_data_pages_with_offset_and_length(workdir):
    path = "logs/instance-count-3.log"
    assert file_view.file_data(workdir, path, 5, 10) == {
        "offset": 5, "length": 10, "data": "5678901234", "size": 100}
    assert file_view.file_data(workdir, path, 95, -1)["data"] == "56789"  # -1: the rest
    assert file_view.file_data(workdir, path, -1, 10)["length"] == 0  # -1: at the end
    assert file_view.file_data(workdir, path, 0, -1, max_bytes=7)["data"] == "0123456"
    assert file_view.file_data(workdir, path, 500, 10) == {
        "offset": 100, "length": 0, "data": "", "size": 100}


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "logs/../../outside.txt",
                                  "escape.txt"])
def test_file_access_is_confined_to_the_work_dir(workdir, path):
    with pytest.raises(TrackerRequestError) as refused:
        file_view.file_data(workdir, path, 0, 10)
    assert (refused.value.status, refused.value.param) == (400, "path")
    with pytest.raises(TrackerRequestError) as refused:
        file_view.file_stats(workdir, path)
    assert refused.value.status == 400


def test_missing_files_are_404_and_listings_have_heron_shell_fields(workdir):
    with pytest.raises(TrackerRequestError) as missing:
        file_view.file_data(workdir, "logs/nope.log", 0, 1)
    assert missing.value.status == 404
    listing = file_view.file_stats(workdir, "logs")
    entry = listing["instance-count-3.log"]
    assert entry["path"] == "logs/instance-count-3.log" and entry["is_dir"] is False
    assert entry["formatted_stat"].startswith("-rw") and entry["size"] == 100
    assert file_view.file_stats(workdir, ".")["logs"]["is_dir"] is True


def test_the_stmgr_answer_carries_status_and_json(workdir):
    ok = file_view.answer(workdir, tmaster_pb2.FileRequest(request_id=7, op="data",
                                                           path="logs/instance-count-3.log",
                                                           offset=0, length=3))
    assert (ok.request_id, ok.code, ok.json.count("012")) == (7, 200, 1)
    bad = file_view.answer(workdir, tmaster_pb2.FileRequest(request_id=8, op="data",
                                                            path="../outside.txt"))
    assert (bad.code, bad.json) == (400, "") and "path" in bad.error


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_login_links_work_once_and_expire():
    clock = Clock()
    authenticator = auth.Authenticator(lambda: "t0ken", clock)
    first = auth.login_token("t0ken", clock.now)
    assert authenticator.spend_login(first)
    assert not authenticator.spend_login(first)  # spent
    late = auth.login_token("t0ken", clock.now)
    clock.now += auth.LOGIN_LINK_TTL_SECS + 1
    assert not authenticator.spend_login(late)  # expired
    assert not authenticator.spend_login(auth.login_token("other-token", clock.now))  # forged
    nonce, expiry, mac = auth.login_token("t0ken", clock.now).split(".")
    assert not authenticator.spend_login(f"{nonce}.{int(expiry) + 3600}.{mac}")  # tampered


def test_session_cookies_are_signed_httponly_strict_and_expire():
    clock = Clock()
    authenticator = auth.Authenticator(lambda: "t0ken", clock)
    set_cookie = authenticator.session_cookie()
    value = set_cookie.split(";")[0]
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
    assert authenticator.session_ok(f"other=1; {value}")
    assert not authenticator.session_ok(value[:-1] + ("0" if value[-1] != "0" else "1"))
    assert not auth.Authenticator(lambda: "another", clock).session_ok(value)
    clock.now += auth.SESSION_TTL_SECS + 1
    assert not authenticator.session_ok(value)
    assert authenticator.bearer_ok("Bearer t0ken") and not authenticator.bearer_ok("Bearer t0k")


def test_csrf_proof_needs_the_header_and_a_same_host_origin():
    header = auth.CSRF_HEADER.lower()
    assert not auth.csrf_ok({"host": "h:1"})
    assert auth.csrf_ok({"host": "h:1", header: "1"})
    assert auth.csrf_ok({"host": "h:1", header: "1", "origin": "http://h:1"})
    assert not auth.csrf_ok({"host": "h:1", header: "1", "origin": "http://evil:1"})


def test_the_tracker_token_is_created_once_and_owner_only(tmp_path):
    with open_state_manager(f"file://{tmp_path}/state") as statemgr:
        token = auth.tracker_token(statemgr)
        assert auth.tracker_token(statemgr) == token and len(token) == 64
        assert statemgr.topologies() == []  # the keyspace is not a topology
    files = [p for p in (tmp_path / "state").rglob("*") if p.is_file() and "token" in p.name]
    assert files and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)


def test_vendor_files_come_from_the_spark_core_jar_with_etags():
    vendor = static.VendorFiles()
    assert {"d3.min.js", "dagre-d3.min.js", "vis-timeline-graph2d.min.js",
            "vis-timeline-graph2d.min.css"} <= set(vendor.names())
    response = vendor.response("d3.min.js")
    headers = dict(response.headers)
    assert response.status == 200 and len(response.body) > 10_000
    assert headers["Content-Type"].startswith("text/javascript")
    assert "max-age" in headers["Cache-Control"]
    assert vendor.response("d3.min.js", headers["ETag"]).status == 304
    assert dict(vendor.response("vis-timeline-graph2d.min.css").headers)[
        "Content-Type"].startswith("text/css")
    assert vendor.response("nope.js") is None


def test_ui_files_are_served_from_the_ui_folder_only(tmp_path):
    (tmp_path / "index.html").write_text("<p>hi</p>")
    (tmp_path / "app.js").write_text("1")
    assert static.ui_file("index.html", ui_dir=tmp_path).body == b"<p>hi</p>"
    js = static.ui_file("app.js", ui_dir=tmp_path)
    assert dict(js.headers)["Cache-Control"] == "no-cache"
    assert static.ui_file("../index.html", ui_dir=tmp_path / "sub") is None
    assert static.ui_file("/etc/passwd", ui_dir=tmp_path) is None
    assert static.ui_file("index.html").status == 200  # the packaged placeholder / UI


def test_the_logical_plan_has_heron_fields_and_stages():
    topology = topology_pb2.Topology(name="t", id="t-1")
    topology.components.add(name="word", is_spout=True, parallelism=2).outputs.add(
        stream="default", fields=["w"])
    split = topology.components.add(name="split", parallelism=2)
    split.inputs.add(component="word", stream="default", grouping=topology_pb2.SHUFFLE)
    split.outputs.add(stream="default", fields=["w"])
    count = topology.components.add(name="count", parallelism=2)
    count.inputs.add(component="split", stream="default", grouping=topology_pb2.FIELDS,
                     fields=["w"])
    plan = shapes.logical_plan(topology)
    assert plan["stages"] == 2
    assert set(plan["spouts"]["word"]) >= {"config", "outputs", "spout_type", "spout_source",
                                           "extra_links"}
    assert plan["bolts"]["count"]["inputs"] == [
        {"stream_name": "default", "component_name": "split", "grouping": "FIELDS"}]
    assert plan["bolts"]["count"]["inputComponents"] == ["split"]


def test_unauthenticated_browser_and_api_requests_get_clear_401s(tmp_path):
    with open_state_manager(f"file://{tmp_path}/state") as statemgr:
        app = TrackerApp(statemgr, auth.Authenticator(lambda: "t0ken"),
                         live=lambda *a: (503, "no"))
        page = app.handle(Request("GET", "/"))
        assert page.status == 401 and b"heron-spark ui" in page.body
        assert dict(page.headers)["Content-Type"].startswith("text/html")
        api = app.handle(Request("GET", "/topologies"))
        assert api.status == 401 and b'"detail"' in api.body
        assert app.handle(Request("GET", "/health")).body == b"ok"
        bearer = {"authorization": "Bearer t0ken"}
        missing = app.handle(Request("GET", "/topologies/logicalplan", headers=bearer))
        assert missing.status == 400 and b"topology" in missing.body
        unknown = app.handle(Request("GET", "/topologies/logicalplan",
                                     {"topology": ["nope"]}, bearer))
        assert unknown.status == 404


def test_a_driver_shares_one_tracker_and_falls_back_from_a_busy_port(tmp_path):
    import socket

    from heron_spark.tracker import service

    url = f"file://{tmp_path}/state"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        first = service.acquire(url, "127.0.0.1", port, idle_timeout_secs=1.0)
        try:
            assert first.server_address[1] not in (0, port)  # not the busy port
            assert service.acquire(url, "127.0.0.1", port) is first  # shared
            with open_state_manager(url) as statemgr:
                assert service.tracker_urls(statemgr) == [first.url]
            service.release(first)
            with open_state_manager(url) as statemgr:  # one user left: still serving
                assert service.tracker_urls(statemgr) == [first.url]
        finally:
            service.release(first)
        with open_state_manager(url) as statemgr:  # the last release shut it down
            assert service.tracker_urls(statemgr) == []
            assert not [k for k in statemgr.keys(auth.TRACKER_KEYSPACE)
                        if k.startswith(auth.LOCATION_PREFIX)]


def test_stored_execution_state_has_heron_shape():
    """The tracker shapes a stored execution state as Heron's; with no live TMaster a live
    state becomes NOT_RUNNING."""
    from heron_spark.contract.topology_view import TMasterLocation, TopologyStatus

    status = {"name": "wc", "id": "wc-1", "state": "RUNNING", "detail": "", "started_at": 5.0,
              "ended_at": None, "generation": 1, "paused": False, "updating": False,
              "containers": 2, "instance_failures": {"3": 1}, "heartbeats": {"0": 4.0},
              "submission": {"cluster": "local", "environ": "default", "role": "alice",
                             "submission_user": "alice", "submission_time": 1700000000,
                             "release_version": "0.1"}}
    from_proto = execution_state.decode(execution_state.encode(execution_state.from_status(status)))
    shaped = shapes.execution_state("wc", from_proto, None, None, None, None, None)
    assert {k: shaped[k] for k in ("cluster", "environ", "role", "submission_time",
                                      "submission_user", "status", "live", "id", "generation",
                                      "started_at", "ended_at", "instance_failures")} == {
        "cluster": "local", "environ": "default", "role": "alice",
        "submission_time": 1700000000, "submission_user": "alice", "status": "NOT_RUNNING",
        "live": False, "id": "wc-1", "generation": 1, "started_at": 5.0, "ended_at": None,
        "instance_failures": {"3": 1}}
    live = TopologyStatus.from_dict(dict(status, state="PAUSED"))
    assert shapes.execution_state("wc", from_proto, None, None, None,
                                  TMasterLocation("h", 1), live)["status"] == "PAUSED"
    nothing = shapes.execution_state("wc", None, None, None, None, None, None)
    assert (nothing["status"], nothing["cluster"], nothing["role"]) == ("UNKNOWN", "local", "")
