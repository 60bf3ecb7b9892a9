"""The container's supervisor: starts every child, restarts any that dies or stalls.

Children: the metrics manager, the stmgr, and one process per instance; in container 0 with
``heron.tmaster.placement`` container, the TMaster too (started first; the stmgrs find it
through the state manager). The supervisor never
waits on a child: one poll loop looks at every child each ``_POLL_SECS`` (at heartbeats each
``_STALL_CHECK_SECS``) and

- restarts a child that exited, after a backoff (``heron.restart.backoff.secs``, doubled per
  consecutive death up to ``heron.restart.backoff.max.secs``), whether it died before or after
  it was ready;
- kills (SIGKILL) a child whose heartbeat is older than ``heron.stall.timeout.secs`` (stopped,
  wedged, or stuck in user code) and then restarts it like a dead one;
- when the stmgr dies, kills its instances (they lost their connections) and restarts them
  once the new stmgr is ready. More than ``heron.stmgr.restart.max`` stmgr deaths within
  ``heron.restart.window.secs`` raise, failing the barrier task (the driver resubmits the
  stage). The TMaster bounds instance restarts (the stmgr reports each failure);
- when the TMaster child exits (crashed, or ``ExitCode.RECOVER``: it wants every container
  replaced) while the topology runs, raises: the barrier task fails and the submitter
  resubmits the stage, whose new TMaster resumes from the state manager (the stmgrs of every
  container lost it anyway and exit, so restarting it alone would serve nobody);
- when the stmgr exits with ``ExitCode.RESTART`` (the TMaster asked for a restart of the
  container, ``heron restart``), restarts every child at once: the metrics manager now, the
  stmgr now, the instances once it is ready. Such an exit is not counted as a death.

The supervisor's own heartbeat is touched by a separate thread; its children kill it if it
stalls (see ``_process``). Runs on a Spark executor, in the barrier task's thread.
"""

from __future__ import annotations

import collections
import json
import logging
import subprocess
import threading
import time
from pathlib import Path

from heron_spark import _process
from heron_spark._failure_window import FailureWindow
from heron_spark.config import SystemConfig
from heron_spark.container.files import ContainerFiles
from heron_spark.contract.child_args import (ChildArgs, InstanceArgs, MetricsManagerArgs,
                                             StmgrArgs, TMasterArgs)
from heron_spark.contract.exit_codes import STMGR_FINAL, ExitCode, describe
from heron_spark.contract.layout import (CONTAINER, METRICSMGR, STMGR, TMASTER, child_task,
                                         task_child)

log = logging.getLogger(__name__)
_POLL_SECS = 0.05
# Heartbeats are looked at this often, not every poll: children touch theirs every
# ``_process.HEARTBEAT_INTERVAL_SECS`` and a stall takes ``heron.stall.timeout.secs`` (10 s) to
# count, so reading every child's heartbeat (and the stmgr's stopping file) 20 times a second
# only cost CPU while tuples flow.
_STALL_CHECK_SECS = _process.HEARTBEAT_INTERVAL_SECS


class _Child:
    """One supervised process: what to run, the live process, and its restart state."""

    def __init__(self, name: str, log_path: Path) -> None:
        self.name = name
        self.task = child_task(name)  # None: the stmgr or the metrics manager
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.started_wall = 0.0
        self.started = 0.0
        self.restart_at: float | None = None
        self.consecutive = 0  # deaths in a row without a long run: drives the backoff
        self.restarts = 0
        self.ready: dict | None = None  # the ready file's content, once written

    @property
    def running(self) -> subprocess.Popen | None:
        """The process while it runs (no exit code collected yet), else None."""
        proc = self.proc
        return proc if proc is not None and proc.returncode is None else None

    @property
    def alive(self) -> bool:
        return self.running is not None


class Supervisor:
    """See the module docstring. ``run`` returns the stmgr's final exit code."""

    def __init__(self, files: ContainerFiles, config: SystemConfig, index: int, host: str,
                 tmaster: str, generation: int, instances: dict[int, str],
                 tmaster_args: TMasterArgs | None = None) -> None:
        self.files, self.config, self.index = files, config, index
        self.host, self.generation = host, generation
        self.tmaster = tmaster
        self.tmaster_args = tmaster_args  # container 0 hosts the TMaster (placement container)
        self.children: dict[str, _Child] = {
            METRICSMGR: _Child(METRICSMGR, files.log(METRICSMGR)),
            STMGR: _Child(STMGR, files.log(STMGR))}
        self.instance_components = instances  # task id -> component
        for task, component in instances.items():
            self.children[task_child(task)] = _Child(task_child(task),
                                                     files.instance_log(component, task))
        if tmaster_args is not None:
            self.children[TMASTER] = _Child(TMASTER, files.log(TMASTER))
        self._stmgr_deaths = FailureWindow(config.restart_window_secs)
        self._instances_started_for: int | None = None  # pid of the stmgr they dialled
        self.stalls: collections.Counter = collections.Counter()
        self._stop = threading.Event()
        self._next_stall_check = 0.0

    # ---- the loop ------------------------------------------------------------------------
    def run(self) -> int:
        """Supervise until the stmgr exits for good; return its exit code.

        The container's heartbeat goes on until ``stop_all`` has stopped every child.
        """
        threading.Thread(target=self._beat, name="container-heartbeat", daemon=True).start()
        if TMASTER in self.children:
            self._spawn(self.children[TMASTER])
        self._spawn(self.children[METRICSMGR])
        self._spawn(self.children[STMGR])
        while True:
            code = self._tend()
            if code is not None:
                return code
            time.sleep(_POLL_SECS)

    def _beat(self) -> None:
        path = self.files.heartbeat(CONTAINER)
        while not self._stop.is_set():
            _process.touch(path)
            self._stop.wait(_process.HEARTBEAT_INTERVAL_SECS)

    def _tend(self) -> int | None:
        now = time.monotonic()
        stmgr = self.children[STMGR]
        check_stalls = now >= self._next_stall_check
        if check_stalls:
            self._next_stall_check = now + _STALL_CHECK_SECS
        for child in self.children.values():
            proc = child.running
            if proc is not None and proc.poll() is not None:
                code = self._on_exit(child, proc.returncode, now)
                if code is not None:
                    return code
            elif proc is not None:
                self._check_ready(child, proc)
                if check_stalls and not self._stmgr_stopping():
                    self._check_stall(child, proc)
            elif child.restart_at is not None and now >= child.restart_at \
                    and not self._stmgr_stopping():
                if child.task is None or self._stmgr_ready():
                    self._spawn(child)
        stmgr_proc = stmgr.running
        if stmgr.ready is not None and stmgr_proc is not None \
                and self._instances_started_for != stmgr_proc.pid:
            self._instances_started_for = stmgr_proc.pid
            for task in self.instance_components:
                child = self.children[task_child(task)]
                if not child.alive:
                    self._spawn(child)
        return None

    def _stmgr_stopping(self) -> bool:
        """Return True once the live stmgr has announced it is shutting down for good."""
        stmgr = self.children[STMGR]
        if stmgr.proc is None:
            return False
        try:
            data = json.loads(self.files.stmgr_stopping.read_text())
        except (OSError, ValueError):
            return False
        return data.get("pid") == stmgr.proc.pid

    def _stmgr_ready(self) -> bool:
        stmgr = self.children[STMGR]
        proc = stmgr.running
        return proc is not None and stmgr.ready is not None \
            and self._instances_started_for == proc.pid

    # ---- children ------------------------------------------------------------------------
    def _args(self, child: _Child) -> ChildArgs:
        workdir = self.files.root
        if child.name == TMASTER and self.tmaster_args is not None:
            return self.tmaster_args
        if child.name == METRICSMGR:
            return MetricsManagerArgs(workdir, self.index, self.tmaster)
        if child.name == STMGR:
            return StmgrArgs(workdir, self.index, self.tmaster, self.host, self.generation)
        ready = self.children[STMGR].ready
        if child.task is None or ready is None:  # _tend starts instances once the stmgr is ready
            msg = f"container {self.index}: cannot start {child.name} before the stmgr is ready"
            raise RuntimeError(msg)
        return InstanceArgs(workdir, self.instance_components[child.task], child.task,
                            ready["local_address"])

    def _spawn(self, child: _Child) -> None:
        args = self._args(child)
        self.files.ready(child.name).unlink(missing_ok=True)
        self.files.stall_note(child.name).unlink(missing_ok=True)
        child.ready = None
        child.restart_at = None
        child.started_wall = time.time()
        child.started = time.monotonic()
        child.proc = _process.spawn(args.MODULE, args.to_argv(), child.log_path,
                                    self.files.root, heartbeat=self.files.heartbeat(child.name),
                                    parent_heartbeat=self.files.heartbeat(CONTAINER),
                                    stall_secs=self.config.stall_timeout_secs)

    def _check_ready(self, child: _Child, proc: subprocess.Popen) -> None:
        if child.ready is not None or child.task is not None:
            return
        path = self.files.ready(child.name)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = None
        if data is not None and data.get("pid") == proc.pid:
            child.ready = data
        elif time.monotonic() - child.started > self.config.startup_timeout_secs:
            self._kill(child, proc, f"not ready after {self.config.startup_timeout_secs:g} s")

    def _check_stall(self, child: _Child, proc: subprocess.Popen) -> None:
        # Until its first heartbeat a child is still starting Python: allow it more time.
        beat = self.files.heartbeat(child.name)
        touched = _touched_since(beat, child.started_wall)
        limit = self.config.stall_timeout_secs + (0 if touched else 10.0)
        if _process.heartbeat_age_secs(beat, child.started_wall) > limit:
            reason = (f"{child.name} (pid {proc.pid}) stalled: no heartbeat for "
                      f"{limit:g} s (heron.stall.timeout.secs)")
            self.stalls[child.name] += 1
            self._kill(child, proc, reason)

    def _kill(self, child: _Child, proc: subprocess.Popen, reason: str) -> None:
        log.error("container %d: killing %s", self.index, reason)
        self.files.stall_note(child.name).write_text(reason)
        try:
            proc.kill()
        except ProcessLookupError:
            pass

    def _on_exit(self, child: _Child, code: int, now: float) -> int | None:
        if child.name == TMASTER:
            if code == ExitCode.OK and self._stmgr_stopping():
                return None
            why = "it asked to replace every container" if code == ExitCode.RECOVER \
                else f"exited with {describe(code)}"
            msg = (f"container {self.index}: the TMaster {why}; the stage is resubmitted "
                   f"(see {child.log_path})")
            raise RuntimeError(msg)
        if child.name == STMGR and code in STMGR_FINAL:
            _process.wait_all([proc for c in self.children.values()
                               if c.task is not None and (proc := c.running) is not None],
                              self.config.kill_grace_secs)
            return code
        if child.task is not None and code == ExitCode.OK:
            return None  # shut down with the topology; the stmgr's exit ends the container
        if child.name != STMGR and self._stmgr_stopping():
            log.info("container %d: %s exited with %s while the stmgr shuts down", self.index,
                     child.name, describe(code))
            return None
        if child.name == STMGR and code == ExitCode.RESTART:
            self._restart_all(now)
            return None
        if child.name == STMGR:
            deaths = self._stmgr_deaths.record()
            if deaths > self.config.stmgr_restart_max:
                msg = (
                    f"container {self.index}: the stmgr died {deaths} times within "
                    f"{self.config.restart_window_secs:g} s (last exit code {code}); see "
                    f"{child.log_path}"
                )
                raise RuntimeError(msg)
            self._instances_started_for = None
            for task in self.instance_components:  # their stmgr is gone: start them afresh
                inst = self.children[task_child(task)]
                if (proc := inst.running) is not None:
                    _kill_now(proc)
                inst.restart_at = None
        elif child.task is not None and code == ExitCode.STMGR_LOST \
                and (_exited(self.children[STMGR].proc) or not self._stmgr_ready()):
            return None  # its stmgr is gone too: the stmgr's restart (or exit) decides
        if child.task is not None and self.children[STMGR].alive is False:
            return None
        self._schedule_restart(child, code, now)
        return None

    def _restart_all(self, now: float) -> None:
        """Restart every process of the container, as asked (not a failure: no backoff)."""
        log.warning("container %d: restarting the stmgr, the metrics manager and every instance "
                    "as asked", self.index)
        self._instances_started_for = None
        for task in self.instance_components:
            inst = self.children[task_child(task)]
            if (proc := inst.running) is not None:
                _kill_now(proc)
            inst.restart_at = None
            inst.restarts += 1
        metrics = self.children[METRICSMGR]
        if (proc := metrics.running) is not None:
            _kill_now(proc)  # a restart, as Heron's: no grace (its last interval is lost)
        metrics.restarts += 1
        self._spawn(metrics)
        stmgr = self.children[STMGR]
        stmgr.restarts += 1
        stmgr.restart_at = now  # spawned by the next turn of the loop

    def _schedule_restart(self, child: _Child, code: int, now: float) -> None:
        lived = now - child.started
        child.consecutive = 1 if lived > 2 * self.config.restart_backoff_max_secs \
            else child.consecutive + 1
        delay = min(self.config.restart_backoff_secs * 2 ** (child.consecutive - 1),
                    self.config.restart_backoff_max_secs)
        child.restarts += 1
        child.restart_at = now + delay
        log.warning("container %d: %s exited with %s; restart %d in %.2f s", self.index,
                    child.name, describe(code), child.restarts, delay)

    def summary(self) -> dict:
        """Exit codes and restart counts, for the driver."""
        tasks = {t: self.children[task_child(t)] for t in self.instance_components}
        return {"instance_exits": {t: c.proc.returncode if c.proc else None
                                   for t, c in tasks.items()},
                "instance_restarts": {t: c.restarts for t, c in tasks.items() if c.restarts},
                "stmgr_restarts": self.children[STMGR].restarts,
                "metricsmgr_restarts": self.children[METRICSMGR].restarts,
                "stalls": dict(self.stalls)}

    def stop_all(self) -> None:
        """Stop every child still running, then the container's heartbeat.

        Instances and the stmgr stop first, then the metrics manager, the TMaster last.
        """
        try:
            procs = [proc for name, c in self.children.items()
                     if name not in (METRICSMGR, TMASTER) and (proc := c.running) is not None]
            _process.terminate(procs, self.config.kill_grace_secs)
            for last in (METRICSMGR, TMASTER):  # the final metrics, then the final state
                child = self.children.get(last)
                if child is not None and (proc := child.running) is not None:
                    _process.terminate([proc], self.config.kill_grace_secs)
        finally:
            self._stop.set()


def _touched_since(path: Path, since: float) -> bool:
    try:
        return path.stat().st_mtime > since
    except OSError:
        return False


def _exited(proc: subprocess.Popen | None) -> bool:
    """Return whether ``proc`` has exited (polling it), or never started."""
    return proc is None or proc.poll() is not None


def _kill_now(proc: subprocess.Popen) -> None:
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


