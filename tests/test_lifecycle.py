"""Kill a running topology (CLI, Spark job cancel) and find no process left behind.

A kill from the handle: ``test_session_parity.py``, on a classic and a Connect session.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder, TopologyStateError, submit
from heron_spark.contract import execution_state
from heron_spark.scheduler.spark_scheduler import job_group
from heron_spark.testing import wait_until

pytestmark = pytest.mark.spark


class ForeverSpout(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.n = 0

    def next_tuple(self):
        self.n += 1
        self.emit([self.n])


class SinkBolt(Bolt):
    def process(self, tup):
        pass


def _unbounded(name):
    builder = TopologyBuilder(name)
    spout = builder.add_spout("numbers", ForeverSpout, par=2)
    builder.add_bolt("sink", SinkBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 2})
    return builder.build()


def _processes_under(folder) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "heron_spark." in line and str(folder) in line]


def _wait_gone(folder, timeout=30.0) -> list[str]:
    """Wait up to ``timeout`` s for every process under ``folder`` to exit; return those left."""
    try:
        wait_until(lambda: not _processes_under(folder), timeout, interval=0.2)
    except AssertionError:
        return _processes_under(folder)
    return []


@pytest.fixture
def conf(tmp_path):
    return {"heron.statemgr": f"file://{tmp_path}/state", "heron.work.dir": f"{tmp_path}/work",
            "heron.kill.grace.secs": 5, "heron.tracker.idle.timeout.secs": 2}


@pytest.fixture
def running(conf):
    """Start unbounded topologies; kill whatever a test leaves running, even on failure."""
    handles = []

    def start(name):
        handle = submit(_unbounded(name), conf=conf, master="local[2]")
        handles.append(handle)
        assert handle.wait_running(120), handle.status
        wait_until(lambda: handle.metrics().get("sink", {}).get("__execute-count", 0) != 0, 60,
                   interval=0.1, message="a tuple to reach the sink")
        return handle

    yield start
    for handle in handles:
        handle.kill()


def test_cli_kill_and_second_submit_refused(running, conf, tmp_path, tmaster_placement):
    handle = running("clikill")
    # The driver's tracker; in container placement only once container 0 runs one (c0tracker).
    if handle.tracker_url is not None or tmaster_placement != "container":
        _check_tracker(handle, conf)
    with pytest.raises(TopologyStateError):
        submit(_unbounded("clikill"), conf=conf, master="local[2]")
    cli = [sys.executable, "-m", "heron_spark.cli"]
    listed = subprocess.run([*cli, "list", "--conf", f"heron.statemgr={conf['heron.statemgr']}"],
                            capture_output=True, text=True, timeout=60)
    assert "clikill\tRUNNING\tlive" in listed.stdout
    killed = subprocess.run([*cli, "kill", "clikill", "--conf",
                             f"heron.statemgr={conf['heron.statemgr']}"],
                            capture_output=True, text=True, timeout=60)
    assert killed.returncode == 0 and "KILLED" in killed.stdout, killed.stderr
    assert handle.wait(60) == "KILLED"
    assert _wait_gone(tmp_path) == []


def _check_tracker(handle, conf):
    """The tracker answers only requests carrying the tracker token of the state manager."""
    import json
    import urllib.error
    import urllib.request

    from heron_spark.statemgr import open_state_manager
    from heron_spark.tracker.auth import tracker_token

    url = f"{handle.tracker_url}/topologies/executionstate?topology={handle.name}"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=10)
    assert refused.value.code == 401
    with open_state_manager(conf["heron.statemgr"]) as statemgr:
        token = tracker_token(statemgr)
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        state = json.loads(response.read())
    assert (state["status"], state["live"], state["jobname"]) == ("RUNNING", True, handle.name)
    # heron.tracker.idle.timeout.secs (2 here, 10 by default) reaches the submitted tracker.
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(handle.tracker_url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as idle:
        opened = time.monotonic()
        assert idle.recv(1) == b""  # closed by the server, not by our timeout
        assert time.monotonic() - opened < 8


def test_cancelling_the_spark_job_group_kills_every_process(running, tmp_path):
    handle = running("cancelme")
    from pyspark.sql import SparkSession

    SparkSession.getActiveSession().sparkContext.cancelJobGroup(job_group("cancelme"))
    assert handle.wait(120) == "KILLED"
    assert _wait_gone(tmp_path) == []


SIGTERM_DRIVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from test_lifecycle import _unbounded
from heron_spark import submit
conf = {"heron.statemgr": "file://" + sys.argv[2] + "/state",
        "heron.work.dir": sys.argv[2] + "/work", "heron.kill.grace.secs": 5}
first = submit(_unbounded("sigterm_a"), conf=conf, master="local[4]")
second = submit(_unbounded("sigterm_b"), conf=conf, master="local[4]")
assert first.wait_running(120) and second.wait_running(120)
print("RUNNING", flush=True)
while True:
    time.sleep(1)
"""


def test_sigterm_to_the_driver_kills_every_topology(tmp_path):
    """Airflow stops a spark-submit driver with SIGTERM: both topologies die with it."""
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    driver = subprocess.Popen([sys.executable, "-c", SIGTERM_DRIVER, tests_dir, str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert driver.stdout.readline().strip() == "RUNNING"
        assert len(_processes_under(tmp_path)) >= 16  # 2 topologies x (2 stmgr + 2 metrics + 4)
        driver.terminate()
        assert driver.wait(120) == 128 + 15
        assert _wait_gone(tmp_path) == []
    finally:
        if driver.poll() is None:
            driver.kill()


CTRL_C_TOPOLOGY = """
from heron_spark import Bolt, Grouping, Spout, TopologyBuilder

class Forever(Spout):
    outputs = ["n"]
    def initialize(self, config, context):
        self.n = 0
    def next_tuple(self):
        self.n += 1
        self.emit([self.n])

class Sink(Bolt):
    def process(self, tup):
        pass

builder = TopologyBuilder("ctrlc")
numbers = builder.add_spout("numbers", Forever, par=2)
builder.add_bolt("sink", Sink, par=2, inputs={numbers: Grouping.SHUFFLE})
builder.set_config({"topology.stmgrs": 2})
builder.build_and_submit()
"""


def test_ctrl_c_of_the_cli_is_a_planned_stop(tmp_path):
    """Ctrl-C reaches the terminal's whole process group (the CLI, Spark's
    JVM, its Python workers, the containers' children); the topology ends KILLED, nothing is
    logged as an error, no child is restarted, and no process is left."""
    from heron_spark.statemgr import open_state_manager

    topology_file = tmp_path / "ctrlc_topology.py"
    topology_file.write_text(CTRL_C_TOPOLOGY)
    state = f"file://{tmp_path}/state"
    err_path = tmp_path / "submit.err"
    with open(err_path, "w") as err:
        cli = subprocess.Popen([sys.executable, "-m", "heron_spark.cli", "submit",
                                "--master", "local[2]", "--conf", f"heron.statemgr={state}",
                                "--conf", f"heron.work.dir={tmp_path}/work",
                                str(topology_file)],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=err, text=True,
                               start_new_session=True)  # its own group, as at a terminal
    try:
        statemgr = open_state_manager(state)

        def ctrlc_running() -> bool:
            if (execution_state.state_of(statemgr.get_execution_state("ctrlc")) == "RUNNING"
                    and len(_processes_under(tmp_path)) >= 8):
                return True
            assert cli.poll() is None, err_path.read_text()[-4000:]
            return False

        wait_until(ctrlc_running, 120, interval=0.2,
                   message=lambda: "RUNNING\n" + err_path.read_text()[-4000:])
        os.killpg(cli.pid, signal.SIGINT)  # what Ctrl-C at the terminal does
        code = cli.wait(120)
    finally:
        if cli.poll() is None:
            os.killpg(cli.pid, signal.SIGKILL)
    stderr = err_path.read_text()
    assert code == 130, stderr[-4000:]
    assert "interrupted; topology killed" in stderr
    ours = [line for line in stderr.splitlines() if "heron_spark" in line or "container" in line]
    assert not [line for line in ours if line.startswith("ERROR")], "\n".join(ours)
    assert "Traceback" not in stderr, stderr[-4000:]
    assert "restart" not in stderr, "\n".join(ours)
    assert statemgr.get_execution_state("ctrlc").state == "KILLED"
    assert _wait_gone(tmp_path) == []
