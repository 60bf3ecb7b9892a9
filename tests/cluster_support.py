"""Start and stop a real Spark standalone cluster on 127.0.0.1, from pyspark's own scripts.

No pytest here: tests and scripts both use ``StandaloneCluster`` as a context manager.
Why a real cluster: ``local[N]`` runs every barrier task in one executor, so only a standalone
cluster shows that containers on different executors (and worker JVMs) find each other.

Every daemon starts in its own session; ``stop`` kills each session and every descendant
(executors, pyspark daemons, heron_spark children), so nothing outlives the test, even when
startup fails half-way. Readiness is polled from the master's JSON page, with a deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.request
from pathlib import Path

import pyspark

from heron_spark.testing import wait_until

HOST = "127.0.0.1"
PYSPARK_BIN = Path(pyspark.__file__).parent / "bin"


def free_port() -> int:
    """A port nobody listens on right now (on 127.0.0.1)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _stat(pid: int | str) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, ..."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _processes() -> dict[int, list[str]]:
    """Every process now: pid -> its stat fields."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(entry)) is not None:
            out[int(entry)] = fields
    return out


def tree_of(pid: int) -> set[int]:
    """``pid``, its descendants, and every process of its session (pyspark's daemon makes its
    own process group, so a group kill would miss it; it stays in the session)."""
    procs = _processes()
    found = {p for p, fields in procs.items() if int(fields[3]) == pid} | {pid}
    todo = list(found)
    while todo:
        parent = todo.pop()
        for child, fields in procs.items():
            if int(fields[1]) == parent and child not in found:
                found.add(child)
                todo.append(child)
    return found


def cmdline(pid: int) -> str:
    """The command line of ``pid`` ('' once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def ancestors(pid: int) -> list[int]:
    """``pid``'s parent, grandparent, ... up to (excluding) init."""
    out = []
    while (fields := _stat(pid)) is not None and (pid := int(fields[1])) > 1:
        out.append(pid)
    return out


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def kill_tree(proc: subprocess.Popen, grace_secs: float = 10.0) -> None:
    """SIGTERM ``proc``'s session and descendants, SIGKILL what is left after ``grace_secs``;
    return once none is alive. ``proc`` must have been started with start_new_session=True."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        victims = tree_of(proc.pid)
        for pid in victims:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            wait_until(lambda v=victims: not any(_alive(p) for p in tree_of(proc.pid) | v),
                       grace_secs)
        except AssertionError:
            continue  # SIGKILL what is left
        proc.wait(5)
        return
    raise RuntimeError(f"processes of {proc.args!r} survived SIGKILL")


class StandaloneCluster:
    """A master on 127.0.0.1 and ``workers`` workers, each with ``cores`` cores.

    ``worker_hosts`` gives each worker its own address (other loopback addresses, say
    127.0.0.2): its executors then advertise that address, as on a real multi-host cluster.
    ``master_host`` is the master's address; ``master_prefix`` and ``worker_prefixes`` go in
    front of a daemon's command line (``ip netns exec NS``: each daemon on a host of its own,
    see ``hosts_support``).
    """

    def __init__(self, workers: int = 2, cores: int = 2, memory: str = "2g",
                 ready_timeout_secs: float = 90.0, worker_hosts: list[str] | None = None,
                 master_host: str = HOST, master_prefix: list[str] | None = None,
                 worker_prefixes: list[list[str]] | None = None) -> None:
        self.workers, self.cores, self.memory = workers, cores, memory
        self.worker_hosts = list(worker_hosts or [HOST] * workers)
        self.master_host = master_host
        self.master_prefix = list(master_prefix or [])
        self.worker_prefixes = list(worker_prefixes or [[]] * workers)
        self.ready_timeout = ready_timeout_secs
        self.root = Path(tempfile.mkdtemp(prefix="heron_spark_cluster_"))
        self.port, self.webui_port = free_port(), free_port()
        self.worker_webui_ports: list[int] = []
        self.procs: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return f"spark://{self.master_host}:{self.port}"

    @property
    def worker_pids(self) -> list[int]:
        """Pids of the worker JVMs (spark-class execs java, so the pid is the JVM's)."""
        return [proc.pid for proc in self.procs[1:]]

    def _env(self, host: str = HOST) -> dict[str, str]:
        env = dict(os.environ)
        # Like a separate machine: nothing of the test process's import path leaks into the
        # executors; user code reaches them only as shipped (addPyFile / --py-files).
        env.pop("PYTHONPATH", None)
        conf_dir = self.root / "conf"  # empty: no user spark-defaults / spark-env leak in
        conf_dir.mkdir(exist_ok=True)
        env.update(SPARK_LOCAL_IP=host, SPARK_LOCAL_HOSTNAME=host, SPARK_CONF_DIR=str(conf_dir),
                   SPARK_LOG_DIR=str(self.root / "logs"),
                   SPARK_WORKER_DIR=str(self.root / "work"))
        return env

    def _spawn(self, name: str, args: list[str], host: str = HOST,
               prefix: list[str] | None = None) -> subprocess.Popen:
        with open(self.root / f"{name}.out", "wb") as log:
            proc = subprocess.Popen([*(prefix or []), str(PYSPARK_BIN / "spark-class"), *args],
                                    env=self._env(host),
                                    stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self) -> "StandaloneCluster":
        """Start the master and the workers; return once all workers are ALIVE."""
        try:
            self._spawn("master", ["org.apache.spark.deploy.master.Master",
                                   "--host", self.master_host, "--port", str(self.port),
                                   "--webui-port", str(self.webui_port)],
                        self.master_host, self.master_prefix)
            for i in range(self.workers):
                webui = free_port()
                self.worker_webui_ports.append(webui)
                work = self.root / f"worker-{i}"
                work.mkdir()
                host = self.worker_hosts[i]
                self._spawn(f"worker-{i}", [
                    "org.apache.spark.deploy.worker.Worker", "--host", host,
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--webui-port", str(webui), "--work-dir", str(work), self.url], host,
                    self.worker_prefixes[i])
            self._wait_ready()
        except BaseException:
            self.stop(keep_logs=True)
            raise
        return self

    def master_state(self) -> dict:
        """The master's JSON status page."""
        return http_json(f"http://{self.master_host}:{self.webui_port}/json/")

    def worker_state(self, index: int) -> dict:
        """Worker ``index``'s JSON status page (lists its running ``executors``)."""
        return http_json(f"http://{self.worker_hosts[index]}:{self.worker_webui_ports[index]}/json/")

    def _wait_ready(self) -> None:
        last: object = None

        def ready() -> bool:
            nonlocal last
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with {proc.returncode}; "
                                       f"see {self.root}/*.out and {self.root}/logs")
            try:
                last = state = self.master_state()
            except (OSError, ValueError) as exc:  # master UI not up (or not JSON) yet
                last = exc
                return False
            alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
            return state.get("aliveworkers") == self.workers and len(alive) == self.workers

        wait_until(ready, self.ready_timeout, interval=0.2,
                   message=lambda: f"the cluster to be ready: {last!r} (logs in {self.root})")

    def stop(self, keep_logs: bool = False) -> None:
        """Kill every daemon's process tree (workers first), then remove the temp folder."""
        errors = []
        for proc in reversed(self.procs):
            try:
                kill_tree(proc)
            except RuntimeError as exc:  # still try the others
                errors.append(exc)
        self.procs.clear()
        if not keep_logs:
            shutil.rmtree(self.root, ignore_errors=True)
        if errors:
            raise errors[0]

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def http_json(url: str, timeout: float = 5.0):
    """GET ``url`` and parse it as JSON (proxies bypassed: everything is on 127.0.0.1)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as response:
        return json.loads(response.read())


def cluster_driver_session(master: str, app_name: str, host: str, cores_max: int):
    """Start a driver's SparkSession on a standalone cluster, with the JVM bridge loaded.

    One core and 512 MB per executor, at most ``cores_max`` cores; the driver binds and
    advertises ``host``; no UI; the barrier stage looks for a replacement executor's slot
    every second, not every 15 s. For driver subprocesses (the executor-loss and hosts tests).
    """
    from pyspark.sql import SparkSession

    from heron_spark.scheduler import jvm_bridge

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.executor.cores", "1").config("spark.cores.max", str(cores_max))
               .config("spark.executor.memory", "512m")
               .config("spark.driver.host", host).config("spark.driver.bindAddress", host)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s"))
    for key, value in jvm_bridge.spark_conf(jvm_bridge.build_jar()).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
