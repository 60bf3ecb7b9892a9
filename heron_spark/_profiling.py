"""A sampling profiler for heron_spark's own processes: where a stmgr's CPU goes.

Off unless ``HERON_SPARK_PROFILE_DIR`` is set in the environment Spark's workers inherit (set
it before the SparkSession starts). Then every stmgr, instance and metrics manager samples
the Python stacks of all its threads every ``HERON_SPARK_PROFILE_INTERVAL_MS`` (default 10)
and rewrites ``<dir>/<process name>-<pid>.folded`` every 2 s: one line per distinct stack,
``thread;outer frame;...;inner frame seconds`` (the "folded" format flame-graph tools read).
Each stack is weighted by the CPU seconds its thread used since the previous sample (from
the thread's CPU clock), so threads that only wait weigh nothing. The first line,
``# cpu <thread>=<seconds> ...``, gives each thread's total CPU seconds (``/proc/self/task``).

``python -m heron_spark._profiling DIR`` prints, per process role, each thread's CPU seconds
and the innermost Python functions that CPU was spent in (C calls count in their caller).
The sampler charges the CPU a thread used between two samples to the stack it is in at the
second one, so a thread that is mostly idle shows up "in" its wait.

With ``HERON_SPARK_PROFILE_MODE=cprofile`` each process instead runs its main thread under
``cProfile`` timed by the thread's CPU clock (exact call counts and per-function CPU time,
several times slower) and writes
``<dir>/<process name>-<pid>.prof`` when it exits cleanly; the report then lists, per role,
the functions with the most own time. ``HERON_SPARK_PROFILE_ONLY=text`` limits profiling to
the processes whose name contains ``text`` (``hs-count``, ``hs-stmgr``), so the others run
at full speed.
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from pathlib import Path
from types import FrameType

PROFILE_DIR_ENV = "HERON_SPARK_PROFILE_DIR"
PROFILE_INTERVAL_ENV = "HERON_SPARK_PROFILE_INTERVAL_MS"
PROFILE_MODE_ENV = "HERON_SPARK_PROFILE_MODE"
PROFILE_ONLY_ENV = "HERON_SPARK_PROFILE_ONLY"  # profile only processes whose name has this
_WRITE_EVERY_SECS = 2.0


def start_if_asked(name: str) -> bool:
    """Start the sampler thread when ``HERON_SPARK_PROFILE_DIR`` is set; return whether it did."""
    folder = os.environ.get(PROFILE_DIR_ENV)
    if not folder or os.environ.get(PROFILE_ONLY_ENV, "") not in name:
        return False
    Path(folder).mkdir(parents=True, exist_ok=True)
    if os.environ.get(PROFILE_MODE_ENV) == "cprofile":
        import atexit
        import cProfile

        profiler = cProfile.Profile(time.thread_time)  # CPU time: waits cost nothing
        atexit.register(lambda: profiler.dump_stats(Path(folder) / f"{name}-{os.getpid()}.prof"))
        profiler.enable()
        return True
    interval = float(os.environ.get(PROFILE_INTERVAL_ENV, "10")) / 1000.0
    path = Path(folder) / f"{name}-{os.getpid()}.folded"
    threading.Thread(target=_sample, args=(path, interval), name="profiler",
                     daemon=True).start()
    return True


def _sample(path: Path, interval: float) -> None:
    """Sample every thread's stack each interval, weighted by CPU time.

    Charge every thread's CPU time since the last sample to its current stack: stacks of
    threads that only wait get (almost) nothing.
    """
    me = threading.get_ident()
    weights: dict[str, float] = collections.defaultdict(float)  # folded stack -> CPU s
    labels: dict = {}  # code object -> "name (file:line)"
    last_cpu: dict[int, float] = {}
    next_write = time.monotonic() + _WRITE_EVERY_SECS
    while True:
        time.sleep(interval)
        names = {t.ident: t.name for t in threading.enumerate()}
        frame: FrameType | None
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            try:
                cpu = time.clock_gettime(time.pthread_getcpuclockid(ident))
            except (OSError, OverflowError):
                continue
            spent, last_cpu[ident] = cpu - last_cpu.get(ident, cpu), cpu
            if spent <= 0.0:
                continue
            stack = []
            while frame is not None:
                code = frame.f_code
                label = labels.get(code)
                if label is None:
                    label = labels[code] = (f"{code.co_name} "
                                            f"({Path(code.co_filename).name}:{code.co_firstlineno})")
                stack.append(label)
                frame = frame.f_back
            weights[";".join([names.get(ident, str(ident)), *reversed(stack)])] += spent
        if time.monotonic() >= next_write:
            _write(path, weights)
            next_write = time.monotonic() + _WRITE_EVERY_SECS


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process, by thread name."""
    ticks = os.sysconf("SC_CLK_TCK")
    by_tid = {t.native_id: t.name for t in threading.enumerate()}
    cpu: dict[str, float] = collections.defaultdict(float)
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = by_tid.get(int(task.name), f"tid-{task.name}")
        cpu[name] += (int(fields[11]) + int(fields[12])) / ticks
    return cpu


def _write(path: Path, counts: dict[str, float]) -> None:
    cpu = " ".join(f"{name.replace(' ', '_')}={secs:.2f}" for name, secs in
                   sorted(_thread_cpu().items()))
    lines = [f"# cpu {cpu}"] + [f"{stack} {secs:.6f}" for stack, secs in
                                   sorted(counts.items(), key=lambda item: item[1], reverse=True)]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)


def report(folder: Path, top: int = 12) -> str:
    """Summarise the folded files of ``folder`` per process role (see the module docstring)."""
    roles: dict[str, dict] = {}
    for path in sorted(folder.glob("*.folded")):
        role = path.stem.rsplit("-", 1)[0]
        role = role.rsplit("-", 1)[0] if role.startswith("hs-") and role[-1].isdigit() else role
        data = roles.setdefault(role, {"procs": 0, "cpu": collections.Counter(),
                                       "self": collections.Counter(), "samples": 0})
        data["procs"] += 1
        for line in path.read_text().splitlines():
            if line.startswith("# cpu "):
                for item in line[6:].split():
                    name, _, secs = item.rpartition("=")
                    data["cpu"][name] += float(secs)
                continue
            stack, _, secs = line.rpartition(" ")
            if not stack:
                continue
            frames = stack.split(";")
            data["samples"] += float(secs)
            data["self"][f"{frames[0]}: {frames[-1]}"] += float(secs)
    out = _report_cprofile(folder, top)
    for role, data in sorted(roles.items()):
        total = sum(data["cpu"].values())
        out.append(f"== {role} ({data['procs']} processes): {total:.1f} CPU s; by thread: "
                   + ", ".join(f"{name} {secs:.1f}" for name, secs in data["cpu"].most_common(6)))
        for where, secs in data["self"].most_common(top):
            out.append(f"  {100.0 * secs / max(data['samples'], 1e-9):5.1f}%  {where}")
    return "\n".join(out)


def _report_cprofile(folder: Path, top: int) -> list[str]:
    import pstats

    roles: dict[str, list[Path]] = collections.defaultdict(list)
    for path in sorted(folder.glob("*.prof")):
        roles[path.stem.rsplit("-", 1)[0]].append(path)
    out = []
    for role, paths in sorted(roles.items()):
        stats = pstats.Stats(*map(str, paths))
        total = stats.total_tt  # type: ignore[attr-defined]  # set by pstats, absent from typeshed
        out.append(f"== {role} ({len(paths)} processes, cProfile): {total:.2f} s profiled")
        entries = stats.stats.items()  # type: ignore[attr-defined]  # as total_tt
        rows = sorted(entries, key=lambda item: -item[1][2])[:top]
        for (file, line, func), (_, calls, own, cumulative, _) in rows:
            out.append(f"  {100.0 * own / max(total, 1e-9):5.1f}%  own {own:6.2f} s  "
                       f"cum {cumulative:6.2f} s  {calls:>9} calls  {func} "
                       f"({Path(file).name}:{line})")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        msg = "usage: python -m heron_spark._profiling DIR"
        raise SystemExit(msg)
    print(report(Path(sys.argv[1])))
