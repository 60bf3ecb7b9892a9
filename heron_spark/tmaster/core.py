"""The Topology Master's rules, without sockets: events and a clock in, frames and saves out.

``TMasterCore`` is a single-threaded state machine. Its shells feed it events and it answers
through a ``TMasterTransport``:

- the Spark shell (``master.TMaster``: a listener, one connection per stmgr, metrics manager
  or control client, loops for checkpoints and liveness) calls it under its one lock and sends
  what it asks on the matching connections, and stores what it saves through the state
  manager;
- the in-process runner (``inprocess.runner``) passes its ``StmgrCore``s' TMaster-bound frames
  in and hands the frames it sends to those cores.

Events: a stmgr's message (``on_stmgr_message``: register, heartbeat, drained, instance
failed, checkpoint stored / restored, a file response), a stmgr's connection closed, a metrics
snapshot, a management verb (``set_paused``, ``restart``, ``check_update``,
``stop_generation``, ``begin_generation``, ``kill``, ``fail``), an executor lost, and the
clock: ``tick`` (checkpoints) and ``check_liveness`` (heartbeats). Every event takes ``now``,
seconds of a monotonic clock; the core reads no clock. Times it shows (``started_at``, the
heartbeats in ``status``...) are ``now + wall_offset_secs``: seconds since the epoch when the
shell passes ``time.time() - time.monotonic()``.

What it decides:
- the physical plan, once every stmgr of the generation registered, broadcast to all; again
  when one registers at a new address; sent to one that restarted at its old address;
- the end of the topology: FINISHED once every task drained, FAILED once a task failed more
  than ``restart_max`` times within ``restart_window_secs``, KILLED or FAILED when asked;
  the shutdown (with its reason) goes to every stmgr;
- liveness (``liveness.StmgrLiveness``): a stmgr silent past the heartbeat timeout is
  reported dead (it keeps its connection: cut off by a partition, it heartbeats again once
  healed); one silent as long again is dropped and the shell restarts the stage (``recover``);
- effectively once (``checkpoints.CheckpointCoordinator``): checkpoints started on ``tick``,
  committed once every task saved its state, rolled back on any failure;
- management: deactivate / activate, restart of containers, the updating state between a
  rescale's stop of the old generation and the new plan;
- metrics history (``metrics_cache``) and the exceptions instances died of.

Lifecycle: ``TopologyState`` (see its docstring); ``status`` summarises everything.
"""

from __future__ import annotations

import collections
import enum
import logging
from typing import Protocol

from heron_spark._failure_window import FailureWindow
from heron_spark.contract import execution_state
from heron_spark.contract.topology_view import TopologyStatus
from heron_spark.errors import TopologyStateError, TopologyValueError
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, physical_plan_pb2, tmaster_pb2
from heron_spark.tmaster.checkpoints import CheckpointCoordinator
from heron_spark.tmaster.exception_log import ExceptionLog
from heron_spark.tmaster.liveness import StmgrLiveness
from heron_spark.tmaster.metrics_cache import MetricsCache
from heron_spark.wire import frames

log = logging.getLogger(__name__)


class TopologyState(enum.Enum):
    """Lifecycle of a topology as the TMaster sees it (``TMasterCore.state``).

    The changes:

    - STARTING -> RUNNING | PAUSED: the first physical plan (PAUSED when deactivated);
    - RUNNING <-> PAUSED: deactivate / activate;
    - STARTING | RUNNING | PAUSED -> FINISHED | KILLED | FAILED: every task drained, a kill,
      a task failing too often, the Spark stage lost for good.

    FINISHED, KILLED and FAILED are final.
    """

    STARTING = "STARTING"      # waiting for every stmgr to register
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"          # deactivated: spouts are not asked for tuples (Heron's PAUSED)
    FINISHED = "FINISHED"      # every spout exhausted and every task drained
    KILLED = "KILLED"
    FAILED = "FAILED"

    @property
    def ended(self) -> bool:
        """Tell whether this is a final state: FINISHED, KILLED or FAILED."""
        return self in (TopologyState.FINISHED, TopologyState.KILLED, TopologyState.FAILED)

    @property
    def processing(self) -> bool:
        """Tell whether the containers run the physical plan (RUNNING or PAUSED)."""
        return self in (TopologyState.RUNNING, TopologyState.PAUSED)


_FINAL = frozenset({TopologyState.FINISHED, TopologyState.KILLED, TopologyState.FAILED})
_NEXT_STATES = {
    TopologyState.STARTING: frozenset({TopologyState.RUNNING, TopologyState.PAUSED, *_FINAL}),
    TopologyState.RUNNING: frozenset({TopologyState.PAUSED, *_FINAL}),
    TopologyState.PAUSED: frozenset({TopologyState.RUNNING, *_FINAL}),
    TopologyState.FINISHED: frozenset(),
    TopologyState.KILLED: frozenset(),
    TopologyState.FAILED: frozenset(),
}
_REASON = {TopologyState.FINISHED: tmaster_pb2.FINISHED, TopologyState.KILLED: tmaster_pb2.KILLED,
           TopologyState.FAILED: tmaster_pb2.FAILED}


class TMasterTransport(Protocol):
    """What the core asks of its shell. Every call returns at once."""

    def to_stmgr(self, index: int, frame: bytes) -> None:
        """Queue ``frame`` for the stmgr of container ``index`` (dropped if not connected)."""

    def to_stmgrs(self, frame: bytes) -> None:
        """Queue ``frame`` for every connected stmgr."""

    def drop_stmgr(self, index: int) -> None:
        """Close the connection of the stmgr of container ``index``: it was found dead."""

    def recover(self, reason: str) -> None:
        """Restart the stage's containers (their stmgrs are gone); may wait for the event's end."""

    def save_plan(self, plan: physical_plan_pb2.PhysicalPlan) -> None:
        """Store the physical plan (the state manager)."""

    def save_state(self, state: execution_state.ExecutionState) -> None:
        """Store the execution state (the state manager)."""

    def checkpoint_committed(self, checkpoint_id: int, epoch: int, at: float,
                             notice: bytes) -> None:
        """Record checkpoint ``checkpoint_id`` as committed (at ``at``, epoch seconds).

        Once the record is written (never before: a sink commits its output on the notice,
        and a TMaster that restarts must not roll back behind it), send ``notice`` to every
        stmgr; they tell their instances (two-phase components' ``post_save``).
        """

    def file_response(self, response: tmaster_pb2.FileResponse) -> None:
        """Hand a stmgr's answer to a tracker's file request to whoever waits for it."""


def build_physical_plan(name: str, topology_id: str, generation: int, paused: bool,
                        registrations: dict[int, tmaster_pb2.RegisterStmgr],
                        ) -> physical_plan_pb2.PhysicalPlan:
    """Return the physical plan of the stmgrs ``registrations`` (container index -> register)."""
    plan = physical_plan_pb2.PhysicalPlan(
        topology_name=name, topology_id=topology_id, generation=generation,
        state=physical_plan_pb2.PAUSED if paused else physical_plan_pb2.RUNNING)
    for index in sorted(registrations):
        reg = registrations[index]
        plan.stmgrs.add(container_index=index, host=reg.host, data_port=reg.data_port,
                        pid=reg.pid)
        plan.instances.extend(reg.instances)
    return plan


class TMasterCore:
    """See the module docstring. One thread at a time (the shell's lock, or the runner's loop)."""

    def __init__(self, plan: PlanView, topology_id: str, transport: TMasterTransport, *,
                 generation: int = 0, restart_max: int = 5, restart_window_secs: float = 60.0,
                 committed_checkpoint: int = 0, stmgr_heartbeat_timeout_secs: float = 30.0,
                 history: MetricsCache | None = None, exceptions_per_instance: int = 20,
                 deactivated: bool = False, wall_offset_secs: float = 0.0) -> None:
        self.plan = plan
        self.name = plan.logical.name
        self.topology_id = topology_id
        self.io = transport
        self.generation = generation
        self.wall_offset_secs = wall_offset_secs
        self.state = TopologyState.STARTING
        self.detail = ""
        self.failure: tmaster_pb2.InstanceFailed | None = None
        self.physical_plan: physical_plan_pb2.PhysicalPlan | None = None
        self.registrations: dict[int, tmaster_pb2.RegisterStmgr] = {}
        self.heartbeats: dict[int, float] = {}  # container index -> last heartbeat (epoch s)
        self.liveness = StmgrLiveness(stmgr_heartbeat_timeout_secs)
        self.executor_losses: list[dict] = []  # Spark executors lost with containers on them
        # The previous generation's stmgr addresses: a late executor loss still names its host.
        self.previous_hosts: tuple[int, dict[int, str]] = (-1, {})
        self.drained: set[int] = set()
        self.all_tasks = set(plan.task_component)
        self.metrics: dict[tuple[str, int], dict[str, float]] = {}
        self.history = history or MetricsCache()   # per-minute metrics for the views
        self.exceptions = ExceptionLog(exceptions_per_instance)
        self.restart_max = restart_max
        self.restart_window_secs = restart_window_secs
        self.failures: collections.Counter = collections.Counter()  # task id -> failures
        self._recent_failures: dict[int, FailureWindow] = {}
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.paused = deactivated  # deactivated: spouts emit nothing (state PAUSED once running)
        self.updating = False  # between an update's stop of the old generation and the new plan
        self._update_detail = ""
        self._stopped_generation: int | None = None  # the generation an update stopped
        # Heron's execution state metadata (cluster, environ, role, submission_time/_user),
        # set by submit; shown by the tracker.
        self.submission: dict = {}
        self.checkpoints: CheckpointCoordinator | None = None  # effectively once
        if plan.logical.topology_config.effectively_once:
            self.checkpoints = CheckpointCoordinator(
                self.all_tasks, plan.logical.topology_config.checkpoint_interval_secs,
                committed_checkpoint, self._broadcast, self._on_commit)

    def wall(self, now: float) -> float:
        """Return ``now`` (the monotonic clock) as seconds since the epoch."""
        return now + self.wall_offset_secs

    # ---- stmgrs --------------------------------------------------------------------------
    def on_stmgr_message(self, index: int, message: tmaster_pb2.StmgrToTmaster,
                         now: float) -> None:
        """Handle ``message`` from the (current) stmgr of container ``index``."""
        body = message.WhichOneof("body")
        if body == "heartbeat":
            container = message.heartbeat.container_index
            self.heartbeats[container] = self.wall(now)
            if container in self.liveness.dead_since:
                log.warning("topology %s: stmgr of container %d%s heartbeats again (was "
                            "silent, say cut off): alive", self.name, container,
                            self._on_host(container))
            self.liveness.beat(container, now)
        elif body == "register":
            self._on_register(message.register, now)
        elif body == "drained":
            if self.checkpoints is not None and self.checkpoints.restoring:
                return  # from the epoch being rolled back
            self.drained.update(message.drained.task_ids)
            if self.drained >= self.all_tasks and not self.state.ended:
                self._end(TopologyState.FINISHED, "every spout exhausted, every task drained",
                          now)
        elif body == "instance_failed":
            self._on_instance_failed(message.instance_failed, now)
        elif body == "stored" and self.checkpoints is not None:
            self.checkpoints.on_stored(message.stored.task_id, message.stored.checkpoint_id,
                                       now)
        elif body == "restored" and self.checkpoints is not None:
            self.checkpoints.on_restored(message.restored.task_id, message.restored.epoch, now)
        elif body == "file_response":
            self.io.file_response(message.file_response)

    def on_stmgr_closed(self, index: int) -> None:
        """Note that the connection of the current stmgr of container ``index`` closed."""
        if not self.state.ended:
            # Its container restarts it (it registers again), or the Spark stage fails and
            # the driver resubmits it: either way the topology goes on.
            log.warning("stmgr of container %d disconnected; waiting for it to register "
                        "again", index)

    def _on_register(self, register: tmaster_pb2.RegisterStmgr, now: float) -> None:
        index = register.container_index
        if register.generation != self.generation:
            log.warning("ignoring stmgr %d of generation %d (current %d)",
                        index, register.generation, self.generation)
            return
        if self._stopped_generation == self.generation:
            # It (re)started after an update stopped its generation: stop it too.
            self.io.to_stmgr(index, self._updating_frame())
            return
        previous = self.registrations.get(index)
        self.registrations[index] = register
        self.heartbeats[index] = self.wall(now)
        self.liveness.beat(index, now)
        log.info("stmgr %d registered at %s:%d", index, register.host, register.data_port)
        if len(self.registrations) < self.plan.container_count:
            return
        moved = previous is not None and (previous.host, previous.data_port) != \
            (register.host, register.data_port)
        if self.physical_plan is None or moved:
            self._broadcast_plan(now)
        else:  # restarted at its old address: it needs the plan
            self._restore(f"stmgr {index} restarted")
            self.io.to_stmgr(index, frames.control_frame(
                tmaster_pb2.TmasterToStmgr(plan=self.physical_plan)))
        if self.drained and self.physical_plan is not None:
            # Tasks that ended before this stmgr (re)started: it replays their end of stream.
            self.io.to_stmgr(index, frames.control_frame(tmaster_pb2.TmasterToStmgr(
                drained=tmaster_pb2.TaskDrained(task_ids=sorted(self.drained)))))

    def _broadcast_plan(self, now: float) -> None:
        if self.state.ended:
            return
        plan = build_physical_plan(self.name, self.topology_id, self.generation, self.paused,
                                   self.registrations)
        self.physical_plan = plan
        self.io.save_plan(plan)
        self._restore(f"physical plan generation {self.generation}")  # before the plan
        self.io.to_stmgrs(frames.control_frame(tmaster_pb2.TmasterToStmgr(plan=plan)))
        self.updating = False
        if self.state == TopologyState.STARTING:
            self._move(TopologyState.PAUSED if self.paused else TopologyState.RUNNING)
            self.started_at = self.wall(now)
        self._save_state(now)
        log.info("physical plan broadcast to the stmgrs of %d containers",
                 len(self.registrations))

    def _on_instance_failed(self, failed: tmaster_pb2.InstanceFailed, now: float) -> None:
        """Count a task's failure; fail the topology once it fails too often.

        Until then its container restarts it. A ``permanent`` failure (a deterministic
        ``ConnectorError``: a topic that does not exist, a schema change refused, ...) fails
        the topology at once, its error's message as the reason: a restart would repeat it.
        """
        self.failures[failed.task_id] += 1
        register = self.registrations.get(self.plan.task_container.get(failed.task_id, -1))
        self.exceptions.record(failed.task_id, failed.component,
                               register.host if register is not None else "",
                               failed.error, failed.log_path, self.wall(now))
        log.error("task %d of %s failed (%d so far): %s", failed.task_id, failed.component,
                  self.failures[failed.task_id], failed.error.strip().splitlines()[-1:] or "")
        self.failure = failed
        window = self._recent_failures.setdefault(failed.task_id,
                                                  FailureWindow(self.restart_window_secs))
        recent = window.record(now)
        if failed.permanent and not self.state.ended:
            message = failed.error.strip().splitlines()[-1:] or ["(no message)"]
            self._end(TopologyState.FAILED,
                      f"task {failed.task_id} of component {failed.component!r} failed "
                      f"permanently (not restarted): {message[0]}", now)
        elif recent > self.restart_max and not self.state.ended:
            self._end(TopologyState.FAILED,
                      f"task {failed.task_id} of component {failed.component!r} failed "
                      f"{recent} times within {self.restart_window_secs:g} s", now)
        elif self.physical_plan is not None:
            self._restore(f"task {failed.task_id} failed")

    def on_metrics(self, snapshot: metrics_pb2.MetricsSnapshot) -> None:
        """Keep the latest value of each metric of each task, and its per-minute history."""
        for publish in snapshot.publishes:
            values = self.metrics.setdefault((publish.component, publish.task_id), {})
            for metric in publish.metrics:
                values[metric.name] = metric.value
            self.history.add(publish.component, publish.task_id,
                             [(m.name, m.value) for m in publish.metrics],
                             publish.timestamp_ms)

    # ---- generations -----------------------------------------------------------------------
    def begin_generation(self, generation: int, plan: PlanView | None, now: float) -> None:
        """Forget the containers of the failed (or stopped) stage.

        A new stage (``generation``) starts now, on ``plan`` when an update changed it. The
        shell closes the old stage's connections.
        """
        self.previous_hosts = (self.generation, {index: register.host for index, register
                                                 in self.registrations.items()})
        self.generation = generation
        if plan is not None:
            self.plan = plan
            self.all_tasks = set(plan.task_component)
            if self.checkpoints is not None:  # a rescale: the new tasks save and restore
                self.checkpoints.tasks = frozenset(self.all_tasks)
            self.metrics = {key: value for key, value in self.metrics.items()
                            if plan.task_component.get(key[1]) == key[0]}
        self.registrations.clear()
        self.heartbeats.clear()
        self.liveness.reset()
        self.drained.clear()  # every task runs again: bounded spouts replay, bolts re-drain
        self.physical_plan = None
        self._save_state(now)
        log.info("topology %s: containers resubmitted as generation %d", self.name, generation)

    def stop_generation(self, detail: str, now: float) -> None:
        """Tell every stmgr of this generation to shut down for an update.

        The topology does not end; the driver launches the next generation once the
        containers are gone.
        """
        self.updating = True
        self._stopped_generation = self.generation
        self._update_detail = detail
        self.io.to_stmgrs(self._updating_frame())
        self._save_state(now)

    def _updating_frame(self) -> bytes:
        return frames.control_frame(tmaster_pb2.TmasterToStmgr(shutdown=tmaster_pb2.Shutdown(
            reason=tmaster_pb2.UPDATING, detail=self._update_detail)))

    # ---- the clock -------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Start the next checkpoint when due (effectively once); they go on while deactivated."""
        if self.checkpoints is not None and self.state.processing:
            self.checkpoints.tick(now)

    def check_liveness(self, now: float) -> None:
        """Report stmgrs silent past the heartbeat timeout as dead; restart after another.

        The stage restarts when one stays silent for another timeout (its container is
        stopped, its executor gone, or its host cut off).

        A dead stmgr keeps its connection until then: one that was only cut off (a network
        partition) or slow heartbeats again on it once healed and is alive, with no restart.
        Only an overdue one is dropped (its connection closed), as the stage restarts.
        """
        if self.state.ended:
            return
        newly, overdue = self.liveness.check(now)
        for index in newly:
            log.error("topology %s: stmgr of container %d%s sent no heartbeat for %g s "
                      "(heron.tmaster.stmgr.heartbeat.timeout.secs): treating it as dead; "
                      "the stage restarts if it stays silent for %g s more", self.name, index,
                      self._on_host(index), self.liveness.timeout_secs,
                      self.liveness.timeout_secs)
        if overdue:
            for index in overdue:
                self.io.drop_stmgr(index)
            reason = (f"the stmgr of container(s) {overdue} (host(s) "
                      f"{sorted({self.stmgr_host(i) for i in overdue})}) did not come back "
                      f"within {self.liveness.timeout_secs:g} s of being found dead")
            log.error("topology %s: %s", self.name, reason)
            self.io.recover(reason)

    def stmgr_host(self, index: int, generation: int | None = None) -> str:
        """Return the address container ``index``'s stmgr registered with ('?': unknown).

        In ``generation``: the current one by default, or the one before it.
        """
        if generation is not None and generation != self.generation:
            previous, hosts = self.previous_hosts
            return hosts.get(index, "?") if previous == generation else "?"
        register = self.registrations.get(index)
        return register.host if register is not None else "?"

    def _on_host(self, index: int) -> str:
        return f" on host {self.stmgr_host(index)}"

    def executor_lost(self, executor: str, containers: tuple[int, ...], reason: str,
                      generation: int, now: float) -> None:
        """Restart the stage now: Spark removed ``executor``, which hosted ``containers`` of it.

        Nothing happens if ``generation`` has been replaced already (Spark failed the stage
        itself and the resubmission policy ran first).
        """
        if self.state.ended:
            return
        current = generation == self.generation
        hosts = sorted({self.stmgr_host(index, generation) for index in containers})
        self.executor_losses.append({
            "executor": executor, "containers": list(containers), "hosts": hosts,
            "reason": reason,
            "time": self.wall(now), "generation": generation,
            "action": "restart" if current else f"none: generation {self.generation} runs"})
        del self.executor_losses[:-20]
        detail = (f"Spark removed executor {executor} on host(s) {hosts}, which hosted "
                  f"container(s) {list(containers)} of generation {generation}: {reason}")
        if not current:
            log.warning("topology %s: %s; already replaced by generation %d", self.name, detail,
                        self.generation)
            return
        log.error("topology %s: %s; restarting its containers now", self.name, detail)
        self.io.recover(detail)

    # ---- effectively once ------------------------------------------------------------------
    def _restore(self, reason: str) -> None:
        """Effectively once: roll every task back to the last committed checkpoint."""
        if self.checkpoints is None or self.state.ended:
            return
        self.drained.clear()  # every task runs again from the checkpoint
        self.checkpoints.restore(reason)

    def _broadcast(self, message: tmaster_pb2.TmasterToStmgr) -> None:
        self.io.to_stmgrs(frames.control_frame(message))

    def _on_commit(self, checkpoint_id: int, epoch: int, now: float) -> None:
        notice = frames.control_frame(tmaster_pb2.TmasterToStmgr(
            committed=tmaster_pb2.CheckpointCommitted(checkpoint_id=checkpoint_id, epoch=epoch)))
        self.io.checkpoint_committed(checkpoint_id, epoch, self.wall(now), notice)
        log.debug("checkpoint %d committed", checkpoint_id)

    # ---- management verbs (heron deactivate / activate / restart / update) ---------------
    def _refuse_unless_live(self, action: str) -> None:
        if self.state.ended:
            raise TopologyStateError(self.name, self.state.value, action,
                                     "it has ended; submit it again to run it")
        if self.updating:
            raise TopologyStateError(self.name, "UPDATING", action,
                                     "wait until the update's new containers run")

    def _refuse_unless_processing(self, action: str) -> None:
        self._refuse_unless_live(action)
        if not self.state.processing:
            raise TopologyStateError(self.name, self.state.value, action,
                                     "wait until it is RUNNING (every stmgr registered)")

    def set_paused(self, paused: bool, now: float) -> None:
        """Deactivate (``paused``) or activate the topology: every stmgr tells its spouts.

        Raises TopologyStateError when it has ended, is updating or is already in that state.
        """
        action = "deactivate it" if paused else "activate it"
        self._refuse_unless_live(action)
        if paused == self.paused:
            word = "deactivated" if paused else "active"
            state = self.state.value if self.state.processing else \
                f"{self.state.value} ({word})"
            raise TopologyStateError(
                self.name, state, action, f"it is already {word}; use heron-spark "
                f"{'activate' if paused else 'deactivate'} {self.name}")
        self.paused = paused
        if self.state.processing:
            self._move(TopologyState.PAUSED if paused else TopologyState.RUNNING)
        plan_state = physical_plan_pb2.PAUSED if paused else physical_plan_pb2.RUNNING
        if self.physical_plan is not None:
            self.physical_plan.state = plan_state
            self.io.save_plan(self.physical_plan)
        self._broadcast(tmaster_pb2.TmasterToStmgr(
            activation=tmaster_pb2.SetTopologyState(state=plan_state)))
        self._save_state(now)
        log.info("topology %s %s", self.name, "deactivated" if paused else "activated")

    def restart(self, container: int | None) -> list[int]:
        """Restart every process of ``container`` (None: of every container).

        Return the containers asked. Their supervisors restart the stmgr and instances; the
        stage stays. Raises TopologyStateError unless it runs, TopologyValueError for a
        container index out of range.
        """
        self._refuse_unless_processing("restart it")
        count = self.plan.container_count
        if container is not None and not 0 <= container < count:
            msg = "no such container"
            raise TopologyValueError(msg, value=container, kind="container",
                                     fix=f"pass a container index from 0 to {count - 1}")
        targets = list(range(count)) if container is None else [container]
        frame = frames.control_frame(tmaster_pb2.TmasterToStmgr(shutdown=tmaster_pb2.Shutdown(
            reason=tmaster_pb2.RESTARTING, detail="restart asked")))
        for index in targets:
            self.io.to_stmgr(index, frame)
        log.info("topology %s: restarting containers %s", self.name, targets)
        return targets

    def check_update(self) -> None:
        """Raise TopologyStateError unless an update may start now (it runs, not updating)."""
        self._refuse_unless_processing("update it")

    def kill(self, detail: str, now: float) -> None:
        """Tell every stmgr to stop now (idempotent)."""
        if not self.state.ended:
            self._end(TopologyState.KILLED, detail, now)

    def fail(self, detail: str, now: float) -> None:
        """End the topology as failed (the Spark job died, ...); idempotent."""
        if not self.state.ended:
            self._end(TopologyState.FAILED, detail, now)

    # ---- lifecycle -----------------------------------------------------------------------
    def _move(self, state: TopologyState) -> None:
        if state not in _NEXT_STATES[self.state]:
            allowed = ", ".join(sorted(s.value for s in _NEXT_STATES[self.state])) or "none"
            raise TopologyStateError(self.name, self.state.value, f"become {state.value}",
                                     f"a TMaster bug: allowed from here: {allowed}")
        self.state = state

    def _end(self, state: TopologyState, detail: str, now: float) -> None:
        self._move(state)
        self.detail = detail
        self.ended_at = self.wall(now)
        log.info("topology %s %s: %s", self.name, state.value, detail)
        shutdown = tmaster_pb2.Shutdown(reason=_REASON[state], detail=detail)
        self.io.to_stmgrs(frames.control_frame(tmaster_pb2.TmasterToStmgr(shutdown=shutdown)))
        self._save_state(now)

    def status(self, now: float) -> TopologyStatus:
        """Return the live status: state, times, stmgrs and their last heartbeat."""
        return TopologyStatus(
            name=self.name, id=self.topology_id, state=self.state.value, detail=self.detail,
            started_at=self.started_at, ended_at=self.ended_at,
            containers=self.plan.container_count, registered=tuple(sorted(self.registrations)),
            heartbeats=dict(self.heartbeats), heartbeat_ages_secs=self.liveness.ages(now),
            dead_stmgrs=tuple(sorted(self.liveness.dead_since)),
            dead_stmgr_hosts={i: self.stmgr_host(i) for i in sorted(self.liveness.dead_since)},
            executor_losses=tuple(self.executor_losses), drained_tasks=len(self.drained),
            tasks=len(self.all_tasks), generation=self.generation, paused=self.paused,
            updating=self.updating, instance_failures=dict(self.failures),
            checkpoint=self.checkpoints.status() if self.checkpoints else None,
            submission=dict(self.submission))

    def save_state(self, now: float) -> None:
        """Store the execution state (as at start-up, before any event)."""
        self._save_state(now)

    def _save_state(self, now: float) -> None:
        self.io.save_state(self.status(now).record())
