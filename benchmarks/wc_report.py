"""The word-count benchmark's measurements and report (used by ``benchmarks/word_count.py``).

CPU seconds and peak RSS per process role, sampled from ``/proc`` (``ProcessSampler``; the
roles are told apart by command line), the stop of every process left behind
(``kill_descendants``), latency percentiles (``quantile``), the machine line, and each mode's
report: one line per metric as the median of the runs followed by every run's figure, and a CPU
table per role (``report_mode``). Driver only.
"""

from __future__ import annotations

import bisect
import collections
import math
import os
import platform
import signal
import statistics
import threading
import time

from heron_spark.contract.child_args import InstanceArgs, MetricsManagerArgs, StmgrArgs

# ---- processes: roles, CPU and peak RSS from /proc ------------------------------------------
CLK_TCK = os.sysconf("SC_CLK_TCK")
ROLE_ORDER = ["driver", "Spark JVM", "Spark Python workers", "stmgr", "metricsmgr"]


def _stat(pid: int) -> tuple[int, float, int, bytes] | None:
    """(ppid, CPU seconds utime+stime, start time, state) of ``pid``, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK, int(fields[19]), fields[0]


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def _role(pid: int, root: int) -> str:
    if pid == root:
        return "driver"
    argv = _cmdline(pid)
    if not argv or not argv[0]:
        return "other"
    if os.path.basename(argv[0]) == "java":
        return "Kafka broker" if "kafka.Kafka" in argv else "Spark JVM"
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else ""
    if module == StmgrArgs.MODULE:
        return "stmgr"
    if module == MetricsManagerArgs.MODULE:
        return "metricsmgr"
    if module == InstanceArgs.MODULE:
        component = argv[argv.index("--component") + 1] if "--component" in argv[:-1] else "?"
        return f"instance {component}"
    if module == "pyspark.daemon" or module == "pyspark.worker":
        return "Spark Python workers"
    return f"other {os.path.basename(argv[0])}"


def descendants(root: int, *others: int) -> dict[int, tuple[int, float, int, bytes]]:
    """Every descendant of ``root`` and ``others`` (them too): pid -> (ppid, CPU s, start, state)."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None:
                stats[int(name)] = stat
    children = collections.defaultdict(list)
    for pid, (ppid, *_) in stats.items():
        children[ppid].append(pid)
    found, todo = {}, [root, *others]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in found:
            found[pid] = stats[pid]
            todo.extend(children.get(pid, ()))
    return found


class ProcessSampler:
    """Samples CPU time and VmHWM of every descendant of this process until stopped.

    ``others``: more processes whose descendants count too (the worker JVMs of a standalone
    cluster, whose executors run the containers).

    It keeps the last value per process (processes end with the topology). Processes alive at
    the start count from their CPU time then, and their peak RSS is reset (``clear_refs`` 5).
    The driver's CPU leaves out the sampler thread's own (walking ``/proc`` every 0.2 s;
    ``sampler_cpu_s``), which is the benchmark's, not the driver's.
    """

    def __init__(self, interval: float, others: tuple[int, ...] = ()) -> None:
        self.root = os.getpid()
        self.others = others  # more roots: a standalone cluster's worker JVMs
        self.interval = interval
        self.procs: dict[tuple[int, int], dict] = {}
        self.live: set[tuple[int, int]] = set()
        self.hwm_reset = True
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.own_cpu_s = 0.0

    def start(self) -> "ProcessSampler":
        for pid, (_, cpu, started, _) in descendants(self.root, *self.others).items():
            try:
                with open(f"/proc/{pid}/clear_refs", "w") as handle:
                    handle.write("5")
            except OSError:
                self.hwm_reset = False
            self.procs[(pid, started)] = {"pid": pid, "base": cpu}
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()
            self.own_cpu_s = time.thread_time()  # this thread's CPU: not the driver's work

    def sample(self) -> None:
        live = set()
        for pid, (_, cpu, started, state) in descendants(self.root, *self.others).items():
            key = (pid, started)
            if state == b"Z" and key not in self.procs:
                continue  # never seen alive (the JVM's exited shell): nothing to measure
            live.add(key)
            # Read each time: a fork shows its parent's command line until it execs, and an
            # exiting process (zombie) none, which keeps the role it had.
            role = _role(pid, self.root)
            hwm = _hwm_kb(pid)
            with self._lock:
                entry = self.procs.setdefault(key, {"pid": pid, "base": 0.0})
                entry["cpu"] = cpu
                if role != "other" and role != entry.get("role"):
                    entry["role"] = role
                    entry["hwm_kb"] = hwm  # exec starts a new image, and a new peak
                else:
                    entry.setdefault("role", role)
                    entry["hwm_kb"] = max(hwm, entry.get("hwm_kb", 0))
        with self._lock:
            self.live = live

    def topology_alive(self) -> list[int]:
        """Pids of live stmgrs, metrics managers and instances."""
        with self._lock:
            return [self.procs[key]["pid"] for key in self.live
                    if self.procs[key].get("role", "").startswith(("stmgr", "metricsmgr", "instance"))]

    def stop(self) -> dict[str, dict]:
        """Stop; return per role: processes, CPU seconds (sum), peak RSS MB (max), per pid."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        roles: dict[str, dict] = {}
        for entry in self.procs.values():
            if "role" not in entry:
                continue
            role = roles.setdefault(entry["role"], {"processes": 0, "cpu_s": 0.0, "peak_rss_mb": 0.0,
                                                    "pids": {}})
            role["processes"] += 1
            cpu = max(0.0, entry["cpu"] - entry["base"])
            role["cpu_s"] += cpu
            role["peak_rss_mb"] = max(role["peak_rss_mb"], entry["hwm_kb"] / 1024)
            role["pids"][entry["pid"]] = {"cpu_s": round(cpu, 2),
                                          "peak_rss_mb": round(entry["hwm_kb"] / 1024, 1)}
        if "driver" in roles:  # the driver's CPU, without this sampler's reading of /proc
            roles["driver"]["cpu_s"] = max(0.0, roles["driver"]["cpu_s"] - self.own_cpu_s)
            roles["driver"]["sampler_cpu_s"] = round(self.own_cpu_s, 2)
        return roles


def kill_descendants(grace: float = 10.0) -> list[str]:
    """SIGTERM, then SIGKILL, every process this benchmark started that is still alive.

    Return a description of each.
    """
    me = os.getpid()

    def alive() -> list[int]:
        return [pid for pid, stat in descendants(me).items() if pid != me and stat[3] != b"Z"]

    found = alive()
    described = [f"{pid} {' '.join(_cmdline(pid))[:120]}" for pid in found]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in found:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            found = alive()
            if not found:
                return described
            time.sleep(0.2)
    return described


def quantile(ordered: list[float], q: float) -> float:
    """Return the ``q`` quantile (0..1) of the sorted values ``ordered``; NaN if there are none."""
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


LATENCY_BUCKETS_MS = (0.5, 1, 2, 5, 10, 20, 50, 100)


def latency_histogram(samples: list[float]) -> list[int]:
    """Count latency samples (seconds) per bucket: <= each of ``LATENCY_BUCKETS_MS``, then above."""
    counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
    bounds = [b / 1000 for b in LATENCY_BUCKETS_MS]
    for sample in samples:
        counts[bisect.bisect_left(bounds, sample)] += 1
    return counts


def _histogram_lines(mode: str, paced: list[dict]) -> list[str]:
    """One row per latency bucket: the latency runs' samples summed, count and % per bucket."""
    hists = [r["latency_histogram"] for r in paced if "latency_histogram" in r]
    if not hists:
        return []
    counts = [sum(column) for column in zip(*hists)]
    total = max(1, sum(counts))
    labels = [f"<= {b:g} ms" for b in LATENCY_BUCKETS_MS] + [f"> {LATENCY_BUCKETS_MS[-1]:g} ms"]
    lines = [f"{mode} latency histogram, {len(hists)} latency run(s), {sum(counts):,} samples:"]
    below = 0
    for label, count in zip(labels, counts):
        below += count
        lines.append(f"  {label:>10} {count:>9,} {100 * count / total:6.2f} %  "
                     f"(cumulative {100 * below / total:6.2f} %)")
    return lines


# ---- report --------------------------------------------------------------------------------
def _median(values) -> float:
    """Return the median of ``values``; NaN if there are none (a phase not run)."""
    values = list(values)
    return statistics.median(values) if values else math.nan


def _line(mode: str, label: str, values: list[float], fmt) -> str:
    return (f"{mode} {label}: median {fmt(_median(values))} "
            f"(runs: {', '.join(fmt(v) for v in values)})")


def _int(v: float) -> str:
    return f"{v:,.0f}"


def _f2(v: float) -> str:
    return f"{v:,.2f}"


def _f1(v: float) -> str:
    return f"{v:,.1f}"


def _roles_in(runs: list[dict]) -> list[str]:
    seen = {role for run in runs for role in run["roles"]}
    instances = sorted(r for r in seen if r.startswith("instance "))
    ordered = [r for r in ROLE_ORDER if r in seen] + instances
    return ordered + sorted(seen - set(ordered))


def report_mode(mode: str, args, fast: list[dict], paced: list[dict]) -> dict:
    lines = [
        _line(mode, "words/s", [r["words_per_s"] for r in fast], _int),
        _line(mode, f"latency p50 ms at {args.rate:,.0f} words/s", [r["p50_ms"] for r in paced], _f2),
        _line(mode, f"latency p99 ms at {args.rate:,.0f} words/s", [r["p99_ms"] for r in paced], _f2),
        _line(mode, "achieved words/s in the latency runs", [r["words_per_s"] for r in paced], _int),
        _line(mode, "start-up s, submit() to RUNNING", [r["startup_running_s"] for r in fast], _f2),
        _line(mode, "start-up s, submit() to first word counted",
              [r["startup_first_count_s"] for r in fast], _f2),
    ]
    first = (fast or paced)[0]
    if "checkpoints" in first:
        for label, key in (("checkpoints committed", "checkpoints"),
                           ("checkpoint ms, start to commit (mean)", "checkpoint_ms_mean"),
                           ("checkpoint ms, start to commit (max)", "checkpoint_ms_max")):
            lines.append(_line(mode, f"{label}, throughput runs", [r[key] for r in fast], _f1))
            lines.append(_line(mode, f"{label}, latency runs", [r[key] for r in paced], _f1))
    roles = _roles_in(fast + paced)
    for role in roles:
        lines.append(_line(mode, f"peak RSS MB {role}",
                           [r["roles"].get(role, {}).get("peak_rss_mb", 0.0) for r in fast], _f1))
    summary = {"words_per_s": _median(r["words_per_s"] for r in fast),
               "p50_ms": _median(r["p50_ms"] for r in paced),
               "p99_ms": _median(r["p99_ms"] for r in paced),
               "startup_running_s": _median(r["startup_running_s"] for r in fast),
               "startup_first_count_s": _median(r["startup_first_count_s"] for r in fast),
               "peak_rss_mb": {}, "cpu_s": {}}
    header = (f"{mode} CPU seconds per process role, median of {len(fast)} [every run]: throughput "
              f"phase ({fast[0]['words'] if fast else 0:,} words unpaced), latency phase "
              f"({args.rate:,.0f} words/s "
              f"for {args.latency_secs:g} s)")
    table = [header, f"  {'role':<24} {'procs':>5}  {'throughput phase':<34} {'latency phase':<34}"]
    for role in roles:
        cells = []
        for runs in (fast, paced):
            values = [r["roles"].get(role, {}).get("cpu_s", 0.0) for r in runs]
            cells.append(f"{_median(values):.2f} [{', '.join(f'{v:.2f}' for v in values)}]")
        procs = first["roles"].get(role, {}).get("processes", 0)
        table.append(f"  {role:<24} {procs:>5}  {cells[0]:<34} {cells[1]:<34}")
        summary["cpu_s"][role] = {
            phase: _median(r["roles"].get(role, {}).get("cpu_s", 0.0) for r in runs)
            for phase, runs in (("throughput", fast), ("latency", paced))}
        summary["peak_rss_mb"][role] = _median(
            r["roles"].get(role, {}).get("peak_rss_mb", 0.0) for r in fast)
    totals = [f"{_median(sum(v['cpu_s'] for v in r['roles'].values()) for r in runs):.2f}"
              for runs in (fast, paced)]
    table.append(f"  {'all':<24} {'':>5}  {totals[0]:<34} {totals[1]:<34}")
    print("\n".join(lines + _histogram_lines(mode, paced) + table), flush=True)
    return summary


def machine_info() -> dict:
    load = os.getloadavg()
    info = {"cpu_count": os.cpu_count(), "usable_cpus": len(os.sched_getaffinity(0)),
            "load_average": [round(x, 2) for x in load], "python": platform.python_version(),
            "platform": platform.platform()}
    print(f"machine: {info['cpu_count']} CPUs ({info['usable_cpus']} usable), load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1, 5, 15 min); Python {info['python']}, "
          f"{info['platform']}", flush=True)
    if load[0] > 0.5:
        print(f"WARNING: noisy machine: 1-minute load average {load[0]:.2f} > 0.5; "
              f"figures will be low and spread out", flush=True)
    return info
