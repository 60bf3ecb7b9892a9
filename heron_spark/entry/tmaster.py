"""``python -m heron_spark.entry.tmaster``: the TMaster as a child of container 0.

With ``heron.tmaster.placement`` container (the default under Spark Connect) the TMaster runs
here, in container 0's barrier task, as Heron runs its TMaster in container 0. It is built
from container 0's folder (plan, packing plan, config, secret) and the state manager (the
topology id, and for a resumed generation its paused state and committed checkpoint), claims
the TMaster location in the state manager with its generation (the stmgrs and metrics
managers of that generation wait for it there), and serves until its container stops it
(SIGTERM, once the stmgrs exited). To replace every container (a stmgr stayed away), it exits
with ``ExitCode.RECOVER``: its container fails the barrier task and the submitter resubmits
the stage as the next generation, whose TMaster resumes from the state manager.

The tracker (HTTP API and UI, ``heron.tracker.port``: -1 none, 0 any free port) runs in this
process beside the TMaster, on the same host (the executor's address), started here
(``tracker.service.start_beside_tmaster``); its port and URL go into the TMaster's claim with
the generation, so a handle and ``heron-spark ui`` find the current generation's tracker. A
thread rather than a child of its own: it lives and dies with the TMaster whose location
record carries its URL, and needs no supervision, ready file or argv of its own.

If container 0's task ends while the topology runs (Spark killed the barrier task: the stage
was cancelled, or, under Spark Connect, the server abandoned it after its client went away for
``spark.connect.execute.manager.detachedTimeout``; or its executor was lost; or the container
failed), the TMaster hears it (SIGTERM: from its supervisor, or as its parent-death signal)
and, unless the topology had ended or an update stopped it, stores the execution state KILLED
with that reason before it exits (FAILED with the reason when it asks to replace every
container). It still holds its claim then, so no newer generation has written. A submitter
that is still there resubmits the stage; the next generation's TMaster takes over from that
record (its paused state) and replaces it when it starts. With no submitter left, the record
is the last word: the topology is stopped and says why.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from heron_spark import _process
from heron_spark.contract import execution_state, layout
from heron_spark.contract.child_args import TMasterArgs
from heron_spark.contract.exit_codes import ExitCode
from heron_spark.contract.topology_view import TMasterLocation

log = logging.getLogger("heron_spark.tmaster")


def main(argv: list[str] | None = None) -> int:
    """Run the TMaster of container 0 from its command line (``TMasterArgs``)."""
    args = TMasterArgs.from_argv(argv)
    stop = threading.Event()

    def on_sigterm(signum, frame) -> None:  # the supervisor's stop, or the parent-death signal
        stop.set()

    signal.signal(signal.SIGTERM, on_sigterm)
    # The parent's death (the barrier task's Python worker, SIGKILLed by Spark) is a SIGTERM
    # here, not a SIGKILL: time to store why the topology stops.
    _process.become_child("hs-tmaster", on_parent_death=stop.set)
    from heron_spark.container.files import ContainerFiles

    files = ContainerFiles(args.workdir)
    _process.setup_logging(files.log(layout.TMASTER))
    try:
        return _serve(args, files, stop)
    except Exception:  # noqa: BLE001 - log why the TMaster died, then exit non-zero
        log.exception("TMaster failed")
        return ExitCode.FAILED


def _serve(args: TMasterArgs, files, stop: threading.Event) -> int:
    from heron_spark.statemgr import open_state_manager
    from heron_spark.tmaster.master import TMaster
    from heron_spark.tracker.service import start_beside_tmaster

    config = files.load_config()
    view = files.load_plan()
    name = view.logical.name
    statemgr = open_state_manager(config.statemgr)
    recover: list[str] = []
    tracker = None
    started = time.time()
    try:
        stored = statemgr.get_topology(name)
        topology_id = stored.id if stored is not None else name
        prior = statemgr.get_execution_state(name)
        # The last generation's record: live, or KILLED by its TMaster when container 0's task
        # died under it; either way this generation takes over from it (its paused state).
        resumed = prior is not None and prior.id == topology_id \
            and prior.generation < args.generation
        committed = statemgr.get_committed_checkpoint(name) or {}
        secret = files.load_secret()
        tls = files.load_tls()
        tmaster = TMaster.from_system(
            view, statemgr, secret, args.host, topology_id, args.generation, config,
            int(committed.get("id", 0)),
            prior.paused if resumed and prior is not None else bool(args.deactivated),
            _Submitter(recover, stop, lambda parallelism: _stop_for_update(
                tmaster, parallelism)), tls=tls)
        if prior is not None and prior.id == topology_id:  # the submitter wrote it
            tmaster.submission = execution_state.as_dict(prior)["submission"]
        material = files.load_tls_material()
        location = TMasterLocation(host=args.host, port=tmaster.port, pid=os.getpid(),
                                   generation=args.generation, secret=secret,
                                   control_tls="" if material is None else material.to_json())
        if config.tracker_port >= 0:  # TLS on: HTTPS with container 0's certificate
            tracker, tmaster.login_link = start_beside_tmaster(
                config.statemgr, args.host, config.tracker_port,
                max_connections=config.tracker_max_connections,
                idle_timeout_secs=config.tracker_idle_timeout_secs,
                tls=material)
            tmaster.tracker_url = tracker.url
            location = dataclasses.replace(location, tracker_port=tracker.server_address[1],
                                           tracker_url=tracker.url)
        tmaster.unqueued_update_fix = (
            "its TMaster runs in container 0 and only the process that submitted it can start "
            "the new containers: call handle.update(...) there (or submit it with "
            "heron.tmaster.placement driver)")
        _claim(statemgr, name, location, config.startup_timeout_secs)
        tmaster.start()
        _process.write_json_atomic(files.ready(layout.TMASTER),
                                   {"pid": os.getpid(), "host": args.host, "port": tmaster.port,
                                    "generation": args.generation})
        log.info("TMaster of %s (generation %d) listening on %s:%d; tracker %s", name,
                 args.generation, args.host, tmaster.port, tmaster.tracker_url)
        stop.wait()
        if tmaster.state.ended and not tmaster.await_final_metrics(
                min(5.0, config.kill_grace_secs / 2)):
            log.warning("TMaster of %s: a metrics manager did not hang up; its last values "
                        "may be missing from the final metrics", name)
        tmaster.close()
        if recover:
            log.error("replacing every container: %s", recover[0])
            _record_stop(tmaster, statemgr, "FAILED", f"replacing every container: "
                         f"{recover[0]}; {_NOT_RESUBMITTED}")
            _fail_a_stopped_container(started)
            return ExitCode.RECOVER
        log.info("TMaster of %s stopping (state %s)", name, tmaster.state.value)
        _record_stop(tmaster, statemgr, "KILLED", task_ended_detail(args.generation))
        _process.write_json_atomic(files.tmaster_final, _final(tmaster))
        return ExitCode.OK
    finally:
        if tracker is not None:
            tracker.shutdown()  # and forget its location
        statemgr.close()  # releases the claim (after any record above: no newer TMaster yet)


_NOT_RESUBMITTED = "no submitter resubmitted the stage"


def task_ended_detail(generation: int) -> str:
    """Return why a topology stopped when container 0's task ended under its TMaster."""
    return (f"container 0's Spark task (generation {generation}) ended while the topology "
            f"ran and {_NOT_RESUBMITTED}: the Spark job was cancelled (under Spark Connect: "
            f"abandoned by the server after its client was gone for "
            f"spark.connect.execute.manager.detachedTimeout), its executor was lost, or the "
            f"container failed")


def _record_stop(tmaster, statemgr, state: str, detail: str) -> None:
    """Store the topology as ``state`` with ``detail``, unless it ended or an update stopped it.

    Called once the TMaster stopped, still holding its claim: no newer generation's TMaster
    has written yet. A submitter that is still there resubmits the stage, and that
    generation's TMaster replaces this record when it starts.
    """
    if tmaster.state.ended or tmaster.updating:
        return  # its end (or the update) is stored already
    log.error("TMaster of %s: %s", tmaster.name, detail)
    status = tmaster.status().replace(state=state, detail=detail, ended_at=time.time())
    statemgr.set_execution_state(tmaster.name, status.record())


class _Submitter:
    """Container 0's TMaster's scheduler: the submitter's barrier stage, reached by exiting.

    ``recover`` records the reason and stops this process (it exits RECOVER and the submitter
    resubmits the stage); ``update`` stops this generation (``_stop_for_update``).
    """

    def __init__(self, recoveries: list, stop: threading.Event,
                 update: Callable[[dict[str, int]], int]) -> None:
        self._recoveries, self._stop, self._update = recoveries, stop, update

    def recover(self, reason: str) -> None:
        """Exit RECOVER: the submitter replaces every container."""
        self._recoveries.append(reason)
        self._stop.set()

    def update(self, parallelism: dict[str, int]) -> int:
        """Stop this generation for the submitter's queued update; return the next."""
        return self._update(parallelism)


# A container whose heartbeat is this old is stopped, not slow (it beats every 0.25 s).
_STOPPED_CONTAINER_SECS = 2.0


def _fail_a_stopped_container(started: float) -> None:
    """Kill this TMaster's container if it stopped beating, so its barrier task fails.

    Exiting with ``ExitCode.RECOVER`` fails the task through the container's supervisor; a
    stopped container (SIGSTOP, a frozen host process) would never see it, and the stage would
    run on with nobody to replace it (the driver's TMaster cancels the stage instead). The
    result is the same either way: the stage fails and is resubmitted.
    """
    beat = os.environ.get(_process.PARENT_HEARTBEAT_ENV)
    if not beat:
        return
    age = _process.heartbeat_age_secs(Path(beat), started)
    if age > _STOPPED_CONTAINER_SECS:
        log.error("container stopped (no heartbeat for %.1f s): killing it (pid %d) so its "
                  "barrier task fails", age, os.getppid())
        try:
            os.kill(os.getppid(), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _stop_for_update(tmaster, parallelism: dict[str, int]) -> int:
    """Stop this generation for an update the submitter checked and queued; return the next.

    Only a request marked ``queued`` gets here (``TMaster.unqueued_update_fix`` refuses the
    others, such as ``heron-spark update``: nobody would start the new containers).

    The submitter (``scheduler.run.TopologyRun.update``) validated the new parallelism, checked the
    slots and queued the new containers on its barrier stage before asking; once these
    containers are gone it runs the next generation, whose TMaster resumes from the state
    manager with the new plan.
    """
    generation = tmaster.generation + 1
    tmaster.stop_generation(f"updating to {dict(parallelism)}: generation {generation}")
    return generation


def _final(tmaster) -> dict:
    """Return what the submitter learns when the stage ends.

    Status, failure, metrics and the last physical plan (a handle reads it after the end too).
    """
    return tmaster.handle_view().as_dict()


def _claim(statemgr, name: str, location: TMasterLocation, timeout_secs: float) -> None:
    """Claim the TMaster location, waiting for the last generation's TMaster to let go."""
    from heron_spark.errors import TopologyStateError

    deadline = time.monotonic() + timeout_secs
    while True:
        try:
            statemgr.claim_tmaster(name, location.as_dict())
            return
        except TopologyStateError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
