"""A real Spark Connect server for the ``connect`` tier, started from pyspark's own scripts.

``ConnectServer`` runs ``$SPARK_HOME/sbin/start-connect-server.sh --master 'local[4]'`` bound to
127.0.0.1 on a free port, with this venv's Python for its workers and the repository and the
tests folder on their ``PYTHONPATH`` (executor Pythons import the test topologies' modules),
its pid and log files in its own folder; ``stop()`` runs ``stop-connect-server.sh`` and kills
whatever is left. ``run_client`` runs ``tests/connect_client.py`` (a Spark Connect client with
no SparkContext, unlike this test process) and returns the JSON it prints; ``start_client``
starts one the test ends itself. ``conf`` adds server confs (static ones too: say a short
``spark.connect.execute.manager.detachedTimeout``). ``wait_nothing_left`` waits for a
client's topology to leave no process and no running Spark job.

One test body, both session kinds (as PySpark's Connect parity tests reuse the classic tests'
bodies): ``@session_kinds("fault")`` runs a test once on the tests' classic session (in that
tier) and once under Spark Connect (``connect`` tier); its ``session_client`` fixture
(``tests/conftest.py``) is a ``ClassicSessionClient`` or a ``ConnectSessionClient``, whose
``run(mode, folder, **options)`` runs the same ``connect_client.SCENARIOS[mode]`` and returns
the same JSON.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
START_SECS = 120


def free_port() -> int:
    """Return a TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


class ConnectServer:
    """One Spark Connect server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, folder: Path, master: str = "local[4]", python: str = sys.executable,
                 pythonpath: tuple[Path, ...] = (REPO_ROOT, TESTS_DIR),
                 address: str = "127.0.0.1", conf: dict[str, str] | None = None) -> None:
        import pyspark

        self.folder = folder
        self.master = master
        self.python = python
        self.spark_home = Path(pyspark.__file__).resolve().parent
        self.address = address  # the Connect endpoint's; executors stay on 127.0.0.1
        self.conf = dict(conf or {})  # more --conf for the server (its static confs too)
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"sc://{address}:{self.port}"
        self.env = {
            **os.environ,
            "SPARK_HOME": str(self.spark_home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": python,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_PID_DIR": str(folder / "pid"),
            "SPARK_LOG_DIR": str(folder / "log"),
            "SPARK_IDENT_STRING": f"heron-spark-tests-{self.port}",
            "PYTHONPATH": os.pathsep.join(str(path) for path in pythonpath),
        }
        self.env.pop("PYSPARK_GATEWAY_PORT", None)
        self.env.pop("PYSPARK_GATEWAY_SECRET", None)

    def start(self) -> "ConnectServer":
        """Start the server and wait until its port answers; raise with its log if it does not."""
        (self.folder / "pid").mkdir(parents=True, exist_ok=True)
        (self.folder / "log").mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [str(self.spark_home / "sbin" / "start-connect-server.sh"),
             "--master", self.master,
             "--conf", f"spark.connect.grpc.binding.port={self.port}",
             "--conf", f"spark.connect.grpc.binding.address={self.address}",
             "--conf", "spark.driver.host=127.0.0.1",
             "--conf", f"spark.ui.port={self.ui_port}",
             "--conf", f"spark.pyspark.python={self.python}",
             "--conf", "spark.ui.showConsoleProgress=false",
             *(arg for key, value in self.conf.items() for arg in ("--conf", f"{key}={value}"))],
            env=self.env, check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + START_SECS
        while not _answers(self.port, self.address):
            if time.monotonic() > deadline or not self.pids():
                self.stop()
                raise RuntimeError(f"the Spark Connect server did not answer on {self.port}:\n"
                                   + self.log_tail())
            time.sleep(0.5)
        return self

    def pids(self) -> list[int]:
        """Return the live pids recorded in the server's pid folder."""
        found = []
        for path in (self.folder / "pid").glob("*.pid"):
            try:
                pid = int(path.read_text().strip())
                os.kill(pid, 0)
            except (ValueError, OSError):
                continue
            found.append(pid)
        return found

    def log_tail(self, lines: int = 60) -> str:
        """Return the end of the server's log files."""
        text = []
        for path in sorted((self.folder / "log").glob("*")):
            text.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(text)

    def running_jobs(self) -> list[dict]:
        """Return the server's Spark jobs still RUNNING, from its UI's REST API."""
        base = f"http://127.0.0.1:{self.ui_port}/api/v1/applications"
        with urllib.request.urlopen(base, timeout=10) as response:
            [app] = json.load(response)
        with urllib.request.urlopen(f"{base}/{app['id']}/jobs?status=running",
                                    timeout=10) as response:
            return json.load(response)

    def stop(self) -> None:
        """Stop the server with pyspark's script, then kill whatever is left of it."""
        pids = self.pids()
        subprocess.run([str(self.spark_home / "sbin" / "stop-connect-server.sh")], env=self.env,
                       check=False, capture_output=True, timeout=60)
        deadline = time.monotonic() + 20
        for pid in pids:
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                time.sleep(0.2)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def start_client(server: ConnectServer, mode: str, folder: Path,
                 **options) -> tuple[subprocess.Popen, Path]:
    """Start ``connect_client.py MODE`` against ``server`` and return it with its stdout file.

    For a client the test ends itself (``abandon``: ``kill -9``); the caller reaps it.
    """
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PYSPARK_GATEWAY")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(TESTS_DIR)])
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"client-{mode}.out"
    with open(out, "wb") as stdout, open(folder / f"client-{mode}.err", "wb") as stderr:
        proc = subprocess.Popen([sys.executable, str(TESTS_DIR / "connect_client.py"), mode,
                                 server.url, str(folder), json.dumps(options)],
                                env=env, stdout=stdout, stderr=stderr)
    return proc, out


def printed_json(out: Path) -> dict | None:
    """Return the last JSON object a client printed to ``out`` so far (None: none yet)."""
    try:
        lines = [line for line in out.read_text().splitlines() if line.startswith("{")]
    except OSError:
        return None
    return json.loads(lines[-1]) if lines else None


def run_client(server: ConnectServer, mode: str, folder: Path, timeout: float = 300,
               prefix: tuple[str, ...] = (), **options) -> dict:
    """Run ``connect_client.py MODE`` against ``server``; return the JSON it prints last.

    ``prefix`` goes before the command (``ip netns exec NAME``: a client in its own network).
    """
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PYSPARK_GATEWAY")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(TESTS_DIR)])
    args = [*prefix, sys.executable, str(TESTS_DIR / "connect_client.py"), mode, server.url, str(folder),
            json.dumps(options)]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(f"connect client {mode} exited {proc.returncode}:\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return json.loads(lines[-1])


def wait_nothing_left(server, work: Path, timeout: float = 30) -> None:
    """Wait until no heron_spark process runs under ``work`` and ``server`` runs no job.

    ``server``: a ``ConnectServer``, or a session client of either kind.
    """
    import fault_support as faults
    from heron_spark.testing import wait_until

    wait_until(lambda: not faults.processes_under(work), timeout,
               message="every heron_spark process of the topology to exit")
    wait_until(lambda: not server.running_jobs(), timeout,
               message="the Spark job of the barrier stage to end")


def session_kinds(classic_tier: str):
    """Run the decorated test on a classic session (tier ``classic_tier``) and under Connect.

    The test takes the ``session_client`` fixture; each kind keeps its own tier mark, so the
    classic run stays in ``classic_tier`` and the Connect run in ``connect``.
    """
    return pytest.mark.parametrize("session_kind", [
        pytest.param("classic", marks=getattr(pytest.mark, classic_tier)),
        pytest.param("connect", marks=pytest.mark.connect)])


class ConnectSessionClient:
    """Run a scenario in a Spark Connect client process against ``server`` (``run_client``)."""

    kind = "connect"

    def __init__(self, server: ConnectServer) -> None:
        self.server = server

    def run(self, mode: str, folder: Path, **options) -> dict:
        """Run ``connect_client.SCENARIOS[mode]`` in a client process; return its JSON."""
        return run_client(self.server, mode, folder, **options)

    def running_jobs(self) -> list:
        """Return the server's running Spark jobs."""
        return self.server.running_jobs()


class ClassicSessionClient:
    """Run a scenario in this process, on the tests' classic session (the ``spark`` fixture)."""

    kind = "classic"

    def __init__(self, spark) -> None:
        self.spark = spark

    def run(self, mode: str, folder: Path, **options) -> dict:
        """Run ``connect_client.SCENARIOS[mode]`` here; return its result as the JSON it prints.

        If the scenario fails, every Spark job of the session is cancelled (a topology it
        left running is killed with its stage).
        """
        import connect_client

        try:
            result = connect_client.SCENARIOS[mode](self.spark.session, folder,
                                                    json.loads(json.dumps(options)))
        except BaseException:
            self.spark.sparkContext.cancelAllJobs()
            raise
        return json.loads(json.dumps(result))

    def running_jobs(self) -> list:
        """Return the ids of the session's running Spark jobs."""
        return list(self.spark.sparkContext.statusTracker().getActiveJobsIds())
