"""Helpers every heron_spark child process uses: die with the parent, a clear name, a log file.

Spark SIGKILLs a cancelled task's Python worker, so ``finally`` blocks never run there; a
child must notice on its own: ``PR_SET_PDEATHSIG`` (Linux) plus a parent-alive watchdog.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PARENT_PID_ENV = "HERON_SPARK_PARENT_PID"
_PR_SET_NAME = 15
_PR_SET_PDEATHSIG = 1
GIL_SWITCH_INTERVAL_SECS = 0.0005
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"


def _prctl(option: int, value) -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(option, value, 0, 0, 0)
    except OSError:
        pass  # not Linux: the watchdog below still applies


def become_child(short_name: str, watchdog_interval_secs: float = 0.5) -> None:
    """Tie this process's life to its parent's, and name it ``short_name`` in ``ps -o comm``."""
    # The gateway threads must get the GIL soon after the task thread emits: the default 5 ms
    # switch interval would add up to 5 ms per hop to every tuple's latency.
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_SECS)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(_PR_SET_NAME, ctypes.c_char_p(short_name.encode()[:15]))
    expected = int(os.environ.get(PARENT_PID_ENV, "0")) or os.getppid()
    if os.getppid() != expected:
        os._exit(3)  # the parent died before the death signal was armed

    def watch() -> None:
        while True:
            time.sleep(watchdog_interval_secs)
            if os.getppid() != expected:
                os._exit(3)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def setup_logging(path: Path, level: int = logging.INFO) -> None:
    """Send this process's logging to ``path`` (its own file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def write_json_atomic(path: Path, data: dict) -> None:
    """Write ``data`` as JSON to ``path`` so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def child_env() -> dict[str, str]:
    """Environment for a child: our ``sys.path`` (so ``--py-files`` reach it) and our pid."""
    env = dict(os.environ)
    # Spark puts --py-files on the worker's sys.path as relative paths ('./deps.zip', '' = cwd);
    # children start in another folder, so make every entry absolute.
    cwd = os.getcwd()
    env["PYTHONPATH"] = os.pathsep.join(os.path.join(cwd, p) if p else cwd for p in sys.path)
    env[PARENT_PID_ENV] = str(os.getpid())
    return env


def spawn(module: str, args: list[str], log_path: Path, cwd: Path) -> subprocess.Popen:
    """Start ``python -m module args`` as a child that dies with us; stdout/stderr to a file."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path.with_suffix(".out"), "ab") as out:
        return subprocess.Popen([sys.executable, "-m", module, *args], cwd=cwd, env=child_env(),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=False)


def wait_json(path: Path, proc: subprocess.Popen, timeout_secs: float, what: str) -> dict:
    """Wait for a child's ready file; raise RuntimeError if it exits or times out first."""
    deadline = time.monotonic() + timeout_secs
    delay = 0.005
    while True:
        if path.exists():
            return json.loads(path.read_text())
        code = proc.poll()
        if code is not None:
            raise RuntimeError(f"{what} exited with code {code} before it was ready "
                               f"(see {path.parent})")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout_secs} s")
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def wait_all(procs: list[subprocess.Popen], timeout_secs: float) -> None:
    """Give processes up to ``timeout_secs`` in all to exit on their own."""
    deadline = time.monotonic() + timeout_secs
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return


def terminate(procs: list[subprocess.Popen], grace_secs: float) -> None:
    """SIGTERM every live process, then SIGKILL whatever is left after ``grace_secs``."""
    for proc in procs:
        if proc.poll() is None:
            try:
                proc.terminate()
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace_secs
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
