"""Finding and killing a topology's real processes (for the fault tests).

Processes are found through ``/proc/<pid>/cmdline``: every heron_spark child runs
``python -m heron_spark.entry.<role> --workdir <work dir>/<topology>/gen-<g>/container-<i> ...``
(``contract.child_args``: each kind's ``MODULE``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

from heron_spark.contract.child_args import (InstanceArgs, MetricsManagerArgs, StmgrArgs,
                                             TMasterArgs)
from heron_spark.testing import wait_until

# role -> the module its process runs
MODULES = {"instance": InstanceArgs.MODULE, "stmgr": StmgrArgs.MODULE,
           "metrics": MetricsManagerArgs.MODULE, "tmaster": TMasterArgs.MODULE}


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def find(work_dir: Path, role: str, *, component: str | None = None,
         container: int | None = None) -> list[int]:
    """Return the pids of live ``role`` processes (a key of ``MODULES``) under ``work_dir``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        args = _cmdline(int(entry.name))
        if MODULES[role] not in args or "--workdir" not in args:
            continue
        folder = args[args.index("--workdir") + 1]
        if not folder.startswith(str(work_dir)):
            continue
        if component is not None and _option(args, "--component") != component:
            continue
        if container is not None and not folder.endswith(f"container-{container}"):
            continue
        if _state(int(entry.name)) not in ("Z", "X", ""):
            found.append(int(entry.name))
    return sorted(found)


def _option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def _state(pid: int) -> str:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.split()[1]
    except OSError:
        pass
    return ""


def task_of(pid: int) -> int | None:
    """Return the ``--task-id`` of an instance process."""
    value = _option(_cmdline(pid), "--task-id")
    return None if value is None else int(value)


def parent_of(pid: int) -> int:
    """Return the parent pid of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1])


def kill9(pid: int) -> None:
    """``kill -9 pid``."""
    os.kill(pid, signal.SIGKILL)


def peak_rss_bytes(pid: int) -> int:
    """Return the peak resident set size (VmHWM) of a live process, or 0."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def import_baseline_rss() -> int:
    """Return the peak RSS of a fresh Python that imported what stmgrs and instances import."""
    import subprocess
    import sys

    code = ("import heron_spark.stmgr.server, heron_spark.instance.runtime\n"
            "from heron_spark.wire import tuple_batch\n"
            "tuple_batch.decode(tuple_batch.encode(['a'], [(1,)]))\n"
            "import os\n"
            "print(open(f'/proc/{os.getpid()}/status').read())")
    status = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout
    return next(int(line.split()[1]) * 1024 for line in status.splitlines()
                if line.startswith("VmHWM:"))


def cmdline(pid: int) -> list[str]:
    """Return the command line of ``pid`` as a list ([] if it is gone or a zombie)."""
    return _cmdline(pid)


def state_of(pid: int) -> str:
    """Return the one-letter state of ``pid`` (``R``, ``S``, ``T`` stopped, ``Z``...), or ""."""
    return _state(pid)


def start_ticks(pid: int) -> int | None:
    """Return the start time of ``pid`` in clock ticks since boot: with the pid, it names one
    process even after the pid is reused. None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[19])


def is_under(folder: str, work_dir: Path) -> bool:
    """True when the path ``folder`` is ``work_dir`` or inside it (not a sibling sharing its
    prefix, like ``wc-1`` and ``wc-10``)."""
    root = str(work_dir).rstrip("/")
    return folder == root or folder.startswith(root + "/")


def processes_under(work_dir: Path) -> list[tuple[int, str, list[str]]]:
    """Return ``(pid, state, args)`` of every process whose command line names ``heron_spark``
    and a path under ``work_dir``, stopped ones included (zombies have no command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        args = _cmdline(int(entry.name))
        if not any("heron_spark" in arg for arg in args):
            continue
        if any(is_under(arg, work_dir) for arg in args):
            found.append((int(entry.name), _state(int(entry.name)), args))
    return sorted(found)


def kill9_all(work_dir: Path) -> list[int]:
    """SIGKILL every process ``processes_under(work_dir)`` finds (stopped ones die too);
    return their pids. For tear-down after a test that may have left some behind."""
    killed = []
    for pid, _, _ in processes_under(work_dir):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except ProcessLookupError:
            pass
    return killed


def start_driver(kind: str, args: list[str], log: Path) -> subprocess.Popen:
    """Start ``resumable_driver.py KIND ARGS`` (a Spark driver submitting the ``kind`` word
    count), its output appended to ``log``."""
    tests = Path(__file__).resolve().parent
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, str(tests / "resumable_driver.py"), kind, *args],
                                stdout=out, stderr=subprocess.STDOUT, cwd=tests.parent)


def kill_driver(driver: subprocess.Popen, work: Path) -> None:
    """``kill -9`` a driver started by ``start_driver`` and wait until its containers (every
    stmgr and instance under ``work``) have exited; its JVM exits when its stdin closes."""
    driver.kill()
    driver.wait()
    wait_until(lambda: not find(work, "instance") and not find(work, "stmgr"), 60,
               message="the killed driver's containers to exit")


def resume_after_driver_kill(kind: str, args: list[str], tmp: Path, work: Path,
                             ready: Callable[[], object], timeout: float = 300) -> tuple[object, str]:
    """Start a ``kind`` driver (``start_driver``), wait for ``ready()`` (its value is returned),
    ``kill -9`` the driver, start a second one on the same ``args`` and wait until it exits 0.

    Return ``ready()``'s value and the second driver's log; no driver outlives the call.
    """
    first = start_driver(kind, args, tmp / "driver-1.log")
    second = None
    try:
        value = ready()
        kill_driver(first, work)
        second = start_driver(kind, args, tmp / "driver-2.log")
        assert second.wait(timeout=timeout) == 0, (tmp / "driver-2.log").read_text()[-3000:]
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
    return value, (tmp / "driver-2.log").read_text()
