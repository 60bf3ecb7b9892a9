"""Give every heron_spark child process a parent-death tie, a name, a log file and a heartbeat.

Spark SIGKILLs a cancelled task's Python worker, so ``finally`` blocks never run there; a
child must notice on its own: ``PR_SET_PDEATHSIG`` (Linux) plus a parent-alive watchdog.

Stalls are found by heartbeats, not sockets: every child's watchdog thread touches its
heartbeat file (``HERON_SPARK_HEARTBEAT``) while the child is healthy. A stopped process
(SIGSTOP), or one whose health check fails (a routing thread wedged, user code stuck too long),
stops touching it, and its container kills and restarts it. The other way round, a child
whose parent's heartbeat (``HERON_SPARK_PARENT_HEARTBEAT``) is older than the stall limit
kills the parent, so Spark sees the barrier task die and the driver resubmits the stage.
"""

from __future__ import annotations

import ctypes
import gc
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from heron_spark.contract.exit_codes import ExitCode

PARENT_PID_ENV = "HERON_SPARK_PARENT_PID"
HEARTBEAT_ENV = "HERON_SPARK_HEARTBEAT"
PARENT_HEARTBEAT_ENV = "HERON_SPARK_PARENT_HEARTBEAT"
STALL_SECS_ENV = "HERON_SPARK_STALL_SECS"
HEARTBEAT_INTERVAL_SECS = 0.25
_PR_SET_NAME = 15
_PR_SET_PDEATHSIG = 1
GIL_SWITCH_INTERVAL_SECS = 0.0005
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"


def _libc():
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None  # not Linux: the watchdog below still applies


_LIBC = _libc()
# Resolved here, once: ``_die_with_parent`` runs in a forked child of a threaded process
# (the container's supervisor) before ``exec``, where a first ``_LIBC.prctl`` lookup would call
# dlsym, which takes the dynamic loader's lock that another thread may have held at the fork
# (a child deadlocked before exec blocks ``Popen`` in the supervisor for good).
_PRCTL = _LIBC.prctl if _LIBC is not None else None


def _prctl(option: int, value) -> None:
    if _PRCTL is not None:
        _PRCTL(option, value, 0, 0, 0)


def _die_with_parent() -> None:
    """Arm the parent-death signal and ignore SIGINT (``preexec_fn`` of every child).

    Armed before ``exec``, so a child stopped (SIGSTOP) before its own start-up code ran still
    dies with its parent. SIGINT is ignored because a terminal's Ctrl-C reaches the whole
    process group, but stopping a container's children is its supervisor's job, in order.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


_health: dict = {"check": None, "on_unhealthy": None}
log = logging.getLogger(__name__)


def set_health_check(check, on_unhealthy=None) -> None:
    """Have the watchdog call ``check()`` before each heartbeat.

    A non-empty string it returns (why this process is unhealthy) stops the heartbeat for good
    and, if given, calls ``on_unhealthy(reason)`` once on the watchdog thread.
    """
    _health["check"], _health["on_unhealthy"] = check, on_unhealthy


def touch(path: Path) -> None:
    """Mark ``path`` as fresh now (create it if needed)."""
    try:
        os.utime(path)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def heartbeat_age_secs(path: Path, since: float) -> float:
    """Return the seconds since ``path`` was last touched.

    Counted from ``since`` (wall clock) instead if the file was not touched after that.
    """
    try:
        last = max(path.stat().st_mtime, since)
    except OSError:
        last = since
    return time.time() - last


# A child that asked to hear of its parent's death (``become_child(on_parent_death=...)``) has
# this long to record its last word before the watchdog ends it.
PARENT_DEATH_GRACE_SECS = 10.0


def _watch(expected_parent: int, interval: float, on_parent_death=None) -> None:
    beat = os.environ.get(HEARTBEAT_ENV)
    parent_beat = os.environ.get(PARENT_HEARTBEAT_ENV)
    stall_secs = float(os.environ.get(STALL_SECS_ENV) or 0)
    started = time.time()
    healthy = True
    while True:
        time.sleep(interval)
        if os.getppid() != expected_parent:
            if on_parent_death is not None:
                on_parent_death()
                time.sleep(PARENT_DEATH_GRACE_SECS)
            os._exit(ExitCode.PARENT_DIED)
        if healthy and _health["check"] is not None:
            reason = _health["check"]()
            if reason:
                healthy = False
                log.error("unhealthy, heartbeat stopped: %s", reason)
                if _health["on_unhealthy"] is not None:
                    _health["on_unhealthy"](reason)
        if healthy and beat:
            touch(Path(beat))
        if parent_beat and stall_secs and \
                heartbeat_age_secs(Path(parent_beat), started) > stall_secs:
            log.error("parent process %d stalled (no heartbeat for %.1f s): killing it so Spark "
                      "restarts the container", expected_parent, stall_secs)
            try:
                os.kill(expected_parent, signal.SIGKILL)
            except ProcessLookupError:
                pass


def become_child(short_name: str, watchdog_interval_secs: float = HEARTBEAT_INTERVAL_SECS,
                 on_parent_death=None) -> None:
    """Tie this process's life to its parent's, name it and start its heartbeat.

    The name is ``short_name`` in ``ps -o comm``; see the module docstring for the heartbeat.
    With ``on_parent_death``, the parent's death sends SIGTERM instead of SIGKILL and the
    watchdog calls ``on_parent_death()`` once it sees the parent gone, then ends the process
    ``PARENT_DEATH_GRACE_SECS`` later if it is still there: time to record why it stops
    (container 0's TMaster does). That SIGTERM cannot be told from the parent's own by
    ``os.getppid()``: when the spawning thread dies first, the kernel sends it while handing
    the child to another thread of the same (dying) parent.
    """
    # The gateway threads must get the GIL soon after the task thread emits: the default 5 ms
    # switch interval would add up to 5 ms per hop to every tuple's latency.
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_SECS)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL if on_parent_death is None else signal.SIGTERM)
    _prctl(_PR_SET_NAME, ctypes.c_char_p(short_name.encode()[:15]))
    expected = int(os.environ.get(PARENT_PID_ENV, "0")) or os.getppid()
    if os.getppid() != expected:
        os._exit(ExitCode.PARENT_DIED)  # before the death signal was armed

    threading.Thread(target=_watch, args=(expected, watchdog_interval_secs, on_parent_death),
                     name="parent-watchdog", daemon=True).start()
    from heron_spark import _profiling

    _profiling.start_if_asked(short_name)  # only with HERON_SPARK_PROFILE_DIR set


def settle_gc(young_objects: int) -> None:
    """Freeze what is alive now out of the cyclic GC and tune how often it collects.

    Young objects are collected every ``young_objects`` net allocations (0: no cyclic
    collection); see ``heron.python.gc.young.objects``. Call once a process is warm, before
    its hot loop.
    """
    gc.collect()
    gc.freeze()
    if young_objects <= 0:
        gc.disable()
        return
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_objects, middle, old)


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


def child_env(heartbeat: Path | None = None, parent_heartbeat: Path | None = None,
              stall_secs: float = 0.0) -> dict[str, str]:
    """Return the environment for a child process.

    It holds our ``sys.path`` (so ``--py-files`` reach the child), our pid, and the child's
    heartbeat files.
    """
    env = dict(os.environ)
    # Spark puts --py-files on the worker's sys.path as relative paths ('./deps.zip', '' = cwd);
    # children start in another folder, so make every entry absolute.
    cwd = os.getcwd()
    absolute = [os.path.join(cwd, p) if p else cwd for p in sys.path]
    env["PYTHONPATH"] = os.pathsep.join(_without_redundant_spark_zips(absolute))
    env[PARENT_PID_ENV] = str(os.getpid())
    for key, value in ((HEARTBEAT_ENV, heartbeat), (PARENT_HEARTBEAT_ENV, parent_heartbeat)):
        if value is not None:
            env[key] = str(value)
        else:
            env.pop(key, None)
    env[STALL_SECS_ENV] = str(stall_secs)
    return env


def _without_redundant_spark_zips(path: list[str]) -> list[str]:
    """Return ``path`` without Spark's package zips that a plain folder on it also provides.

    The zips are ``pyspark.zip`` and ``py4j-*-src.zip``; they are dropped only when a plain
    folder later on ``path`` holds the same package, from the same Spark installation.

    Spark puts those zips first on its Python workers' path; Python cannot cache bytecode
    for modules imported from a zip, so every child would compile pyspark and py4j from
    source at start-up. When pyspark is pip-installed, the
    zips sit inside the installed package, and the installed package is the same code.
    """
    folders = [p for p in path if os.path.isdir(p)]
    installed = next((os.path.realpath(os.path.join(folder, "pyspark")) for folder in folders
                      if os.path.isfile(os.path.join(folder, "pyspark", "__init__.py"))), None)
    kept = []
    for entry in path:
        name = os.path.basename(entry)
        package = "pyspark" if name == "pyspark.zip" else \
            "py4j" if name.startswith("py4j-") and name.endswith(".zip") else None
        if package is not None and installed is not None \
                and os.path.realpath(entry).startswith(installed + os.sep) \
                and any(os.path.isfile(os.path.join(folder, package, "__init__.py"))
                        for folder in folders):
            continue
        kept.append(entry)
    return kept


def spawn(module: str, args: list[str], log_path: Path, cwd: Path, *,
          heartbeat: Path | None = None, parent_heartbeat: Path | None = None,
          stall_secs: float = 0.0) -> subprocess.Popen:
    """Start ``python -m module args`` as a child that dies with us; stdout/stderr to a file."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = child_env(heartbeat, parent_heartbeat, stall_secs)
    with open(log_path.with_suffix(".out"), "ab") as out:
        return subprocess.Popen([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=False, preexec_fn=_die_with_parent)


def wait_json(path: Path, proc: subprocess.Popen, timeout_secs: float, what: str) -> dict:
    """Wait for a child's ready file; raise RuntimeError if it exits or times out first."""
    deadline = time.monotonic() + timeout_secs
    delay = 0.005
    while True:
        if path.exists():
            return json.loads(path.read_text())
        code = proc.poll()
        if code is not None:
            msg = f"{what} exited with code {code} before it was ready (see {path.parent})"
            raise RuntimeError(msg)
        if time.monotonic() > deadline:
            msg = f"{what} not ready after {timeout_secs} s"
            raise TimeoutError(msg)
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
    """SIGTERM every live process, then SIGKILL whatever is left after ``grace_secs``.

    A stopped process (SIGSTOP) is continued after the SIGTERM so that it can act on it.
    """
    for proc in procs:
        if proc.poll() is None:
            try:
                proc.terminate()
                proc.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace_secs
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
