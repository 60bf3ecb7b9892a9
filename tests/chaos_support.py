"""Chaos for the chaos test and the soak script: random SIGKILL / SIGSTOP, progress, audit.

- ``Chaos``: a thread that, every 1-3 s (a seeded ``random.Random``), picks a random kind of
  process among instances, stmgrs, metrics managers and containers (the Spark Python workers
  running the barrier tasks: parents of the stmgrs), then a random live process of that kind
  under one work folder, and sends it SIGKILL or SIGSTOP. It records every action, ends by
  itself after ``duration_secs`` and never sends SIGCONT: a stopped process must be found and
  handled by the runtime (stall detection), not by the test.
- ``ProgressMonitor``: a thread sampling a progress number (bytes the count bolts wrote) every
  0.2 s and keeping the longest time it did not grow while the topology ran.
- ``audit``: what an at-least-once word count lost, replayed and acked, as numbers (the test
  asserts on them, the soak script prints them).

Only processes whose ``/proc/<pid>/cmdline`` shows their role's module with a ``--workdir``
inside the given folder are signalled, and a container only while a stmgr under that folder is
its child; never this process, its ancestors, or a JVM. Used from the driver (test) process.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Callable

import fault_support as faults
import reliable_word_count as rwc
from heron_spark.testing import wait_until

INSTANCE, STMGR, METRICS, CONTAINER = "instance", "stmgr", "metrics", "container"
ROLES = (INSTANCE, STMGR, METRICS, CONTAINER)
_MODULE = {role: faults.MODULES[role] for role in (INSTANCE, STMGR, METRICS)}
_SIGNALS = {signal.SIGKILL: "SIGKILL", signal.SIGSTOP: "SIGSTOP"}
_NOT_RUNNING = ("T", "t", "Z", "X", "")  # stopped, traced, zombie, dead, gone

# Topology config for a run under chaos: budgets high enough that only a runtime that cannot
# recover fails, stalls found within seconds, lost tuples replayed soon.
CHAOS_CONF = {"heron.instance.restart.max": 1000, "heron.stmgr.restart.max": 1000,
              "heron.stage.resubmit.max": 100, "heron.stage.resubmit.backoff.secs": 0.5,
              "heron.stall.timeout.secs": 3, "topology.message.timeout.secs": 5,
              "topology.max.spout.pending": 300}


@dataclasses.dataclass(frozen=True)
class Action:
    """One signal sent: when (seconds after the chaos started, and wall clock), what, to whom."""

    offset_secs: float
    wall_time: float
    signal: str
    role: str
    pid: int
    started: int | None        # the process' start time in clock ticks (pid-reuse guard)
    folder: str                # its container's work folder (the stmgr's, for a container)
    task: int | None = None    # instances only
    component: str | None = None

    def __str__(self) -> str:
        where = "/".join(Path(self.folder).parts[-2:])
        who = f" task {self.task} ({self.component})" if self.task is not None else ""
        return f"{self.offset_secs:6.1f}s {self.signal} {self.role} pid {self.pid}{who} [{where}]"


@dataclasses.dataclass(frozen=True)
class _Target:
    role: str
    pid: int
    started: int | None
    folder: str
    task: int | None = None
    component: str | None = None
    via: int | None = None     # containers: the stmgr whose parent this is


def _option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else None


def _ancestors() -> set[int]:
    """This process and every ancestor up to init: never to be signalled."""
    pids, pid = {os.getpid()}, os.getpid()
    while pid > 1:
        try:
            pid = faults.parent_of(pid)
        except (OSError, IndexError, ValueError):
            break
        pids.add(pid)
    return pids


def heron_processes(work_dir: Path) -> list[_Target]:
    """Return every ``heron_spark`` instance, stmgr and metrics manager under ``work_dir`` (any
    state but zombie)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        args = faults.cmdline(pid)
        folder = _option(args, "--workdir")
        if folder is None or not faults.is_under(folder, work_dir):
            continue
        for role, module in _MODULE.items():
            if module in args:
                task = _option(args, "--task-id")
                found.append(_Target(role, pid, faults.start_ticks(pid), folder,
                                     None if task is None else int(task),
                                     _option(args, "--component")))
    return found


def _is_spark_worker(pid: int) -> bool:
    args = faults.cmdline(pid)
    return bool(args) and not os.path.basename(args[0]).startswith("java") \
        and any("pyspark" in arg for arg in args)


def targets(work_dir: Path, protected: set[int] | None = None) -> dict[str, list[_Target]]:
    """Return the running (not stopped) processes of each role under ``work_dir``; containers
    are the Spark Python workers whose child is a stmgr there."""
    protected = _ancestors() if protected is None else protected
    by_role: dict[str, list[_Target]] = {role: [] for role in ROLES}
    containers: dict[int, _Target] = {}
    for target in heron_processes(work_dir):
        if target.role == STMGR:
            try:
                parent = faults.parent_of(target.pid)
            except (OSError, IndexError, ValueError):
                parent = 0
            if parent > 1 and parent not in protected and _is_spark_worker(parent) \
                    and faults.state_of(parent) not in _NOT_RUNNING:
                containers.setdefault(parent, _Target(CONTAINER, parent, faults.start_ticks(parent),
                                                      target.folder, via=target.pid))
        if target.pid not in protected and faults.state_of(target.pid) not in _NOT_RUNNING:
            by_role[target.role].append(target)
    by_role[CONTAINER] = list(containers.values())
    return {role: sorted(found, key=lambda t: t.pid) for role, found in by_role.items()}


def describe_processes(work_dir: Path) -> str:
    """One line per heron_spark process under ``work_dir`` and per container: pid, state
    (``T`` = stopped), role, task, folder. For failure messages."""
    lines = []
    parents = set()
    for t in sorted(heron_processes(work_dir), key=lambda t: (t.folder, t.role, t.task or -1)):
        who = f" task {t.task} ({t.component})" if t.task is not None else ""
        lines.append(f"  pid {t.pid} state {faults.state_of(t.pid) or '?'} {t.role}{who} "
                     f"[{'/'.join(Path(t.folder).parts[-2:])}]")
        if t.role == STMGR:
            try:
                parents.add(faults.parent_of(t.pid))
            except (OSError, IndexError, ValueError):
                pass
    for pid in sorted(parents):
        lines.append(f"  pid {pid} state {faults.state_of(pid) or '?'} container (parent of a stmgr: "
                     f"{' '.join(faults.cmdline(pid))[:60]})")
    return "\n".join(lines) or "  (none)"


class Chaos:
    """Send SIGKILL or SIGSTOP to a random process of a topology every ``interval`` seconds.

    ``Chaos(work_dir, duration_secs=40, seed=1).start()`` runs in a daemon thread for
    ``duration_secs`` and then stops by itself; ``stop()`` ends it sooner and may be called any
    number of times, from any thread. ``step()`` does one action synchronously (what the thread
    does each tick). ``work_dir`` is a topology's folder (``<heron.work.dir>/<topology>``) or a
    folder holding several. ``actions`` (a copy, safe from any thread) lists what was sent.
    Nothing is ever continued: stopped processes stay stopped unless the runtime kills them.
    """

    def __init__(self, work_dir: Path, *, duration_secs: float, seed: int = 0,
                 interval: tuple[float, float] = (1.0, 3.0), kill_ratio: float = 0.5,
                 roles: tuple[str, ...] = ROLES, log: Callable[[str], None] | None = None) -> None:
        unknown = set(roles) - set(ROLES)
        if unknown:
            raise ValueError(f"unknown roles {sorted(unknown)}: use some of {ROLES}")
        if not 0 <= interval[0] <= interval[1]:
            raise ValueError(f"interval {interval}: give (low, high) seconds with 0 <= low <= high")
        self.work_dir = Path(work_dir)
        self.duration_secs = float(duration_secs)
        self.interval = interval
        self.kill_ratio = kill_ratio
        self.roles = tuple(roles)
        self._rng = random.Random(seed)
        self._log = log
        self._protected = _ancestors()
        self._lock = threading.Lock()
        self._actions: list[Action] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_at: float | None = None
        self.ended_at: float | None = None  # monotonic time the chaos ended

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "Chaos":
        """Start the chaos thread (once)."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("this Chaos has already been started; make a new one")
            self._started_at = time.monotonic()
            self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """End the chaos now and wait for its thread; idempotent. Sends no SIGCONT."""
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._lock:
            if self.ended_at is None:
                self.ended_at = time.monotonic()

    @property
    def running(self) -> bool:
        """True while the chaos thread is sending signals."""
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> "Chaos":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        deadline = self._started_at + self.duration_secs
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            delay = self._rng.uniform(*self.interval)
            if self._stopping.wait(min(delay, remaining)) or delay > remaining:
                break
            try:
                self.step()
            except OSError as exc:  # /proc raced with a dying process: skip this tick
                if self._log is not None:
                    self._log(f"chaos tick skipped: {exc}")
        with self._lock:
            if self.ended_at is None:
                self.ended_at = time.monotonic()

    # -- one action ------------------------------------------------------------------------
    def step(self) -> Action | None:
        """Signal one random running process of a random role; return what was done (None if
        there was nothing to signal)."""
        found = targets(self.work_dir, self._protected)
        roles = [role for role in self.roles if found[role]]
        if not roles:
            return None
        role = self._rng.choice(roles)
        target = self._rng.choice(found[role])
        signum = signal.SIGKILL if self._rng.random() < self.kill_ratio else signal.SIGSTOP
        if not self._still_the_same(target):
            return None
        try:
            os.kill(target.pid, signum)
        except ProcessLookupError:
            return None
        start = self._started_at if self._started_at is not None else time.monotonic()
        action = Action(time.monotonic() - start, time.time(), _SIGNALS[signum], role, target.pid,
                        target.started, target.folder, target.task, target.component)
        with self._lock:
            self._actions.append(action)
        if self._log is not None:
            self._log(str(action))
        return action

    def _still_the_same(self, target: _Target) -> bool:
        """Re-check, just before the signal, that the pid is still the process we chose."""
        if target.pid in self._protected or faults.start_ticks(target.pid) != target.started:
            return False
        if target.role != CONTAINER:
            args = faults.cmdline(target.pid)
            folder = _option(args, "--workdir")
            return _MODULE[target.role] in args and folder is not None \
                and faults.is_under(folder, self.work_dir)
        try:
            return (_is_spark_worker(target.pid) and faults.parent_of(target.via) == target.pid
                    and faults.MODULES[STMGR] in faults.cmdline(target.via))
        except (OSError, IndexError, ValueError):
            return False

    # -- what happened ---------------------------------------------------------------------
    @property
    def actions(self) -> list[Action]:
        """Every signal sent so far, in order."""
        with self._lock:
            return list(self._actions)

    def counts(self) -> dict[str, collections.Counter]:
        """``{"SIGKILL": Counter(role -> n), "SIGSTOP": ...}``."""
        result = {name: collections.Counter() for name in _SIGNALS.values()}
        for action in self.actions:
            result[action.signal][action.role] += 1
        return result

    def summary(self) -> str:
        """``kills container 2 instance 5 ...; stops ...`` (every role, zeros included)."""
        counts = self.counts()
        return "; ".join(
            f"{label} " + " ".join(f"{role} {counts[name][role]}" for role in ROLES)
            for label, name in (("kills", "SIGKILL"), ("stops", "SIGSTOP")))

    def still_stopped(self) -> list[Action]:
        """Processes this chaos stopped that still exist, stopped (same pid, same start)."""
        return [a for a in self.actions if a.signal == "SIGSTOP"
                and faults.start_ticks(a.pid) == a.started and faults.state_of(a.pid) in ("T", "t")]


def _parent(pid: int) -> str:
    try:
        parent = faults.parent_of(pid)
    except (OSError, IndexError, ValueError):
        return "?"
    args = faults.cmdline(parent)
    return f"{parent} ({' '.join(args)[:40] or 'gone'})"


def leftovers(work_dir: Path, chaos: Chaos | None = None) -> list[str]:
    """Describe every heron_spark process still under ``work_dir`` (stopped ones included)
    and every process ``chaos`` stopped that is still stopped (a Spark worker, say)."""
    processes = faults.processes_under(work_dir)
    found = [f"pid {pid} state {state} parent {_parent(pid)}: {' '.join(args)[:200]}"
             for pid, state, args in processes]
    pids = {pid for pid, _, _ in processes}
    if chaos is not None:
        found += [f"pid {a.pid} still stopped since: {a}" for a in chaos.still_stopped()
                  if a.pid not in pids]
    return found


def wait_no_leftovers(work_dir: Path, chaos: Chaos | None, timeout: float) -> list[str]:
    """Wait up to ``timeout`` s for ``leftovers`` to be empty; return what is left then."""
    try:
        wait_until(lambda: not leftovers(work_dir, chaos), timeout, interval=0.1)
    except AssertionError:
        return leftovers(work_dir, chaos)
    return []


def kill_leftovers(work_dir: Path, chaos: Chaos | None = None) -> list[int]:
    """SIGKILL what ``leftovers`` describes (tear-down); return the pids."""
    killed = faults.kill9_all(work_dir)
    for action in chaos.still_stopped() if chaos is not None else []:
        try:
            os.kill(action.pid, signal.SIGKILL)
            killed.append(action.pid)
        except ProcessLookupError:
            pass
    return killed


class ProgressMonitor:
    """Sample ``progress()`` every ``period`` s; keep the longest time it did not grow.

    Measures from ``start()`` until ``done()`` is true or ``stop()`` is called (whichever is
    first); the time from the last growth to that end counts as a stall too. ``stop()`` is
    idempotent. ``longest_stall_secs`` / ``stalls`` are safe to read from any thread.
    """

    def __init__(self, progress: Callable[[], int], *, done: Callable[[], bool] = lambda: False,
                 period: float = 0.2, report_over_secs: float = 2.0) -> None:
        self._progress = progress
        self._done = done
        self._period = period
        self._report_over = report_over_secs
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._start = 0.0
        self._last_value = -1
        self._last_change = 0.0
        self._longest = 0.0
        self._stalls: list[tuple[float, float]] = []
        self._finished = False
        self.samples = 0

    def start(self) -> "ProgressMonitor":
        """Start sampling in a daemon thread."""
        self._start = self._last_change = time.monotonic()
        self._last_value = self._progress()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (idempotent); the stall in progress, if any, is counted."""
        self._stopping.set()
        if self._thread is None:
            return  # never started: nothing was measured
        if self._thread is not threading.current_thread():
            self._thread.join()
        self._finish(time.monotonic())

    def __enter__(self) -> "ProgressMonitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stopping.wait(self._period):
            value = self._progress()
            now = time.monotonic()
            with self._lock:
                self.samples += 1
                if value > self._last_value:
                    self._close_gap(now)
                    self._last_value = value
            if self._done():
                self._finish(now)
                return

    def _close_gap(self, now: float) -> None:
        gap = now - self._last_change
        self._longest = max(self._longest, gap)
        if gap > self._report_over:
            self._stalls.append((self._last_change - self._start, gap))
        self._last_change = now

    def _finish(self, now: float) -> None:
        with self._lock:
            if not self._finished:
                self._finished = True
                self._close_gap(now)

    @property
    def longest_stall_secs(self) -> float:
        """The longest time without progress so far (the current one included)."""
        with self._lock:
            current = 0.0 if self._finished else time.monotonic() - self._last_change
            return max(self._longest, current)

    @property
    def current_stall_secs(self) -> float:
        """Seconds since progress last grew (0 once finished)."""
        with self._lock:
            return 0.0 if self._finished else time.monotonic() - self._last_change

    @property
    def stalls(self) -> list[tuple[float, float]]:
        """``(seconds after start, length)`` of every stall over ``report_over_secs``."""
        with self._lock:
            return list(self._stalls)


def output_bytes(out: Path, pattern: str = "count-*.log") -> int:
    """Bytes the count bolts have written to their logs under ``out`` (the progress number)."""
    total = 0
    for path in out.glob(pattern):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            pass
    return total


@dataclasses.dataclass
class Audit:
    """What an at-least-once word count delivered, compared with the exact counts."""

    lines: int
    words: int                       # word occurrences in the corpus
    lost: collections.Counter        # word -> occurrences never counted (after de-duplication)
    unexpected: collections.Counter  # word -> counted occurrences that are not in the corpus
    replayed: int                    # records beyond one per word occurrence (duplicates)
    unacked_lines: int               # lines no spout process ever logged an ack for
    committed: int                   # acked_total in the spouts' committed checkpoints

    @property
    def exact(self) -> bool:
        """True when nothing was lost or invented, every line acked and committed once."""
        return not self.lost and not self.unexpected and not self.unacked_lines \
            and self.committed == self.lines

    def __str__(self) -> str:
        return (f"lost {sum(self.lost.values())} of {self.words} words "
                f"({len(self.lost)} distinct), {sum(self.unexpected.values())} unexpected, "
                f"{self.replayed} replayed records, {self.unacked_lines} of {self.lines} lines "
                f"never acked, committed acked_total {self.committed}")


def audit(text: list[str], out: Path, statemgr_url: str, topology: str, spouts: int,
          corpus_name: str = "corpus.txt") -> Audit:
    """Compare the word count's logs under ``out`` with ``text`` (the corpus' lines)."""
    _, unique, records = rwc.read_counts(out)
    expected = rwc.expected_counts(text)
    acks, _ = rwc.read_spout_log(out)
    unacked = sum(1 for i in range(len(text)) if f"{corpus_name}:{i}" not in acks)
    return Audit(len(text), sum(expected.values()), expected - unique, unique - expected,
                 records - sum(unique.values()), unacked,
                 rwc.committed_acks(statemgr_url, topology, spouts))
