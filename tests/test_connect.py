"""Submitting from a Spark Connect session: the TMaster in container 0.

A real Spark Connect server (``connect_server``: pyspark's ``sbin/start-connect-server.sh`` on
``local[4]``, 127.0.0.1) runs the barrier stage; the client is ``connect_client.py`` in its own
process, holding only a Connect session. ``heron.tmaster.placement`` auto means container
under Connect: container 0 runs the TMaster and the handle asks it through small Spark jobs.
One test runs the client in its own network namespace that reaches only the Connect endpoint.
Counts are checked exactly against ``reliable_word_count.expected_counts`` computed here from
the same corpus. Behaviours whose body is the same on a classic session run from
``test_session_parity.py`` under both kinds.
"""

from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys

import pytest

import fault_support as faults
import reliable_word_count as rwc
import stateful_word_count as swc
from connect_support import ConnectServer, run_client, wait_nothing_left
from zk_support import ZooKeeperServer
from heron_spark.testing import wait_until

pytestmark = pytest.mark.connect
LINES_EO = 8000


def _expected(folder, lines: int) -> collections.Counter:
    return rwc.expected_counts(rwc.write_corpus(folder / "expected.txt", lines))


def test_at_least_once_survives_kill_9_of_an_instance(connect_server, tmp_path):
    result = run_client(connect_server, "wordcount", tmp_path, lines=2500, name="connect-alo",
                        kill=True, config={"topology.message.timeout.secs": 4,
                                           "topology.max.spout.pending": 300, rwc.SLEEP_MS: 2})
    assert result["state"] == "FINISHED"
    assert result["killed_task"] is not None
    assert str(result["killed_task"]) in result["failures"]
    expected = _expected(tmp_path, 2500)
    raw = collections.Counter(result["raw"])
    assert not {w: (raw[w], c) for w, c in expected.items() if raw[w] < c}
    assert collections.Counter(result["unique"]) == expected
    print(f"{result['records'] - sum(expected.values())} word records replayed")


@pytest.mark.parametrize("container", [1, 0], ids=["container-1", "container-0-tmaster"])
def test_effectively_once_is_exact_after_kill_9_of_a_whole_container(connect_server, tmp_path,
                                                                     container):
    """Every process of one container killed at once; container 0 also hosts the TMaster.

    The barrier stage fails, the client resubmits it as generation 1 and its TMaster (in
    container 0 again) resumes from the last committed checkpoint: the counts stay exact.
    """
    result = run_client(connect_server, "stateful", tmp_path, lines=LINES_EO,
                        name=f"connect-eo-{container}", container=container)
    print(f"killed {result['killed']} after checkpoint {result['committed_before']}; "
          f"checkpoints {result['checkpoint']}")
    assert result["state"] == "FINISHED"
    assert result["killed"]["children"]  # the stmgr, instances and metrics manager at least
    assert bool(result["killed"]["tmaster"]) == (container == 0)
    expected = swc.expected_counts(swc.write_corpus(tmp_path / "expected.txt", LINES_EO))
    assert collections.Counter(result["counts"]) == expected
    assert result["generation"] >= 1  # the stage was resubmitted
    assert max(result["checkpoint"]["restored_from"]) > 0, result["checkpoint"]
    _check_nothing_left(tmp_path / "work")
    wait_until(lambda: not connect_server.running_jobs(), 30,
               message="the Spark job of the barrier stage to end")


def test_interrupt_tag_from_another_thread_stops_it_and_recovery_resubmits(connect_server,
                                                                            tmp_path):
    result = run_client(connect_server, "cancel", tmp_path, recover=True)
    assert result["generation"] == 1  # recover(): interrupted by tag, then resubmitted
    assert result["interrupted"]  # the operation ids interruptTag reached
    assert result["state"] == "KILLED"
    wait_nothing_left(connect_server, tmp_path / "work")


def test_workers_that_cannot_import_the_topology_get_one_error(connect_server, tmp_path):
    result = run_client(connect_server, "unimportable", tmp_path)
    assert result["error"] == "WorkerEnvironmentError"
    assert result["connect"] is True
    assert result["missing"] == "client_only_topology"
    assert "addArtifacts" in result["message"]
    assert not result["work_exists"]  # nothing launched


def test_a_server_whose_workers_lack_heron_spark_gets_one_error(tmp_path):
    import venv

    bare = tmp_path / "bare-venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(bare)
    server = ConnectServer(tmp_path / "server", python=str(bare / "bin" / "python3"),
                           pythonpath=()).start()
    try:
        result = run_client(server, "unimportable", tmp_path / "client", installed_only=True)
    finally:
        server.stop()
    assert result["error"] == "WorkerEnvironmentError"
    assert result["connect"] is True
    assert result["missing"] == "heron_spark"
    assert "spark.pyspark.python" in result["message"]
    assert not result["work_exists"]


@pytest.fixture
def client_netns():
    """A network namespace joined to this one by a veth pair; yield (name, host-side address).

    The namespace reaches only the host side's address (a /30 of 10.213.x.x made here);
    the namespace and the link are removed at the end, also on failure.
    """
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("a client in its own network namespace needs root and `ip netns`")
    tag = os.getpid() % 250
    name, outside, inside = f"hs-client-{os.getpid()}", f"hsv{os.getpid()}a", f"hsv{os.getpid()}b"
    host, client = f"10.213.{tag}.1", f"10.213.{tag}.2"

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True)

    try:
        try:
            ip("netns", "add", name)
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"`ip netns add` is unavailable here: {exc.stderr.strip()}")
        ip("link", "add", outside[:15], "type", "veth", "peer", "name", inside[:15])
        ip("link", "set", inside[:15], "netns", name)
        ip("addr", "add", f"{host}/30", "dev", outside[:15])
        ip("link", "set", outside[:15], "up")
        ip("-n", name, "addr", "add", f"{client}/30", "dev", inside[:15])
        ip("-n", name, "link", "set", inside[:15], "up")
        ip("-n", name, "link", "set", "lo", "up")
        yield name, host
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", outside[:15]], capture_output=True, check=False)


def test_a_client_that_reaches_only_the_connect_endpoint_runs_and_manages_a_topology(
        client_netns, tmp_path):
    """Laptop against a cluster: the TMaster runs in container 0, the handle asks it via Spark."""
    namespace, address = client_netns
    server = ConnectServer(tmp_path / "server", address=address).start()
    client = tmp_path / "client"
    client.mkdir()
    try:
        isolated = subprocess.run(  # the client's namespace cannot reach the server's loopback
            ["ip", "netns", "exec", namespace, sys.executable, "-c",
             f"import socket; socket.create_connection(('127.0.0.1', {server.ui_port}), 3)"],
            capture_output=True, check=False)
        assert isolated.returncode != 0
        result = run_client(server, "netns", client, prefix=("ip", "netns", "exec", namespace),
                            lines=1000)
    finally:
        server.stop()
    print(f"status through a Spark job: median {result['status_median_secs']:.3f} s "
          f"of {[round(c, 3) for c in result['status_secs']]}")
    assert result["states"][0] == "RUNNING"
    assert result["registered"] == [0, 1] and result["plan_stmgrs"] == 2
    assert "netns-wc" in result["repr"]
    _check_netns_run(result, client)
    _check_nothing_left(client / "work")


def test_a_netns_client_with_a_zookeeper_it_cannot_reach_submits_through_spark(
        client_netns, tmp_path):
    """The state manager is a ZooKeeper only the executors reach: submit's reads and writes,
    and a stage's final state, go through one-task Spark jobs (``RemoteStateManager``)."""
    from heron_spark.statemgr import open_state_manager

    namespace, address = client_netns
    client = tmp_path / "client"
    client.mkdir()
    with ZooKeeperServer() as zookeeper:
        url = zookeeper.url()
        unreachable = subprocess.run(  # ZooKeeper binds 127.0.0.1 of this namespace only
            ["ip", "netns", "exec", namespace, sys.executable, "-c",
             f"import socket; socket.create_connection(('127.0.0.1', {zookeeper.port}), 3)"],
            capture_output=True, check=False)
        assert unreachable.returncode != 0
        server = ConnectServer(tmp_path / "server", address=address).start()
        try:
            result = run_client(server, "netns", client, prefix=("ip", "netns", "exec", namespace),
                                lines=1000, statemgr=url)
        finally:
            server.stop()
        with open_state_manager(url) as statemgr:  # what the executors stored for the client
            stored = {name: statemgr.get_execution_state(name).state
                      for name in ("netns-wc", "netns-forever")}
            topologies = statemgr.topologies()
    print(f"submit through Spark: {result['submit_secs']:.2f} s, "
          f"{result['submit_statemgr_jobs']} state-manager jobs taking "
          f"{result['submit_statemgr_secs']:.2f} s "
          f"({result['statemgr_jobs']} by the end)")
    assert result["statemgr"] == "RemoteStateManager"
    assert result["submit_statemgr_jobs"] == 2  # the checks, then the writes
    _check_netns_run(result, client)
    assert stored == {"netns-wc": "FINISHED", "netns-forever": "KILLED"}
    assert {"netns-wc", "netns-forever"} <= set(topologies)
    assert not (client / "state").exists()  # nothing stored on the client's side
    _check_nothing_left(client / "work")


def _check_netns_run(result: dict, client) -> None:
    """Check what the netns client saw: the word count FINISHED and exact, pause, kill."""
    assert result["state"] == "FINISHED"
    expected = _expected(client, 1000)
    raw, _unique, _records = rwc.read_counts(client / "out")
    assert collections.Counter(raw) == expected
    assert result["counted"] == sum(expected.values())
    assert result["paused"] == "PAUSED"
    assert result["killed"] == "KILLED"


def _check_nothing_left(work) -> None:
    """Wait for every heron_spark process under ``work`` to exit; none may be left."""
    wait_until(lambda: not faults.processes_under(work), 30,
               message="every heron_spark process of the topologies to exit")
    left = subprocess.run(["pgrep", "-af", "heron_spark"], capture_output=True, text=True)
    assert str(work) not in left.stdout
