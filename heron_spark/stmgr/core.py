"""The Stream Manager's logic, without sockets: frames and clock ticks in, frames out.

``StmgrCore`` is a single-threaded state machine. Its shell (``server.StreamManager``) feeds
it every frame from local instances, peer stmgrs and the TMaster, tells it when connections
come and go, and calls ``tick`` once per loop turn; the core answers through a
``StmgrTransport`` (``transport``: send a frame to a local task, a peer stmgr or the TMaster;
stop or resume reading a spout). It never blocks and never touches a socket, so it is tested
with a recording transport and a fake clock.

It composes one part per concern and keeps what joins them:

- relay (``relay.Relay``): DATA frames passed on untouched to the local instance or the peer
  stmgr of their destination task; traffic and queue counts;
- at-least-once (``ack_routing.AckRouter``): the XOR updates instances send ahead of their
  frames, collected here for the turn, applied to the ledger of each tree's owner (here or on
  a peer); finished trees reported to their spouts;
- effectively once (``epochs.Epochs``, ``gateway.CheckpointGateway``): markers aligned for
  local bolts, restores and epoch fences;
- backpressure (``backpressure.SpoutGate``): over a high water mark it stops reading its local
  spouts, gates them, and tells every peer to do the same; metrics (``snapshot``);
- here: the lifecycle (``lifecycle.StmgrState``: waiting for the first physical plan,
  running, then restarting or stopping), local instances registering and leaving, end of
  input (END_OF_STREAM sent downstream when a spout is exhausted, replayed to a local instance
  that restarts), the TMaster's messages (plans, checkpoints to local spouts, the topology
  state, also in the ``StartProcessing`` of any instance it (re)starts; on
  shutdown(RESTARTING) it ends with ``ExitCode.RESTART`` for its supervisor to restart the
  whole container).

Whether the topology is deactivated (``paused``) and whether a checkpoint restore is under way
(``restoring``) are separate from the lifecycle state: both can change in any live state.
"""

from __future__ import annotations

import logging
from typing import Callable

from heron_spark.config import SystemConfig
from heron_spark.contract.exit_codes import ExitCode
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, physical_plan_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.stmgr import snapshot
from heron_spark.stmgr.ack_routing import SMALL_UPDATE_BYTES, AckRouter
from heron_spark.stmgr.backpressure import Backpressure, SpoutGate
from heron_spark.stmgr.epochs import Epochs
from heron_spark.stmgr.lifecycle import ENDING, NEXT_STATES, StmgrState, StmgrStateError
from heron_spark.stmgr.relay import Relay
from heron_spark.stmgr.transport import StmgrTransport
from heron_spark.wire import frames, tree_ids

log = logging.getLogger(__name__)
_EOS = frames.END_OF_STREAM
_PREFIX_BYTES = frames.PREFIX_BYTES


class StmgrCore:
    """See the module docstring. One thread only (the stmgr's loop)."""

    def __init__(self, plan: PlanView, config: SystemConfig, index: int,
                 transport: StmgrTransport, clock: Callable[[], float]) -> None:
        self.plan = plan
        self.config = config
        self.index = index
        self.io = transport
        self.clock = clock
        self.local_tasks = frozenset(plan.tasks_in(index))
        components = plan.logical.components
        self.spout_tasks = frozenset(t for t in self.local_tasks
                                     if components[plan.task_component[t]].is_spout)
        self.relay = Relay(index, dict(plan.task_container), self.local_tasks, self.spout_tasks,
                           max(1, config.backpressure_high_water_tuples // 4), transport, clock)
        self.connected = self.relay.connected        # local tasks with a live connection
        self.ended_sources = self.relay.ended_sources  # tasks whose END_OF_STREAM went out
        self.instance_pids: dict[int, int] = {}   # local tasks that registered, with their pid
        self.acks = AckRouter(plan, index, self.spout_tasks, self.connected, transport, clock)
        self.ledger = self.acks.ledger
        upstream = None
        if plan.logical.topology_config.effectively_once:
            upstream = {t: frozenset(plan.upstream_tasks(t)) for t in self.local_tasks
                        if t not in self.spout_tasks}
        self.epochs = Epochs(index, upstream, self.relay, transport)
        self.gateway = self.epochs.gateway  # None unless effectively once
        self.backpressure = Backpressure(config.backpressure_high_water_bytes,
                                         config.backpressure_low_water_bytes,
                                         config.backpressure_high_water_tuples,
                                         config.backpressure_low_water_tuples)
        self.gate = SpoutGate(self.backpressure, self.relay, index, self.spout_tasks, transport)
        self._failure_reported: set[int] = set()
        self._next_expiry = 0.0
        # At-least-once updates of this turn, as received (packed roots, packed values),
        # applied (or forwarded) together at the end of the turn: one XOR pass, one message
        # per owner and one TreesDone per spout per turn.
        self._xor_parts: list[tuple[bytes, bytes]] = []
        self._xor_bytes = 0
        # The per-frame paths, bound once.
        self._from_instance = self.relay.from_instance
        self._from_peer = self.relay.from_peer
        self._trees_done = self.acks.trees_done
        self.state = StmgrState.WAITING_PLAN
        self.paused = False  # the topology is deactivated: local spouts do not emit
        self.instances_lost = 0          # instance connections closed while running
        self.instance_registrations = 0  # restarted instances that registered again

    # ---- read-only views of the parts, for metrics and tests ------------------------------
    @property
    def tuples_routed(self) -> int:
        """Tuples of local instances passed on to a known task."""
        return self.relay.tuples_routed

    @property
    def tuples_dropped(self) -> int:
        """Tuples for a local instance that was not connected (or an unknown task)."""
        return self.relay.tuples_dropped

    @property
    def trees_acked(self) -> int:
        """Local spouts' trees that completed."""
        return self.acks.trees_acked

    @property
    def trees_expired(self) -> int:
        """Local spouts' trees forgotten once their spout had failed them by timeout."""
        return self.acks.trees_expired

    @property
    def restoring(self) -> bool:
        """True from a restore until the TMaster's resume of its epoch."""
        return self.relay.restoring

    @property
    def frames_dropped_in_restore(self) -> int:
        """DATA frames of a rolled-back epoch dropped here."""
        return self.relay.frames_dropped_in_restore

    def queued_tuples(self, task: int) -> int:
        """Tuples handed to local ``task`` that it has not executed yet."""
        return self.relay.queued_tuples(task)

    # ---- lifecycle -------------------------------------------------------------------------
    @property
    def stopping(self) -> bool:
        """True once the stmgr is ending (RESTARTING or STOPPING)."""
        return self.state in ENDING

    def _enter(self, state: StmgrState) -> None:
        """Move to ``state``; raise ``StmgrStateError`` if the lifecycle forbids it."""
        if state not in NEXT_STATES[self.state]:
            raise StmgrStateError(self.index, self.state, state)
        log.debug("stmgr %d: %s -> %s", self.index, self.state.name, state.name)
        self.state = state

    def close(self) -> None:
        """Stop because the shell is closing, unless already ending (idempotent)."""
        if not self.stopping:
            self._enter(StmgrState.STOPPING)

    @property
    def all_registered(self) -> bool:
        """True once every local task has registered (it sent its pid)."""
        return len(self.instance_pids) == len(self.local_tasks)

    # ---- local instances -----------------------------------------------------------------
    def instance_connected(self, task: int) -> None:
        """Note that local ``task`` dialled in (it registers with its first frame)."""
        self.connected.add(task)
        if task in self.spout_tasks and self.backpressure.spouts_paused:
            self.io.set_reading(task, self.relay.restoring)

    def on_instance_frame(self, task: int, kind: int, frame: bytes | bytearray) -> None:
        """Handle one frame from local ``task`` (prefix included)."""
        if kind == frames.DATA:
            self._from_instance(task, frame)
            return
        message = stmgr_pb2.InstanceToStmgr()
        message.ParseFromString(memoryview(frame)[_PREFIX_BYTES:])
        body = message.WhichOneof("body")
        if body == "progress":
            self.relay.progress(task, message.progress.executed)
        elif body in ("acks", "edges"):
            xor = getattr(message, body)
            roots = xor.roots
            self._xor_parts.append((roots, xor.values))
            self._xor_bytes += len(roots)
        elif body == "opened":
            opened = message.opened
            edges = opened.edges
            if len(edges.roots) <= SMALL_UPDATE_BYTES:
                self._trees_done(self.ledger.start_pairs(
                    tree_ids.unpack_list(opened.roots), tree_ids.unpack_list(edges.roots),
                    tree_ids.unpack_list(edges.values), task), [])
            else:
                self._trees_done(self.ledger.start(tree_ids.unpack(opened.roots),
                                                   tree_ids.unpack(edges.roots),
                                                   tree_ids.unpack(edges.values), task), [])
        elif body == "fails":
            self.acks.fail_trees(tree_ids.unpack(message.fails.roots))
        elif body == "register":
            self._on_register(task, message.register.pid)
        elif body == "exhausted":
            relay = self.relay
            if not relay.restoring or task in relay.restored_tasks:  # else the old epoch's
                self._on_exhausted(task)
        elif body == "stored":
            self._to_tmaster(tmaster_pb2.StmgrToTmaster(stored=message.stored))
        elif body == "restored":
            self.epochs.restored(task, message.restored.epoch)
            self._to_tmaster(tmaster_pb2.StmgrToTmaster(restored=message.restored))
        elif body == "failed":
            self._failure_reported.add(task)  # its disconnect is the same failure
            self._to_tmaster(tmaster_pb2.StmgrToTmaster(instance_failed=message.failed))

    def _on_register(self, task: int, pid: int) -> None:
        restarted = task in self.instance_pids
        self.instance_pids[task] = pid
        self.relay.reset_queue(task)
        if restarted:
            self.instance_registrations += 1
            log.info("task %d re-registered (pid %d)", task, pid)
        if self.state is StmgrState.RUNNING:  # a restarted instance joins a running topology
            self._start_instance(task)

    def _on_exhausted(self, task: int) -> None:
        self.ended_sources.add(task)
        for dest in self.plan.downstream_tasks(task):
            self.relay.send_to_task(dest, frames.data_frame(_EOS, task, dest, 0, b""))
        self._to_tmaster(tmaster_pb2.StmgrToTmaster(
            drained=tmaster_pb2.TaskDrained(task_ids=[task])))

    def instance_closed(self, task: int) -> None:
        """Local ``task``'s connection ended: report the failure (unless stopping)."""
        self.connected.discard(task)
        self.relay.reset_queue(task)
        self.acks.forget_task(task)  # its trees died with it: the next instance replays them
        if self.stopping:
            return
        log.error("instance task %d disconnected", task)
        self.instances_lost += 1
        if task in self._failure_reported:
            self._failure_reported.discard(task)
            return
        component = self.plan.task_component[task]
        error = self.io.failure_note(task) or "instance process exited or closed its connection"
        self._to_tmaster(tmaster_pb2.StmgrToTmaster(instance_failed=tmaster_pb2.InstanceFailed(
            task_id=task, component=component, error=error, log_path=self.io.instance_log(task))))

    def _start_instance(self, task: int) -> None:
        """Start a (re)registered instance: processing, the spout gate, ended upstreams."""
        physical = self.plan.physical
        assert physical is not None  # instances start only once RUNNING: a plan was applied
        self.io.to_instance(task, frames.control_frame(stmgr_pb2.StmgrToInstance(
            start=stmgr_pb2.StartProcessing(generation=physical.generation,
                                            epoch=self.relay.epoch,
                                            checkpoint_id=self.epochs.restore_checkpoint,
                                            hold=self.relay.restoring, paused=self.paused))))
        if task in self.spout_tasks:
            self.relay.send_gate(task)
        self._replay_ends([task], self.ended_sources)

    def _replay_ends(self, tasks, sources) -> None:
        """Send local ``tasks`` the END_OF_STREAM of each of their ``sources`` that ended."""
        for task in tasks:
            for source in sorted(set(self.plan.upstream_tasks(task)) & set(sources)):
                self.io.to_instance(task, frames.data_frame(_EOS, source, task, 0, b""))

    # ---- peers -----------------------------------------------------------------------------
    def on_peer_frame(self, kind: int, frame: bytes | bytearray) -> None:
        """Handle one frame from a peer stmgr (prefix included)."""
        if kind == frames.DATA:
            self._from_peer(frame)
            return
        message = stmgr_pb2.StmgrToStmgr()
        message.ParseFromString(memoryview(frame)[_PREFIX_BYTES:])
        body = message.WhichOneof("body")
        if body == "xor":
            roots = message.xor.roots
            self._xor_parts.append((roots, message.xor.values))
            self._xor_bytes += len(roots)
        elif body == "fail":
            self._trees_done([], self.ledger.fail(tree_ids.unpack(message.fail.roots)))
        elif body == "fence":
            self.epochs.fenced(message.fence.container_index, message.fence.epoch)
        elif body == "backpressure":
            self.gate.remote(message.backpressure.container_index, message.backpressure.active)

    def _peer_containers(self) -> list[int]:
        return [c for c in self.plan.stmgr_address if c != self.index]

    # ---- turns -----------------------------------------------------------------------------
    def end_turn(self) -> None:
        """Apply the turn's tree updates and report finished trees.

        The shell calls this at the end of each loop turn, before the turn's output is written,
        so forwarded updates and ``TreesDone`` share system calls with the turn's relays;
        ``tick`` calls it too (a no-op when nothing arrived since).
        """
        if self._xor_parts:
            parts, size = self._xor_parts, self._xor_bytes
            self._xor_parts, self._xor_bytes = [], 0
            self.acks.apply_turn(parts, size)
        if self.acks.done:
            self.acks.send_trees_done()

    def next_deadline(self) -> float | None:
        """Return when held completed trees must leave (clock seconds), or None."""
        return self.acks.next_deadline()

    def tick(self, now: float) -> None:
        """End the turn (``end_turn``), check the water marks; now and then expire old trees.

        Once per loop turn, after its output was written (queues are measured then).
        """
        self.end_turn()
        self.gate.check(now, self._peer_containers(), self.plan.task_component)
        if now >= self._next_expiry:
            self._next_expiry = now + self.config.metrics_interval_ms / 1000.0
            self.acks.expire()

    # ---- TMaster ---------------------------------------------------------------------------
    def register_message(self, host: str, port: int, pid: int,
                         generation: int) -> tmaster_pb2.StmgrToTmaster:
        """Return the registration of this stmgr and its instances for the TMaster."""
        register = tmaster_pb2.RegisterStmgr(container_index=self.index, host=host,
                                             data_port=port, pid=pid, generation=generation)
        for task in sorted(self.local_tasks):
            register.instances.add(task_id=task, component=self.plan.task_component[task],
                                   component_index=self.plan.task_index[task],
                                   container_index=self.index,
                                   pid=self.instance_pids.get(task, 0))
        return tmaster_pb2.StmgrToTmaster(register=register)

    def on_tmaster_frame(self, frame: bytes | bytearray) -> int | None:
        """Handle one TMaster frame; return the exit code when the stmgr must end."""
        message = tmaster_pb2.TmasterToStmgr()
        message.ParseFromString(memoryview(frame)[_PREFIX_BYTES:])
        body = message.WhichOneof("body")
        if self.stopping:  # sent before the TMaster learnt this stmgr is ending
            log.info("stmgr %s: TMaster %s ignored", self.state.name, body)
            return None
        if body == "plan":
            self._apply_plan(message.plan)
        elif body == "drained":
            ended = set(message.drained.task_ids) - self.ended_sources
            self.ended_sources.update(ended)
            if self.state is StmgrState.RUNNING and ended:
                log.info("tasks %s ended before this stmgr registered; replaying their end of "
                         "stream", sorted(ended))
                self._replay_ends(sorted(self.connected), ended)
        elif body == "checkpoint":
            frame = frames.control_frame(stmgr_pb2.StmgrToInstance(
                checkpoint=message.checkpoint))
            for task in sorted(self.spout_tasks & self.connected):
                self.io.to_instance(task, frame)
        elif body == "restore":
            self._on_restore(message.restore)
        elif body == "committed":  # every local task: two-phase components' post_save
            frame = frames.control_frame(stmgr_pb2.StmgrToInstance(committed=message.committed))
            for task in sorted(self.connected):
                self.io.to_instance(task, frame)
        elif body == "resume":
            if self.epochs.resume(message.resume.epoch):
                frame = frames.control_frame(stmgr_pb2.StmgrToInstance(resume=message.resume))
                for task in sorted(self.spout_tasks & self.connected):
                    self.relay.send_gate(task)
                    self.io.to_instance(task, frame)
        elif body == "file_request":
            self.io.serve_file(message.file_request)
        elif body == "activation":
            self._set_paused(message.activation.state == physical_plan_pb2.PAUSED)
        elif body == "shutdown" and message.shutdown.reason == tmaster_pb2.RESTARTING:
            # Exit without telling the instances: the supervisor kills them and restarts the
            # stmgr, then them (at-least-once spouts replay what was not acked).
            log.info("restart asked by the TMaster: %s", message.shutdown.detail)
            self._enter(StmgrState.RESTARTING)
            return ExitCode.RESTART
        elif body == "shutdown":
            log.info("shutdown from TMaster: %s %s",
                     tmaster_pb2.ShutdownReason.Name(message.shutdown.reason),
                     message.shutdown.detail)
            self._enter(StmgrState.STOPPING)
            self.io.announce_stop()
            frame = frames.control_frame(stmgr_pb2.StmgrToInstance(shutdown=message.shutdown))
            for task in self.connected:
                self.io.to_instance(task, frame)
            return ExitCode.OK
        return None

    def _on_restore(self, restore: tmaster_pb2.RestoreState) -> None:
        """Roll back to a checkpoint: drop what is in flight, fence peers, restore tasks."""
        self.epochs.begin_restore(restore)
        for task in self.local_tasks:  # restored tasks start counting from zero
            self.relay.reset_queue(task)
        # Every queue is dropped: congestion announced by peers is over (a peer that is still
        # congested says so again), and held spouts must be read for their restore reports.
        self.backpressure.remote.clear()
        self.gate.apply()  # restoring: reads every spout, whatever the congestion
        self.epochs.send_fences(self._peer_containers())
        if self.state is StmgrState.RUNNING:
            frame = frames.control_frame(stmgr_pb2.StmgrToInstance(restore=restore))
            for task in sorted(self.connected & set(self.instance_pids)):
                self.io.to_instance(task, frame)

    def tmaster_lost(self) -> int | None:
        """Stop because the TMaster connection ended; return the exit code (None while stopping)."""
        if self.stopping:
            return None
        log.error("TMaster connection lost; shutting down")
        self._enter(StmgrState.STOPPING)
        self.io.announce_stop()
        return ExitCode.TMASTER_LOST

    def _apply_plan(self, plan: physical_plan_pb2.PhysicalPlan) -> None:
        """Take a new physical plan: (re)target peer links; the first time, start local instances."""
        self.plan = PlanView(self.plan.logical, self.plan.packing, plan)
        if plan.state != physical_plan_pb2.TOPOLOGY_STATE_UNSET:
            self._set_paused(plan.state == physical_plan_pb2.PAUSED)
        self.io.retarget_peers({c: a for c, a in self.plan.stmgr_address.items()
                                if c != self.index})
        self.epochs.send_fences(self._peer_containers())
        if self.state is StmgrState.WAITING_PLAN:
            self._enter(StmgrState.RUNNING)
            for task in sorted(self.connected & set(self.instance_pids)):
                self._start_instance(task)
            log.info("physical plan generation %d applied; %d local instances started",
                     plan.generation, len(self.connected))

    def _set_paused(self, paused: bool) -> None:
        """Deactivate or activate the topology here: tell every started local spout."""
        if paused == self.paused:
            return
        self.paused = paused
        log.info("topology %s", "deactivated" if paused else "activated")
        if self.state is not StmgrState.RUNNING:
            return  # the spouts learn it from StartProcessing
        state = physical_plan_pb2.PAUSED if paused else physical_plan_pb2.RUNNING
        frame = frames.control_frame(stmgr_pb2.StmgrToInstance(
            activation=tmaster_pb2.SetTopologyState(state=state)))
        for task in sorted(self.spout_tasks & self.connected & set(self.instance_pids)):
            self.io.to_instance(task, frame)

    def _to_tmaster(self, message: tmaster_pb2.StmgrToTmaster) -> None:
        self.io.to_tmaster(frames.control_frame(message))

    # ---- metrics ---------------------------------------------------------------------------
    def metrics_snapshot(self, peer_frames_dropped: int,
                         timestamp_ms: int = 0) -> metrics_pb2.MetricsPublish:
        """Build the stmgr's metrics, stamped ``timestamp_ms`` (``snapshot.metrics_publish``).

        ``timestamp_ms`` is wall-clock milliseconds since the epoch (0: unstamped). The core's
        thread only: it reads queues the loop changes.
        """
        return snapshot.metrics_publish(self, peer_frames_dropped, timestamp_ms)
