"""Start and stop a real ZooKeeper server on 127.0.0.1, from the jars pyspark ships.

``ZooKeeperServer`` is a context manager; the ``zookeeper`` pytest fixture wraps it for one
test module. Import it into a test module with::

    from zk_support import zookeeper  # noqa: F401

and take ``zookeeper`` as an argument: ``zookeeper.url()`` is a fresh ``zk://`` URL (its own
root node) on the server, ``zookeeper.hosts`` the ``host:port`` string for kazoo.

The server runs standalone (``ZooKeeperServerMain``) with ``tickTime=200`` ms, so sessions may
be as short as 0.4 s (ZooKeeper bounds a session timeout to 2..20 ticks): tests that wait for
an ephemeral node to vanish after its owner dies stay quick. It starts in its own session;
``stop`` kills the whole process group and removes the data folder, even when startup failed
half-way. Readiness is a kazoo connect, retried until a deadline.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pyspark
import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from heron_spark.testing import wait_until

HOST = "127.0.0.1"
JARS = Path(os.path.dirname(pyspark.__file__)) / "jars"
TICK_TIME_MS = 200
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


class ZooKeeperServer:
    """One standalone ZooKeeper on ``127.0.0.1:<free port>`` with a temporary data folder."""

    def __init__(self, ready_timeout_secs: float = 60.0, tick_time_ms: int = TICK_TIME_MS,
                 host: str = HOST, prefix: list[str] | None = None) -> None:
        self.host = host                  # the address it listens on
        self.prefix = list(prefix or [])  # in front of its command line (ip netns exec NS)
        self.ready_timeout_secs = ready_timeout_secs
        self.tick_time_ms = tick_time_ms
        self.port = _free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="heron_spark_zk_"))
        self.proc: subprocess.Popen | None = None

    @property
    def hosts(self) -> str:
        """The ``host:port`` connect string (kazoo's ``hosts``)."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's stdout and stderr."""
        return self.folder / "zookeeper.out"

    def url(self, root: str | None = None, user: str | None = None, password: str | None = None,
            **options: float) -> str:
        """Return ``zk://[user:password@]127.0.0.1:PORT/<root>[?options]``.

        ``root`` defaults to a fresh ``heron-test-<uuid>``, so tests sharing the server never
        see each other's topologies. ``options`` become query parameters
        (``session_timeout_secs=1`` ...).
        """
        root = root or f"heron-test-{uuid.uuid4().hex[:12]}"
        auth = f"{user}:{password}@" if user is not None else ""
        query = "&".join(f"{key}={value}" for key, value in options.items())
        return f"zk://{auth}{self.hosts}/{root.lstrip('/')}" + (f"?{query}" if query else "")

    def start(self) -> "ZooKeeperServer":
        """Start the server; return once a kazoo client connects."""
        data = self.folder / "data"
        data.mkdir()
        config = self.folder / "zoo.cfg"
        config.write_text(f"tickTime={self.tick_time_ms}\n"
                          f"dataDir={data}\n"
                          f"clientPort={self.port}\n"
                          f"clientPortAddress={self.host}\n"
                          "admin.enableServer=false\n"
                          "4lw.commands.whitelist=ruok,srvr\n")
        try:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [*self.prefix, _java(), "-Xmx256m", "-cp", f"{JARS}/*",
                     "-Dzookeeper.admin.enableServer=false", MAIN_CLASS, str(config)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
            self._wait_ready()
        except BaseException:
            self.stop(keep_folder=True)
            raise
        return self

    def _wait_ready(self) -> None:
        last: BaseException | None = None

        def ready() -> bool:
            nonlocal last
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc and self.proc.returncode}; "
                                   f"see {self.log_path}:\n{self._log_tail()}")
            client = KazooClient(hosts=self.hosts, timeout=5.0)
            try:
                client.start(timeout=2.0)  # the wait between attempts
                client.get_children("/")
                return True
            except KazooTimeoutError as exc:  # not listening yet; start() already stopped it
                last = exc
                return False
            finally:
                client.stop()
                client.close()

        wait_until(ready, self.ready_timeout_secs, interval=0,
                   message=lambda: f"ZooKeeper on {self.hosts} ({last!r}); see "
                   f"{self.log_path}:\n{self._log_tail()}")

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, keep_folder: bool = False) -> None:
        """Kill the server's process group (SIGTERM, then SIGKILL); remove the data folder."""
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, sig)
                    try:
                        proc.wait(10.0)
                        break
                    except subprocess.TimeoutExpired:
                        continue
                else:
                    raise RuntimeError(f"ZooKeeper (pid {proc.pid}) survived SIGKILL")
            finally:
                with contextlib.suppress(ProcessLookupError):  # the JVM forks none; be sure
                    os.killpg(proc.pid, signal.SIGKILL)
        if not keep_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@pytest.fixture(scope="module")
def zookeeper():
    """A real ZooKeeper server for one test module (see ``ZooKeeperServer``); killed after."""
    with ZooKeeperServer() as server:
        yield server
