"""One real run of the scale benchmark: N containers on Spark ``local[slots]``, measured.

``real_run(spark, containers, args, work_root)`` submits ``scale_topology.build(containers,
...)`` (one spout and one bolt task per container, at least once, paced), waits for RUNNING,
lets it settle, then measures a window of ``args.window`` seconds while the spouts still emit:

- submit-to-RUNNING: ``submit()`` called to the first physical plan out (``started_at``);
- plan bytes: the serialized physical plan;
- traffic into the TMaster (its ``status()['received']`` counters, per second over the window):
  frames and bytes from stmgrs (heartbeats, plus the odd drained report) and from metrics
  managers (one snapshot per container per interval);
- CPU per second of each process role over the window (``/proc/<pid>/stat``), and in the middle
  of the window each process's VmRSS, VmHWM, open fds and sockets (``scale_procs.snapshot``):
  per stmgr, its TCP connections by the role holding the other end;

then waits for the topology to finish and checks the distinct counts exactly (a mismatch or an
end other than FINISHED raises ``ScaleRunError``), and that its processes are gone.
Driver only; the caller owns the Spark session.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import defaultdict
from pathlib import Path

import scale_procs
import scale_topology
from heron_spark import submit

TOPOLOGY_ROLES = ("stmgr", "metricsmgr", "instance")


class ScaleRunError(RuntimeError):
    """A real run went wrong: not RUNNING in time, wrong counts, processes left behind."""


def _cpu_rates(before: dict, after: dict, secs: float) -> dict[str, float]:
    """CPU seconds per second per role over ``secs``, from two ``cpu_by_pid`` readings."""
    rates: dict[str, float] = defaultdict(float)
    for pid, (role, cpu) in after.items():
        if pid in before:
            rates[role] += max(0.0, cpu - before[pid][1]) / secs
    return dict(rates)


def _per_role(rows: list[dict]) -> dict[str, dict]:
    """Memory and sockets per role: processes, median/max VmRSS, max VmHWM (MB), fds."""
    by_role: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        role = "instance" if row["role"].startswith("instance") else row["role"]
        by_role[role].append(row)
    out = {}
    for role, group in by_role.items():
        rss = [r.get("VmRSS", 0) / 1024 for r in group]
        out[role] = {"processes": len(group), "rss_mb_median": statistics.median(rss),
                     "rss_mb_max": max(rss),
                     "hwm_mb_max": max(r.get("VmHWM", 0) for r in group) / 1024,
                     "fds_median": statistics.median(r["fds"] for r in group),
                     "threads_median": statistics.median(r.get("Threads", 0) for r in group)}
    return out


def _stmgr_sockets(rows: list[dict]) -> dict:
    """Per stmgr (median over stmgrs): TCP connections by other end, listeners, Unix sockets."""
    stmgrs = [r for r in rows if r["role"] == "stmgr"]
    if not stmgrs:
        return {}
    ends = sorted({end for r in stmgrs for end in r["tcp_peers"]})
    out = {f"tcp_to_{end}": statistics.median(r["tcp_peers"].get(end, 0) for r in stmgrs)
           for end in ends}
    out["tcp_total"] = statistics.median(sum(r["tcp_peers"].values()) for r in stmgrs)
    out["tcp_listen"] = statistics.median(r["tcp_listen"] for r in stmgrs)
    out["unix"] = statistics.median(r["unix"] for r in stmgrs)
    out["fds"] = statistics.median(r["fds"] for r in stmgrs)
    out["stmgr_stmgr_min"] = min(r["tcp_peers"].get("stmgr", 0) for r in stmgrs)
    out["stmgr_stmgr_max"] = max(r["tcp_peers"].get("stmgr", 0) for r in stmgrs)
    return out


def _topology_pids() -> list[int]:
    return [pid for pid, (role, _) in scale_procs.cpu_by_pid().items()
            if role.startswith(TOPOLOGY_ROLES)]


def _wait_gone(timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        left = _topology_pids()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def real_run(spark, containers: int, args, work_root: Path, run_number: int) -> dict:
    """Run ``containers`` containers once and return its figures (see the module docstring)."""
    out_dir = work_root / f"real-{containers}-{run_number}"
    out_dir.mkdir(parents=True)
    words = round(args.rate * (args.settle + args.window + 3))
    topology = scale_topology.build(containers, words, args.rate, out_dir)
    conf = {"heron.statemgr": f"file://{work_root / 'state'}",
            "heron.work.dir": str(work_root / "work"), "heron.submit.progress": False}
    load_before = os.getloadavg()
    handle = None
    submitted = time.time()
    try:
        handle = submit(topology, spark=spark, conf=conf,
                        name=f"scale_{containers}_{run_number}")
        if not handle.wait_running(timeout=args.timeout):
            raise ScaleRunError(f"{containers} containers: not RUNNING after {args.timeout} s "
                                f"({handle.status})")
        startup = handle.started_at - submitted
        plan_bytes = handle.physical_plan.ByteSize()
        time.sleep(args.settle)  # a benchmark's measurement window, not a test's wait
        received0, cpu0, t0 = handle.status_detail()["received"], scale_procs.cpu_by_pid(), \
            time.monotonic()
        time.sleep(args.window / 2)
        rows = scale_procs.snapshot()
        time.sleep(args.window / 2)
        received1, cpu1, t1 = handle.status_detail()["received"], scale_procs.cpu_by_pid(), \
            time.monotonic()
        status = handle.wait(timeout=args.timeout)
    finally:
        if handle is not None and handle.status in ("STARTING", "RUNNING"):
            handle.kill()
        left = _wait_gone(30.0)  # also after a failure: the next run starts clean
    if left:
        raise ScaleRunError(f"{containers} containers: processes {left} alive 30 s after the end")
    if status != "FINISHED":
        raise ScaleRunError(f"{containers} containers: the topology ended {status}")
    counts, received, files = scale_topology.read_counts(out_dir, containers)
    expected = scale_topology.expected_counts(containers, words)
    if counts != expected or files != containers:
        raise ScaleRunError(f"{containers} containers: counts differ from the expected ones "
                            f"({files} of {containers} count files; see {out_dir})")
    secs = t1 - t0

    def rate(key: str) -> float:
        return (received1.get(key, 0) - received0.get(key, 0)) / secs

    return {
        "containers": containers, "run": run_number, "load_before": load_before,
        "load_after": os.getloadavg(), "submit_to_running_s": startup,
        "plan_bytes": plan_bytes, "words": words * containers, "tuples_received": received,
        "window_s": secs,
        "stmgr_frames_per_s": rate("stmgr.frames"), "stmgr_bytes_per_s": rate("stmgr.bytes"),
        "metrics_frames_per_s": rate("metricsmgr.frames"),
        "metrics_bytes_per_s": rate("metricsmgr.bytes"),
        "cpu_per_s": _cpu_rates(cpu0, cpu1, secs),
        "roles": _per_role(rows), "stmgr_sockets": _stmgr_sockets(rows),
    }
