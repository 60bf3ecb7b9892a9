"""State managers against real storage: a temp folder, and a real ZooKeeper server.

Most tests run on both backends (``statemgr`` is parametrized). The TMaster claim is checked
within one process and across processes: a holder subprocess claims and blocks on stdin; after
``kill -9`` the claim frees at once (localfs: the kernel drops the flock) or when the holder's
ZooKeeper session expires (zk: the ephemeral node vanishes; sessions of 1 s on a server with
tickTime 200 ms keep that quick).
"""

from __future__ import annotations

import contextlib
import logging
import select
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from zk_support import zookeeper  # noqa: F401

from heron_spark.config import STATEMGR
from heron_spark.contract import execution_state
from heron_spark.contract.topology_view import TMasterLocation
from heron_spark.errors import ConfigError, TopologyStateError, TopologyValueError
from heron_spark.proto import packing_pb2
from heron_spark.statemgr import (
    LocalFileStateManager,
    ZooKeeperStateManager,
    open_state_manager,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCATION = {"host": "10.0.0.1", "port": 4000, "tracker_port": 4001, "pid": 123}


@pytest.fixture(params=["localfs", pytest.param("zk", marks=pytest.mark.cluster)])
def store_url(request, tmp_path) -> str:
    """A fresh, empty store of each kind (the ZooKeeper server starts only for zk)."""
    if request.param == "localfs":
        return f"file://{tmp_path}/state"
    return request.getfixturevalue("zookeeper").url()


@pytest.fixture
def statemgr(store_url):
    with open_state_manager(store_url) as manager:
        yield manager


def test_open_state_manager_picks_the_backend(store_url, tmp_path):
    with open_state_manager(store_url) as manager:
        kind = LocalFileStateManager if store_url.startswith("file:") else ZooKeeperStateManager
        assert isinstance(manager, kind)
        assert manager.location.split("://")[0] == store_url.split("://")[0]
    assert isinstance(open_state_manager(str(tmp_path / "bare")), LocalFileStateManager)


# key/value -----------------------------------------------------------------------------------
def test_put_get_roundtrip_overwrite_and_missing(statemgr):
    blob = bytes(range(256)) * 16
    statemgr.put("wc", "blob", blob)
    assert statemgr.get("wc", "blob") == blob
    statemgr.put("wc", "blob", b"second")
    assert statemgr.get("wc", "blob") == b"second"
    statemgr.put("wc", "empty", b"")
    assert statemgr.get("wc", "empty") == b""
    statemgr.put("wc", "with.dots.in.it", b"x")
    assert statemgr.get("wc", "with.dots.in.it") == b"x"
    assert statemgr.get("wc", "missing") is None
    assert statemgr.get("no-such-topology", "blob") is None


def test_topologies_lists_only_those_with_a_definition(statemgr):
    assert statemgr.topologies() == []
    statemgr.put("b-topo", "topology", b"def")
    statemgr.put("a-topo", "topology", b"def")
    statemgr.put("partial", "packing_plan", b"plan")
    assert statemgr.topologies() == ["a-topo", "b-topo"]


def test_delete_topology_removes_every_key(statemgr):
    statemgr.put("wc", "topology", b"def")
    statemgr.put("wc", "secret", b"s", private=True)
    statemgr.set_spout_state("wc", "word.0", {"offset": 1})
    statemgr.put("other", "topology", b"def")
    statemgr.delete_topology("wc")
    assert statemgr.get("wc", "topology") is None
    assert statemgr.get_spout_state("wc", "word.0") is None
    assert statemgr.topologies() == ["other"]
    statemgr.delete_topology("wc")  # idempotent
    statemgr.delete_topology("never-there")


def test_spout_state_roundtrip(statemgr):
    state = {"offset": 42, "pending": [1, 2, 3], "source": "kafka://x"}
    assert statemgr.get_spout_state("wc", "word.3") is None
    statemgr.set_spout_state("wc", "word.3", state)
    assert statemgr.get_spout_state("wc", "word.3") == state
    assert statemgr.get("wc", "spout_state.word.3") is not None
    statemgr.set_spout_state("wc", "word.3", {"offset": 43})
    assert statemgr.get_spout_state("wc", "word.3") == {"offset": 43}


def test_keys_delete_and_clearing_spout_states(statemgr):
    statemgr.put("wc", "topology", b"t")
    statemgr.set_spout_state("wc", "lines.0", {"offset": 1})
    statemgr.set_spout_state("wc", "lines.1", {"offset": 2})
    assert statemgr.keys("wc") == ["spout_state.lines.0", "spout_state.lines.1", "topology"]
    statemgr.delete("wc", "spout_state.lines.0")
    statemgr.delete("wc", "spout_state.lines.0")  # absent: nothing happens
    assert statemgr.get_spout_state("wc", "lines.0") is None
    statemgr.clear_spout_states("wc")
    assert statemgr.keys("wc") == ["topology"]
    assert statemgr.keys("unknown") == []


def test_typed_plan_helpers(statemgr):
    plan = packing_pb2.PackingPlan(topology_name="wc", algorithm="round_robin")
    container = plan.containers.add(index=1, cpu=2.0, ram_bytes=1 << 30)
    container.instances.add(task_id=1, component="word", component_index=0, cpu=1.0,
                            ram_bytes=1 << 29)
    assert statemgr.get_packing_plan("wc") is None
    statemgr.set_packing_plan("wc", plan)
    assert statemgr.get_packing_plan("wc") == plan
    state = execution_state.ExecutionState(name="wc", state="RUNNING", generation=2)
    state.submission.role = "alice"
    statemgr.set_execution_state("wc", state)
    assert statemgr.get_execution_state("wc") == state


@pytest.mark.parametrize("topology, key", [("wc", "a/b"), ("wc", ".."), ("a/b", "k"), ("", "k")])
def test_names_must_be_flat(statemgr, topology, key):
    with pytest.raises(TopologyValueError) as info:
        statemgr.put(topology, key, b"x")
    assert info.value.kind == "name"


def test_set_tmaster_location_still_works(statemgr):
    statemgr.set_tmaster_location("wc", "h", 1, 2, 3, "s3cret")
    assert statemgr.get_tmaster_location("wc") == {"host": "h", "port": 1, "tracker_port": 2,
                                                   "pid": 3, "secret": "s3cret"}
    assert statemgr.get_tmaster_location("other") is None


# TMaster claim within one process ------------------------------------------------------------
def test_second_claim_is_refused_until_release(store_url):
    with open_state_manager(store_url) as first, open_state_manager(store_url) as second:
        first.claim_tmaster("wc", {**LOCATION, "secret": "s1"})
        assert first.get_tmaster_location("wc") == {**LOCATION, "secret": "s1"}
        for claimer in (second, first):  # another object, and the holder itself
            with pytest.raises(TopologyStateError) as info:
                claimer.claim_tmaster("wc", {"host": "intruder", "port": 1, "secret": "s2"})
            assert (info.value.topology, info.value.state) == ("wc", "RUNNING")
            assert info.value.action == "start a second TMaster"
        assert second.get_tmaster_location("wc") == {**LOCATION, "secret": "s1"}
        second.release_tmaster("wc")  # holds nothing: no effect
        assert second.get_tmaster_location("wc")["host"] == LOCATION["host"]

        first.release_tmaster("wc")
        first.release_tmaster("wc")  # idempotent
        second.claim_tmaster("wc", {"host": "second", "port": 2, "secret": "s2"})
        assert second.get_tmaster_location("wc") == {"host": "second", "port": 2, "secret": "s2"}


def test_control_tls_is_stored_apart_and_a_claim_without_it_clears_it(store_url):
    with open_state_manager(store_url) as statemgr:
        statemgr.claim_tmaster("wc", {**LOCATION, "secret": "s1", "control_tls": "{\"pem\"}"})
        assert statemgr.get_tmaster_location("wc")["control_tls"] == "{\"pem\"}"
        assert b"pem" not in statemgr.get("wc", "tmaster")  # private, like the secret
        statemgr.release_tmaster("wc")
        statemgr.claim_tmaster("wc", TMasterLocation("h", 2, secret="s2").as_dict())
        location = statemgr.get_tmaster_location("wc")
        assert location["secret"] == "s2" and "control_tls" not in location


def test_close_ends_the_claim(store_url):
    first = open_state_manager(store_url)
    first.claim_tmaster("wc", LOCATION)
    first.close()
    first.close()  # idempotent
    with open_state_manager(store_url) as second:
        second.claim_tmaster("wc", LOCATION)


def test_claim_replaces_a_plain_location_record(statemgr):
    statemgr.set_tmaster_location("wc", "old", 1, 2, 3, "old-secret")
    statemgr.claim_tmaster("wc", {"host": "new", "port": 9})
    assert statemgr.get_tmaster_location("wc") == {"host": "new", "port": 9,
                                                   "secret": "old-secret"}


def test_delete_topology_ends_the_claim(store_url):
    with open_state_manager(store_url) as first, open_state_manager(store_url) as second:
        first.claim_tmaster("wc", LOCATION)
        first.delete_topology("wc")
        second.claim_tmaster("wc", LOCATION)
        with pytest.raises(TopologyStateError):
            first.claim_tmaster("wc", LOCATION)


def test_concurrent_claims_have_one_winner(store_url):
    managers = [open_state_manager(store_url) for _ in range(6)]
    start = threading.Barrier(len(managers))
    outcomes: list[str] = []

    def claim(manager) -> None:
        start.wait(30)
        try:
            manager.claim_tmaster("wc", LOCATION)
            outcomes.append("won")
        except TopologyStateError:
            outcomes.append("refused")

    try:
        threads = [threading.Thread(target=claim, args=(m,)) for m in managers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(outcomes) == ["refused"] * (len(managers) - 1) + ["won"]
    finally:
        for manager in managers:
            manager.close()


# TMaster claim across processes --------------------------------------------------------------
HOLDER = """
import sys
from heron_spark.statemgr import open_state_manager
manager = open_state_manager(sys.argv[1])
manager.claim_tmaster(sys.argv[2], {"host": "holder", "port": 1})
print("claimed", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def claim_holder(url: str, topology: str, log_path: Path, timeout_secs: float = 60.0):
    """A subprocess holding the TMaster claim (blocked on stdin); killed on exit."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, url, topology],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                cwd=REPO_ROOT)
    try:
        deadline = time.monotonic() + timeout_secs
        line = b""
        while line.strip() != b"claimed":
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the holder did not claim in {timeout_secs} s")
            if select.select([proc.stdout], [], [], left)[0]:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"the holder exited with {proc.wait(10)}: "
                                       f"{log_path.read_text()}")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        proc.stdin.close()
        proc.stdout.close()


def test_localfs_claim_frees_when_the_holder_is_killed(tmp_path):
    url = f"file://{tmp_path}/state"
    with open_state_manager(url) as manager:
        with claim_holder(url, "wc", tmp_path / "holder.log") as holder:
            with pytest.raises(TopologyStateError):
                manager.claim_tmaster("wc", LOCATION)
            assert manager.get_tmaster_location("wc")["host"] == "holder"
            holder.kill()
            holder.wait(30)
            manager.claim_tmaster("wc", LOCATION)  # at once: the kernel dropped the flock
        assert manager.get_tmaster_location("wc")["host"] == LOCATION["host"]


@pytest.mark.cluster
def test_zk_claim_frees_when_the_holder_session_expires(zookeeper, tmp_path):  # noqa: F811
    url = zookeeper.url()
    with open_state_manager(url) as manager:
        node = f"{manager.root}/wc/tmaster"
        with claim_holder(f"{url}?session_timeout_secs=1", "wc", tmp_path / "holder.log") \
                as holder:
            with pytest.raises(TopologyStateError):
                manager.claim_tmaster("wc", LOCATION)
            assert manager.get_tmaster_location("wc")["host"] == "holder"
            with node_deleted(zookeeper.hosts, node) as gone:
                holder.kill()
                holder.wait(30)
                killed = time.monotonic()
                assert gone.wait(30), "the ephemeral node outlived the holder's session"
            assert time.monotonic() - killed < 30
            manager.claim_tmaster("wc", LOCATION)
        assert manager.get_tmaster_location("wc")["host"] == LOCATION["host"]


@pytest.mark.cluster
def test_zk_session_expiry_is_logged_and_drops_the_claim(zookeeper):  # noqa: F811
    url = zookeeper.url()
    expired = threading.Event()

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.ERROR and "expired" in record.getMessage():
                expired.set()

    watch = Watch()
    logger = logging.getLogger("heron_spark.statemgr.zookeeper")
    logger.addHandler(watch)
    try:
        with open_state_manager(url) as manager, open_state_manager(url) as other:
            manager.claim_tmaster("wc", LOCATION)
            # Expire the session the way ZooKeeper's own tests do: a second client attaches
            # to it (same id and password) and closes it.
            thief = KazooClient(hosts=zookeeper.hosts, client_id=manager._zk.client_id)
            thief.start(timeout=10)
            thief.stop()
            thief.close()
            assert expired.wait(30), "session expiry was not logged"
            other.claim_tmaster("wc", {"host": "other", "port": 2})  # the node went with it
            manager.release_tmaster("wc")  # the old claim: must not delete other's node
            assert manager.get_tmaster_location("wc")["host"] == "other"
            with pytest.raises(TopologyStateError):
                manager.claim_tmaster("wc", LOCATION)  # kazoo reconnected with a new session
    finally:
        logger.removeHandler(watch)


@contextlib.contextmanager
def node_deleted(hosts: str, path: str):
    """Yield an Event set once ``path`` does not exist (watched by a separate client)."""
    gone = threading.Event()
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=10)
    try:
        def on_change(data, node_stat) -> None:
            if node_stat is None:
                gone.set()

        client.DataWatch(path, on_change)
        yield gone
    finally:
        client.stop()
        client.close()


# access control ------------------------------------------------------------------------------
def test_localfs_values_and_folders_are_owner_only(tmp_path):
    root = tmp_path / "state"
    manager = LocalFileStateManager(root)
    manager.put("wc", "secret", b"s", private=True)
    manager.put("wc", "topology", b"plan")
    manager.claim_tmaster("other", {"host": "h", "port": 1})
    try:
        for path in (root / "wc" / "secret", root / "wc" / "topology"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
        for folder in (root, root / "wc", root / "other"):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    finally:
        manager.release_tmaster("other")


@pytest.mark.cluster
def test_zk_private_values_need_the_writer_credentials(zookeeper):  # noqa: F811
    root = zookeeper.url().rsplit("/", 1)[1]
    with open_state_manager(zookeeper.url(root, user="heron", password="pw")) as writer:
        writer.set_tmaster_location("wc", "h", 1, 2, 3, "s3cret")
        writer.put("wc", "public", b"p")
    with open_state_manager(zookeeper.url(root, user="heron", password="pw")) as reader:
        assert reader.get_tmaster_location("wc")["secret"] == "s3cret"
    with open_state_manager(zookeeper.url(root)) as anonymous:
        assert anonymous.get("wc", "public") == b"p"
        with pytest.raises(ConfigError) as info:
            anonymous.get("wc", "secret")
        assert info.value.key == STATEMGR
    with open_state_manager(zookeeper.url(root, user="heron", password="wrong")) as stranger:
        with pytest.raises(ConfigError):
            stranger.get("wc", "secret")
        assert stranger.get("wc", "public") == b"p"
        with pytest.raises(ConfigError):  # readable, but only its writer may change it
            stranger.put("wc", "public", b"rewritten")
    client = KazooClient(hosts=zookeeper.hosts)
    client.start(timeout=10)
    try:
        with pytest.raises(NoAuthError):
            client.get(f"/{root}/wc/secret")
        for node in (f"/{root}/wc/public", f"/{root}/wc/tmaster", f"/{root}/wc"):
            with pytest.raises(NoAuthError):
                client.set(node, b"rewritten")
        with pytest.raises(NoAuthError):
            client.delete(f"/{root}/wc/public")
        with pytest.raises(NoAuthError):
            client.create(f"/{root}/wc/planted", b"x")
        assert client.get(f"/{root}/wc/public")[0] == b"p"
    finally:
        client.stop()
        client.close()


@pytest.mark.cluster
def test_zk_value_size_is_checked_before_sending(zookeeper):  # noqa: F811
    with open_state_manager(zookeeper.url()) as manager:
        with pytest.raises(TopologyValueError) as info:
            manager.put("wc", "topology", b"x" * 2_000_000)
        assert info.value.kind == "too_large"
        manager.put("wc", "topology", b"x" * 900_000)
        assert len(manager.get("wc", "topology")) == 900_000


# bad URLs ------------------------------------------------------------------------------------
@pytest.mark.parametrize("url", [
    "s3://bucket/state",
    "zk://127.0.0.1:notaport/heron",
    "zk://127.0.0.1:70000/heron",
    "zk://127.0.0.1:2181",
    "zk://127.0.0.1:2181/",
    "zk://127.0.0.1:2181/a//b",
    "zk:///heron",
    "zk://heron@127.0.0.1:2181/heron",
    "zk://127.0.0.1:2181/heron?bogus=1",
    "zk://127.0.0.1:2181/heron?session_timeout_secs=-1",
    "zk://127.0.0.1:2181/heron?connect_timeout_secs=soon",
])
def test_bad_url_is_a_config_error(url):
    with pytest.raises(ConfigError) as info:
        open_state_manager(url)
    assert info.value.key == STATEMGR


def test_bad_url_error_hides_the_password():
    with pytest.raises(ConfigError) as info:
        open_state_manager("zk://heron:hunter2@127.0.0.1:notaport/heron")
    assert "hunter2" not in str(info.value)
    assert "hunter2" not in str(info.value.value)


def test_unreachable_zookeeper_fails_fast():
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        open_state_manager("zk://127.0.0.1:1/x")
    assert time.monotonic() - started < 15
    assert info.value.key == STATEMGR
    assert "127.0.0.1:1" in str(info.value.value)
