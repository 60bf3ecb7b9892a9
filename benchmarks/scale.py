"""Scale benchmark: what a topology costs as its container count grows.

Topology (``scale_topology.py``): per container one ``word`` spout task and one ``count`` bolt
task (fields grouping), at least once, each spout paced to --rate words/s (default 20) for the
settle time plus the window plus 3 s, so the work is light and the control plane is what is
measured. Two modes:

- real (--real-sizes, default 2,4,8,16): submitted to Spark ``local[S]`` (S = the largest
  size: barrier mode needs a slot per container), every stmgr, metrics manager and instance a
  real process. Per run: submit() to RUNNING, the physical plan's bytes, traffic into the
  TMaster per second over a --window s window (default 10) once RUNNING for --settle s
  (frames and bytes from the stmgrs: heartbeats; from the metrics managers: snapshots; the
  TMaster shell's ``status()['received']`` counters), CPU per second per process role over the
  window, and in its middle VmRSS / VmHWM per process role and each stmgr's TCP connections by
  the role at the other end (``/proc/<pid>/fd`` + ``/proc/net/tcp``). The counts are checked
  exactly (distinct ids per word) and every process must be gone at the end; a run that fails
  (not RUNNING within --timeout, wrong counts, processes left) is listed and left out of the
  medians, and the benchmark exits 1.
- simulated (--sim-sizes, default 2,4,8,16,64): ``heron_spark.inprocess.control_plane``: the
  TMaster's core and one ``StmgrCore`` per container in this process, joined by a counting
  in-memory transport, for --sim-secs simulated seconds (default 30): plan bytes, the plan
  broadcast, links per stmgr, heartbeat and metrics frames and bytes per second into the
  TMaster and into each metrics manager, and the TMaster core's CPU time per simulated second.

Each real size runs --runs times (default 3); sizes from --big-from (default 16) run
--big-runs times (default 1): on a 2-core machine a 16-container run is 64 Python processes.
Printed: the machine and its load average, every run, a table per size (median of the runs;
the load average at each run's start), and how each figure grows with the container count
(the lowest-degree polynomial, constant / linear / quadratic, fitting every size within 10%).
--json PATH writes everything. The default full run takes 5-10 minutes on a quiet 2-core
machine.

    .venv/bin/python benchmarks/scale.py
    .venv/bin/python benchmarks/scale.py --real-sizes 2,4 --runs 1 --sim-sizes 2,4,64
    .venv/bin/python benchmarks/scale.py --real-sizes '' --sim-sizes 2,4,8,16,64,256
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import bench_env  # first: the paths and environment the topology's processes inherit

bench_env.prepare()

import numpy as np  # noqa: E402
from pyspark import cloudpickle  # noqa: E402

import scale_topology  # noqa: E402
from heron_spark.inprocess.control_plane import ControlPlaneSim  # noqa: E402
from wc_report import machine_info  # noqa: E402

cloudpickle.register_pickle_by_value(scale_topology)


def _sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def sim_run(containers: int, secs: float) -> dict:
    """Simulate ``containers`` containers for ``secs`` simulated seconds; return the figures."""
    sim = ControlPlaneSim(scale_topology.build(containers, 1, 0, Path("/nonexistent")))
    started = time.perf_counter()
    sim.start()
    start_secs = time.perf_counter() - started
    if sim.tmaster.state.value != "RUNNING":
        raise RuntimeError(f"simulated {containers} containers: TMaster {sim.tmaster.state}")
    before = sim.traffic.snapshot()
    cpu_before = sim.tmaster_cpu_secs
    sim.run(secs)
    after = sim.traffic.snapshot()

    def per_s(channel: str) -> tuple[float, float]:
        f0, b0 = before.get(channel, (0, 0))
        f1, b1 = after.get(channel, (0, 0))
        return (f1 - f0) / secs, (b1 - b0) / secs

    links = sim.peer_links()
    plan = after.get("tmaster->stmgr:plan", (0, 0))
    return {
        "containers": containers, "plan_bytes": sim.plan_bytes, "plan_broadcast_bytes": plan[1],
        "links_per_stmgr": statistics.median(links), "links_total": sum(links),
        "heartbeat_frames_per_s": per_s("stmgr->tmaster:heartbeat")[0],
        "heartbeat_bytes_per_s": per_s("stmgr->tmaster:heartbeat")[1],
        "metrics_frames_per_s": per_s("metricsmgr->tmaster")[0],
        "metrics_bytes_per_s": per_s("metricsmgr->tmaster")[1],
        "to_each_metricsmgr_frames_per_s": (per_s("instance->metricsmgr")[0]
                                            + per_s("stmgr->metricsmgr")[0]) / containers,
        "tmaster_cpu_ms_per_s": 1000 * (sim.tmaster_cpu_secs - cpu_before) / secs,
        "sim_start_wall_s": start_secs,
    }


def fit(sizes: list[int], values: list[float]) -> str:
    """Name the lowest-degree polynomial in the size fitting every value within 10%."""
    points = [(n, v) for n, v in zip(sizes, values) if v == v]  # drop NaN
    if len(points) < 2:
        return "-"
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points], dtype=float)
    scale = max(float(np.max(np.abs(y))), 1e-12)
    for degree in (0, 1, 2):
        if degree >= len(points):
            break
        coeffs = np.polyfit(x, y, degree)
        if np.max(np.abs(np.polyval(coeffs, x) - y)) <= 0.10 * scale:
            if degree == 0:
                return f"constant (~{coeffs[0]:.3g})"
            if degree == 1:
                return f"linear ({coeffs[0]:+.3g}/container)"
            return f"quadratic ({coeffs[0]:+.3g}*N^2)"
    return "faster than quadratic"


def _median(runs: list[dict], key) -> float:
    values = [key(r) for r in runs]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


REAL_ROWS = [
    ("submit->RUNNING s", lambda r: r["submit_to_running_s"], "{:.1f}"),
    ("plan bytes (real)", lambda r: r["plan_bytes"], "{:.0f}"),
    ("stmgr TCP to stmgrs", lambda r: r["stmgr_sockets"].get("tcp_to_stmgr", 0), "{:.0f}"),
    ("stmgr TCP total", lambda r: r["stmgr_sockets"].get("tcp_total"), "{:.0f}"),
    ("stmgr unix sockets", lambda r: r["stmgr_sockets"].get("unix"), "{:.0f}"),
    ("stmgr fds", lambda r: r["stmgr_sockets"].get("fds"), "{:.0f}"),
    ("stmgr threads", lambda r: r["roles"].get("stmgr", {}).get("threads_median"), "{:.0f}"),
    ("TMaster <- stmgr frames/s", lambda r: r["stmgr_frames_per_s"], "{:.1f}"),
    ("TMaster <- stmgr B/s", lambda r: r["stmgr_bytes_per_s"], "{:.0f}"),
    ("TMaster <- metrics frames/s", lambda r: r["metrics_frames_per_s"], "{:.1f}"),
    ("TMaster <- metrics B/s", lambda r: r["metrics_bytes_per_s"], "{:.0f}"),
    ("driver CPU %", lambda r: 100 * r["cpu_per_s"].get("driver", 0.0), "{:.1f}"),
    ("Spark JVM CPU %", lambda r: 100 * r["cpu_per_s"].get("Spark JVM", 0.0), "{:.1f}"),
    ("driver RSS MB", lambda r: r["roles"].get("driver", {}).get("rss_mb_median"), "{:.0f}"),
    ("Spark JVM RSS MB", lambda r: r["roles"].get("Spark JVM", {}).get("rss_mb_median"),
     "{:.0f}"),
    ("supervisor RSS MB (Spark Python workers)",
     lambda r: r["roles"].get("Spark Python workers", {}).get("rss_mb_median"), "{:.0f}"),
    ("stmgr RSS MB", lambda r: r["roles"].get("stmgr", {}).get("rss_mb_median"), "{:.0f}"),
    ("stmgr HWM MB (max)", lambda r: r["roles"].get("stmgr", {}).get("hwm_mb_max"), "{:.0f}"),
    ("metricsmgr RSS MB", lambda r: r["roles"].get("metricsmgr", {}).get("rss_mb_median"),
     "{:.0f}"),
    ("instance RSS MB", lambda r: r["roles"].get("instance", {}).get("rss_mb_median"), "{:.0f}"),
    ("load avg (1 min) at start", lambda r: r["load_before"][0], "{:.2f}"),
]
SIM_ROWS = [
    ("plan bytes (sim)", "plan_bytes", "{:.0f}"),
    ("plan broadcast bytes", "plan_broadcast_bytes", "{:.0f}"),
    ("peer links per stmgr", "links_per_stmgr", "{:.0f}"),
    ("peer links total", "links_total", "{:.0f}"),
    ("heartbeats/s to TMaster", "heartbeat_frames_per_s", "{:.1f}"),
    ("heartbeat B/s to TMaster", "heartbeat_bytes_per_s", "{:.0f}"),
    ("metrics frames/s to TMaster", "metrics_frames_per_s", "{:.1f}"),
    ("metrics B/s to TMaster", "metrics_bytes_per_s", "{:.0f}"),
    ("frames/s into each metricsmgr", "to_each_metricsmgr_frames_per_s", "{:.1f}"),
    ("TMaster core CPU ms/s", "tmaster_cpu_ms_per_s", "{:.2f}"),
]


def _table(title: str, sizes: list[int], rows: list[tuple[str, list[float], str]]) -> None:
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows) + 2
    print("".ljust(width) + "".join(f"{'N=' + str(n):>11}" for n in sizes) + "   growth")
    for label, values, fmt in rows:
        cells = "".join(f"{'-' if v != v else fmt.format(v):>11}" for v in values)
        growth = "" if label.startswith("load") else fit(sizes, values)
        print(label.ljust(width) + cells + "   " + growth)


def report(real: dict[int, list[dict]], sim: dict[int, dict]) -> None:
    """Print every real run, then the real and simulated tables with their growth fits."""
    for size, runs in sorted(real.items()):
        for r in runs:
            print(f"real N={size} run {r['run']}: RUNNING after {r['submit_to_running_s']:.1f} s, "
                  f"plan {r['plan_bytes']} B, stmgr sockets {r['stmgr_sockets']}, "
                  f"TMaster <- stmgrs {r['stmgr_frames_per_s']:.1f} frames/s "
                  f"{r['stmgr_bytes_per_s']:.0f} B/s, <- metrics {r['metrics_frames_per_s']:.1f} "
                  f"frames/s {r['metrics_bytes_per_s']:.0f} B/s, CPU/s "
                  f"{ {k: round(v, 3) for k, v in sorted(r['cpu_per_s'].items())} }, "
                  f"load {r['load_before'][0]:.2f} -> {r['load_after'][0]:.2f}")
    if real:
        sizes = sorted(real)
        _table(f"REAL (Spark local[{max(sizes)}]; median of runs: "
               + ", ".join(f"N={n}: {len(real[n])}" for n in sizes) + ")", sizes,
               [(label, [_median(real[n], key) for n in sizes], fmt)
                for label, key, fmt in REAL_ROWS])
    if sim:
        sizes = sorted(sim)
        _table("SIMULATED (TMasterCore + N StmgrCores, in-memory transport)", sizes,
               [(label, [float(sim[n][key]) for n in sizes], fmt) for label, key, fmt in SIM_ROWS])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real-sizes", default="2,4,8,16")
    parser.add_argument("--sim-sizes", default="2,4,8,16,64")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--big-from", type=int, default=16)
    parser.add_argument("--big-runs", type=int, default=1)
    parser.add_argument("--rate", type=float, default=20.0, help="words/s per spout task")
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--sim-secs", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    real_sizes, sim_sizes = _sizes(args.real_sizes), _sizes(args.sim_sizes)
    info = machine_info()
    sim = {}
    for n in sim_sizes:
        sim[n] = sim_run(n, args.sim_secs)
        print(f"sim N={n}: {json.dumps({k: round(v, 3) for k, v in sim[n].items()})}", flush=True)
    real: dict[int, list[dict]] = {}
    failed: list[str] = []
    if real_sizes:
        from scale_real import ScaleRunError, real_run  # Spark only when asked

        work_root = Path(tempfile.mkdtemp(prefix="heron_spark_scale_"))
        spark = bench_env.local_session(f"local[{max(real_sizes)}]", "heron_spark scale")
        try:
            for n in real_sizes:
                runs = args.big_runs if n >= args.big_from else args.runs
                for i in range(runs):
                    try:
                        result = real_run(spark, n, args, work_root, i + 1)
                    except ScaleRunError as exc:  # listed, left out of the medians
                        failed.append(f"N={n} run {i + 1}: {exc} (load {os.getloadavg()[0]:.2f})")
                        print(f"real N={n} run {i + 1} FAILED: {exc}", flush=True)
                        continue
                    real.setdefault(n, []).append(result)
                    print(f"real N={n} run {i + 1}: RUNNING after "
                          f"{result['submit_to_running_s']:.1f} s; load "
                          f"{result['load_before'][0]:.2f}", flush=True)
        finally:
            spark.stop()
            shutil.rmtree(work_root, ignore_errors=True)
    report(real, sim)
    for line in failed:
        print(f"FAILED run {line}")
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "args": vars(args) | {"json": None},
                                         "real": real, "failed": failed, "sim": sim},
                                        indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
