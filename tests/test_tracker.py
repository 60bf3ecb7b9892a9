"""One tracker, two topologies running at once on real Spark: Heron's paths, auth, files.

Both topologies are submitted by this driver to one state manager, so they share the
driver's tracker; a standalone ``heron-spark tracker`` serves the same state manager too.
Every answer is fetched over a real socket and checked against Heron's documented fields.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder, submit
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until
from heron_spark.tracker.auth import CSRF_HEADER, SESSION_COOKIE, tracker_token

pytestmark = pytest.mark.spark

CLI = [sys.executable, "-m", "heron_spark.cli"]


class SlowSpout(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.n = 0

    def next_tuple(self):
        time.sleep(0.01)  # keep two topologies light on a 2-core machine
        self.n += 1
        self.emit([self.n])


class SinkBolt(Bolt):
    def process(self, tup):
        pass


class FailOnceBolt(Bolt):
    """Raises on tuple 20 of the (single) spout: one exception for the exception views."""

    def process(self, tup):
        if tup.values[0] == 20:
            raise ValueError("tuple 20 is not welcome here")


def _topology(name: str, spout: str, bolt: str, containers: int, bolt_class=SinkBolt):
    builder = TopologyBuilder(name)
    numbers = builder.add_spout(spout, SlowSpout, par=containers)
    builder.add_bolt(bolt, bolt_class, par=2, inputs={numbers: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": containers})
    return builder.build()


class Tracker:
    """A client of one tracker URL: GETs and POSTs over real sockets.

    An ``https://`` URL is dialled with ``context`` (``wire.tls.https_client_context`` of the
    topology's CA: it trusts that CA only).
    """

    def __init__(self, url: str, token: str, context: ssl.SSLContext | None = None) -> None:
        self.url = url
        self.token = token
        self.context = context
        parts = urlsplit(url)
        self.address = (parts.hostname, parts.port)
        self.https = parts.scheme == "https"

    def request(self, method: str, path: str, params=None, headers=None, auth=True):
        conn = http.client.HTTPSConnection(*self.address, timeout=30, context=self.context) \
            if self.https else http.client.HTTPConnection(*self.address, timeout=30)
        try:
            headers = dict(headers or {})
            if auth:
                headers["Authorization"] = f"Bearer {self.token}"
            query = f"?{urlencode(params, doseq=True)}" if params else ""
            conn.request(method, path + query, headers=headers)
            response = conn.getresponse()
            return response.status, response.headers, response.read()
        finally:
            conn.close()

    def get(self, route: str, **params):
        status, headers, body = self.request("GET", route, params)
        assert status == 200, (route, status, body[:500])
        return json.loads(body) if headers["Content-Type"] == "application/json" else body


@pytest.fixture(scope="module")
def running(spark, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tracker")
    conf = {"heron.statemgr": f"file://{folder}/state", "heron.work.dir": f"{folder}/work",
            "heron.kill.grace.secs": 5}
    handles = []
    try:
        handles.append(submit(_topology("alpha", "numbers", "sink", 2), spark, conf=conf))
        handles.append(submit(_topology("beta", "ticks", "drain", 1, FailOnceBolt), spark,
                              conf=conf))
        for handle in handles:
            assert handle.wait_running(120), handle.status
        with open_state_manager(conf["heron.statemgr"]) as statemgr:
            token = tracker_token(statemgr)
        yield {"handles": handles, "conf": conf, "folder": folder,
               "tracker": Tracker(handles[0].tracker_url, token)}
    finally:
        for handle in handles:
            handle.kill()


def test_one_tracker_lists_both_topologies_with_heron_shapes(running):
    alpha, beta = running["handles"]
    assert alpha.tracker_url == beta.tracker_url  # one tracker per driver and state manager
    tracker = running["tracker"]
    listing = tracker.get("/topologies")
    (cluster, roles), = listing.items()
    assert cluster == "local" and sorted(next(iter(roles.values()))) == ["alpha", "beta"]
    states = tracker.get("/topologies/states")
    assert {name: s["status"] for name, s in states["local"]["default"].items()} == {
        "alpha": "RUNNING", "beta": "RUNNING"}
    assert tracker.get("/topologies", cluster="elsewhere") == {}

    state = tracker.get("/topologies/executionstate", topology="alpha", cluster="local",
                        environ="default")
    assert {"cluster", "environ", "role", "jobname", "submission_time", "submission_user",
            "release_username", "release_tag", "release_version", "instances", "extra_links",
            "has_physical_plan", "has_packing_plan", "has_tmanager_location",
            "has_scheduler_location", "status"} <= set(state)
    assert (state["jobname"], state["status"], state["live"], state["instances"]) == \
        ("alpha", "RUNNING", True, 4)
    assert state["has_physical_plan"] and state["has_packing_plan"]
    assert tracker.request("GET", "/topologies/executionstate",
                           {"topology": "alpha", "environ": "prod"})[0] == 404

    logical = tracker.get("/topologies/logicalplan", topology="alpha")
    assert (list(logical["spouts"]), list(logical["bolts"]), logical["stages"]) == \
        (["numbers"], ["sink"], 1)
    assert logical["bolts"]["sink"]["inputs"] == [
        {"stream_name": "default", "component_name": "numbers", "grouping": "SHUFFLE"}]
    assert logical["spouts"]["numbers"]["outputs"] == [{"stream_name": "default",
                                                        "fields": ["n"]}]

    packing = tracker.get("/topologies/packingplan", topology="beta")
    assert packing["id"] == beta.status_detail()["id"]
    (container,) = packing["container_plans"]
    assert sorted(i["component_name"] for i in container["instances"]) == \
        ["drain", "drain", "ticks"]
    assert set(container["instances"][0]) == {"component_name", "task_id", "component_index",
                                              "instance_resources"}

    physical = tracker.get("/topologies/physicalplan", topology="alpha")
    plan = alpha.physical_plan
    expected = {f"container_{i.container_index}_{i.component}_{i.task_id}": i.pid
                for i in plan.instances}
    assert {k: v["pid"] for k, v in physical["instances"].items()} == expected
    assert set(physical["stmgrs"]) == {"stmgr-0", "stmgr-1"}
    assert sorted(physical["spouts"]["numbers"] + physical["bolts"]["sink"]) == sorted(expected)
    assert set(physical["instance_groups"]) == {"container_0", "container_1"}
    assert set(next(iter(physical["instances"].values()))) >= {"id", "name", "stmgr_id",
                                                               "logfile"}
    stmgr = physical["stmgrs"]["stmgr-1"]
    assert {"id", "host", "port", "pid", "instance_ids"} <= set(stmgr)
    assert stmgr["pid"] == next(s.pid for s in plan.stmgrs if s.container_index == 1)

    config = tracker.get("/topologies/config", topology="alpha")
    assert config["topology.stmgrs"] == "2"
    info = tracker.get("/topologies/info", topology="beta")
    assert set(info) == {"execution_state", "id", "logical_plan", "metadata", "name",
                         "packing_plan", "physical_plan", "runtime_state",
                         "scheduler_location", "tmanager_location"}
    assert info["tmanager_location"]["controller_port"] == \
        running["handles"][1]._tmaster.port

    runtime = tracker.get("/topologies/runtimestate", topology="alpha")
    assert runtime["stmgrs"] == {"stmgr-0": {"is_registered": True},
                                 "stmgr-1": {"is_registered": True}}
    instance = next(iter(expected))
    pid = tracker.get("/topologies/pid", topology="alpha", instance=instance)
    assert (pid["stdout"].strip(), set(pid)) == (str(expected[instance]),
                                                 {"command", "stdout", "stderr"})
    assert tracker.request("GET", "/topologies/pid", {"topology": "alpha",
                                                      "instance": "container_9_x_99"})[0] == 404
    assert tracker.get("/health") == b"ok"


def test_container_files_come_through_the_stmgr_and_stay_confined(running):
    tracker = running["tracker"]
    listing = tracker.get("/topologies/container/filestats", topology="alpha", container=1,
                          path="logs")
    logs = sorted(name for name in listing if name.startswith("instance-"))
    assert logs and all(re.match(r"instance-(numbers|sink)-\d+\.(log|out)$", n) for n in logs)
    name = next(n for n in logs if n.endswith(".log"))
    physical = tracker.get("/topologies/physicalplan", topology="alpha")
    assert f"logs/{name}" in [i["logfile_path"] for i in physical["instances"].values()]
    on_disk = (Path(running["folder"]) / "work" / "alpha" / "gen-0" / "container-1" / "logs" /
               name).read_bytes()
    assert len(on_disk) >= 10
    page = tracker.get("/topologies/container/filedata", topology="alpha", container=1,
                       path=f"logs/{name}", offset=3, length=7)
    assert (page["offset"], page["length"], page["data"]) == (3, 7, on_disk[3:10].decode())
    big = tracker.get("/topologies/container/filedata", topology="alpha", container=1,
                      path=f"logs/{name}", offset=0, length=10 ** 9)
    assert big["length"] <= 256 * 1024 and big["data"].startswith(on_disk[:10].decode())
    for path in ("../../../../etc/passwd", "/etc/passwd", "logs/../../container-0/secret"):
        status, _, body = tracker.request("GET", "/topologies/container/filedata",
                                          {"topology": "alpha", "container": 1, "path": path,
                                           "offset": 0, "length": 10})
        assert status == 400 and b"path" in body, (path, status, body)
    status, _, _ = tracker.request("GET", "/topologies/container/filedata",
                                   {"topology": "alpha", "container": 1, "path": "logs/no.log",
                                    "offset": 0, "length": 10})
    assert status == 404
    assert tracker.request("GET", "/topologies/container/filestats",
                           {"topology": "alpha", "container": 7, "path": "."})[0] == 404


def test_prometheus_metrics_cover_every_live_topology(running):
    tracker = running["tracker"]
    def both() -> str | None:  # both topologies, and an instance's series (not only a stmgr's)
        text = tracker.get("/metrics").decode()
        return text if 'topology="alpha"' in text and 'topology="beta"' in text \
            and 'instance="container_0_numbers_' in text \
            and "heron_emit_count_default{" in text else None

    text = wait_until(both, 120, message="metrics of both topologies and of an instance")
    sample = re.compile(r'^heron_\w+\{topology="(alpha|beta)",component="[^"]+",'
                        r'instance="[^"]+",metric="[^"]+"\} \S+$')
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines and [line for line in lines if not sample.match(line)] == []
    assert any('instance="container_0_numbers_' in line for line in lines)
    # one TYPE line per family: a count is a counter
    types = dict(re.findall(r"^# TYPE (\S+) (counter|gauge|untyped)$", text, re.MULTILINE))
    assert {line.split("{", 1)[0] for line in lines} == set(types)
    assert types["heron_emit_count_default"] == "counter"


def test_auth_bearer_login_link_cookie_and_csrf(running):
    tracker = running["tracker"]
    alpha = running["handles"][0]
    status, headers, body = tracker.request("GET", "/topologies", auth=False)
    assert (status, headers["WWW-Authenticate"]) == (401, "Bearer")
    assert "heron-spark ui" in json.loads(body)["detail"]
    status, headers, body = tracker.request("GET", "/", auth=False)
    assert status == 401 and headers["Content-Type"].startswith("text/html")
    assert b"heron-spark ui" in body
    assert tracker.request("GET", "/topologies", headers={"Authorization": "Bearer x"},
                           auth=False)[0] == 401

    link = urlsplit(alpha.ui_link())
    assert link.path == "/login" and f"{link.hostname}:{link.port}" == \
        urlsplit(tracker.url).netloc
    status, headers, _ = tracker.request("GET", f"/login?{link.query}", auth=False)
    assert (status, headers["Location"]) == (303, "/")
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=") and "HttpOnly" in cookie \
        and "SameSite=Strict" in cookie
    assert tracker.request("GET", f"/login?{link.query}", auth=False)[0] == 403  # spent
    session = {"Cookie": cookie.split(";")[0]}
    status, headers, body = tracker.request("GET", "/", headers=session, auth=False)
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert tracker.request("GET", "/topologies", headers=session, auth=False)[0] == 200
    status, headers, body = tracker.request("GET", "/vendor/dagre-d3.min.js", headers=session,
                                            auth=False)
    assert status == 200 and headers["ETag"] and len(body) > 10_000

    # POST (management verbs): with the cookie only with the CSRF header, from our origin.
    verb = {"topology": "alpha"}
    assert tracker.request("POST", "/topologies/deactivate", verb, session, auth=False)[0] == 403
    evil = {**session, CSRF_HEADER: "1", "Origin": "http://evil.example"}
    assert tracker.request("POST", "/topologies/deactivate", verb, evil, auth=False)[0] == 403
    proven = {**session, CSRF_HEADER: "1", "Origin": tracker.url}
    status, _, body = tracker.request("POST", "/topologies/deactivate", verb, proven,
                                      auth=False)
    assert status == 200 and json.loads(body)["result"] == "PAUSED", body
    assert alpha.status == "PAUSED"
    assert tracker.get("/topologies/executionstate", topology="alpha")["status"] == "PAUSED"
    status, _, body = tracker.request("POST", "/topologies/deactivate", verb)  # Bearer
    assert status == 409 and b"already" in body  # a wrong-state verb: TopologyStateError
    assert tracker.request("POST", "/topologies/activate", verb)[0] == 200
    assert alpha.status == "RUNNING"
    status, _, body = tracker.request("POST", "/topologies/restart",
                                      {**verb, "container": 9})
    assert status == 400 and b"container" in body
    status, _, body = tracker.request("POST", "/topologies/update",
                                      {**verb, "component_parallelism": "nope:2"})
    assert status == 400 and b"nope" in body
    assert tracker.request("POST", "/topologies/update", verb)[0] == 400
    assert tracker.request("PUT", "/topologies/deactivate", verb)[0] == 405


def test_the_cli_prints_a_working_link_and_a_standalone_tracker_serves_all(running):
    statemgr = f"heron.statemgr={running['conf']['heron.statemgr']}"
    printed = subprocess.run([*CLI, "ui", "beta", "--token", "--conf", statemgr],
                             capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    link, bearer = printed.stdout.split()[0], printed.stdout.strip().splitlines()[1]
    assert bearer == f"Authorization: Bearer {running['tracker'].token}"
    parts = urlsplit(link)
    assert f"{parts.hostname}:{parts.port}" == urlsplit(running["tracker"].url).netloc
    assert running["tracker"].request("GET", f"/login?{parts.query}", auth=False)[0] == 303

    standalone = subprocess.Popen([*CLI, "tracker", "--port", "0", "--conf", statemgr],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = standalone.stdout.readline()
        url = re.search(r"at (http://\S+)", line).group(1)
        other = Tracker(url, running["tracker"].token)
        assert sorted(next(iter(other.get("/topologies")["local"].values()))) == \
            ["alpha", "beta"]
        runtime = other.get("/topologies/runtimestate", topology="beta")
        assert runtime["stmgrs"] == {"stmgr-0": {"is_registered": True}}
        login = standalone.stdout.readline()
        assert other.request("GET", urlsplit(login.split()[-1]).path + "?" +
                             urlsplit(login.split()[-1]).query, auth=False)[0] == 303
    finally:
        standalone.terminate()
        assert standalone.wait(30) == 0, standalone.stderr.read()


def test_live_metric_and_exception_views_have_heron_shapes(running):
    tracker = running["tracker"]
    alpha = running["handles"][0]
    sinks = sorted(i for i in tracker.get("/topologies/physicalplan",
                                          topology="alpha")["bolts"]["sink"])
    metric = "__execute-count/numbers/default"
    wait_until(lambda: len(tracker.get("/topologies/metrics", topology="alpha", component="sink",
                                       metricname=metric)["metrics"][metric]) == 2, 60,
               message="both sink instances' execute counts")
    metrics = tracker.get("/topologies/metrics", topology="alpha", component="sink",
                          metricname=metric, interval=-1)
    assert (set(metrics), metrics["component"]) == ({"metrics", "interval", "component"}, "sink")
    assert sorted(metrics["metrics"][metric]) == sinks
    assert all(float(v) > 0 for v in metrics["metrics"][metric].values())
    one = tracker.get("/topologies/metrics", topology="alpha", component="sink",
                      metricname=metric, instance=sinks[0])
    assert list(one["metrics"][metric]) == [sinks[0]]
    now = int(time.time())
    timeline = tracker.get("/topologies/metrics/timeline", topology="alpha", component="sink",
                           metricname=metric, starttime=now - 600, endtime=now + 60)
    assert set(timeline) == {"starttime", "endtime", "component", "timeline"}
    assert sorted(timeline["timeline"][metric]) == sinks
    query = tracker.get("/topologies/metrics/query", topology="alpha",
                        query=f"SUM(TS(sink,*,{metric}))", starttime=now - 600,
                        endtime=now + 60)
    assert set(query) == {"starttime", "endtime", "timeline"}
    assert set(query["timeline"][0]) == {"instance", "data"}
    status, _, body = tracker.request("GET", "/topologies/metrics/query",
                                      {"topology": "alpha", "query": "SUM(TS(sink,*,",
                                       "starttime": now - 600, "endtime": now})
    assert status == 400 and b"detail" in body
    assert tracker.request("GET", "/topologies/metrics",
                           {"topology": "alpha", "component": "nope"})[0] == 400
    assert alpha.status == "RUNNING"

    wait_until(lambda: tracker.get("/topologies/exceptions", topology="beta", component="drain"),
               60, message="the drain bolt's exception")
    (entry,) = tracker.get("/topologies/exceptions", topology="beta", component="drain")
    assert set(entry) == {"hostname", "lasttime", "firsttime", "count", "stacktrace",
                          "logging", "instance_id"}
    assert "tuple 20 is not welcome here" in entry["stacktrace"] and entry["count"] == "1"
    assert entry["instance_id"].startswith("container_0_drain_")
    (summary,) = tracker.get("/topologies/exceptionsummary", topology="beta", component="drain")
    assert set(summary) == {"class_name", "lasttime", "firsttime", "count"}
    assert "ValueError" in summary["class_name"]
    assert tracker.get("/topologies/exceptions", topology="alpha", component="sink") == []
