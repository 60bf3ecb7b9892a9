"""The Stream Manager's logic, without sockets: frames and clock ticks in, frames out.

``StmgrCore`` is a single-threaded state machine. Its shell (``server.StreamManager``) feeds
it every frame from local instances, peer stmgrs and the TMaster, tells it when connections
come and go, and calls ``tick`` once per loop turn; the core answers through a
``StmgrTransport`` (send a frame to a local task, a peer stmgr or the TMaster; stop or resume
reading a spout). It never blocks and never touches a socket, so it is tested with a
recording transport and a fake clock.

What it does:
- relay: instances partition their output per destination task (``plan.grouping``); the
  core reads a DATA frame's head and passes the frame on, untouched, to the local instance or
  the peer stmgr of the destination;
- at-least-once: applies the XOR updates instances send ahead of their frames to the ledger
  of each tree's owner (``acking.XorLedger``, here or on a peer) and reports finished trees to
  their spouts;
- backpressure: watches queues (bytes queued towards instances and peers, tuples handed to
  each local bolt minus its reported progress); over a high mark it stops reading its local
  spouts, gates them, and tells every peer to do the same (``backpressure``);
- end of input: sends END_OF_STREAM downstream when a spout is exhausted, and replays the
  END_OF_STREAM of ended tasks to a local instance that restarts;
- effectively once: passes the TMaster's checkpoints to local spouts, aligns checkpoint
  markers for local bolts (``gateway``), and on a restore drops everything in flight: DATA
  from each local instance until it reported that it restored the new epoch, DATA from each
  peer until that peer's epoch fence. Not until the TMaster's resume: a peer that got the
  resume first may already send the new epoch's tuples, and they must not be lost;
- management: relays the topology state (deactivate / activate) to local spouts, also in the
  ``StartProcessing`` of any instance it (re)starts; on shutdown(RESTARTING) it ends with
  ``ExitCode.RESTART`` so its supervisor restarts the whole container.

Its lifecycle is ``StmgrState``: waiting for the first physical plan, running, then restarting
or stopping. Whether the topology is deactivated (``paused``) and whether a checkpoint restore
is under way (``restoring``) are separate flags: both can change in any live state.
"""

from __future__ import annotations

import collections
import enum
import logging
from typing import Callable, Protocol

import numpy as np

from heron_spark.config import SystemConfig
from heron_spark.contract import ids
from heron_spark.contract.exit_codes import ExitCode
from heron_spark.errors import HeronSparkError
from heron_spark.metrics import names
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, physical_plan_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.stmgr import acking
from heron_spark.stmgr.backpressure import Backpressure
from heron_spark.stmgr.gateway import CheckpointGateway
from heron_spark.wire import frames, tree_ids

log = logging.getLogger(__name__)
_EOS = frames.END_OF_STREAM
_data_head = frames.DATA_HEAD.unpack_from
_PREFIX_BYTES = frames.PREFIX_BYTES
_ROOT_SHIFT = tree_ids.ROOT_TASK_SHIFT
_SMALL_UPDATE_BYTES = 8 * tree_ids.SMALL_UPDATE_PAIRS  # packed uint64 roots of a small update
# A spout without topology.max.spout.pending gets its completed trees at most this often: each
# TreesDone wakes the spout for a turn, and nothing waits on an uncapped spout's acks but its
# own ack() calls. Capped spouts, and failed trees, get theirs at the end of the turn.
TREES_DONE_HOLD_SECS = 0.005
# A tree's checksum is kept this many times its spout's message timeout: the spout has failed
# it by then (its clock started before the stmgr's), so a later ack finds nothing to complete.
TREE_EXPIRY_TIMEOUTS = 2


def tree_lifetimes(plan: PlanView, spout_tasks: frozenset[int]) -> dict[int, float | None]:
    """Return how long the ledger keeps each spout task's trees (seconds; None: for ever).

    ``TREE_EXPIRY_TIMEOUTS`` times the message timeout of the task's component, its
    ``topology.message.timeout.secs`` override or the topology's: the same view the spout times
    its trees out by (``instance.spout_executor``). None when ``topology.enable.message.timeouts``
    is off: the spout then never fails a tree by time.
    """
    components = plan.logical.components
    lifetimes: dict[int, float | None] = {}
    for task in spout_tasks:
        timeout = components[plan.task_component[task]].topology_config.message_timeout_or_none_secs
        lifetimes[task] = None if timeout is None else TREE_EXPIRY_TIMEOUTS * timeout
    return lifetimes


class StmgrState(enum.Enum):
    """Where a stream manager is in its life (``StmgrCore.state``).

    The changes:

    - WAITING_PLAN -> RUNNING: the TMaster's first physical plan; local instances start;
    - WAITING_PLAN | RUNNING -> RESTARTING: the TMaster's shutdown(RESTARTING) (``heron
      restart``): exit ``ExitCode.RESTART`` without telling the instances, for the
      supervisor to restart the container;
    - WAITING_PLAN | RUNNING -> STOPPING: the TMaster's shutdown, the TMaster lost, or the
      shell closing (``StmgrCore.close``).

    RESTARTING and STOPPING are final: TMaster frames are ignored, instance disconnects are no
    longer failures, instances that register are not started.
    """

    WAITING_PLAN = "waiting for the physical plan"
    RUNNING = "running"
    RESTARTING = "exiting to be restarted"
    STOPPING = "stopping"


_ENDING = frozenset({StmgrState.RESTARTING, StmgrState.STOPPING})
_NEXT_STATES = {
    StmgrState.WAITING_PLAN: frozenset({StmgrState.RUNNING, *_ENDING}),
    StmgrState.RUNNING: _ENDING,
    StmgrState.RESTARTING: frozenset(),
    StmgrState.STOPPING: frozenset(),
}


class StmgrStateError(HeronSparkError, RuntimeError):
    """A ``StmgrCore`` was asked for a state change its lifecycle forbids.

    A bug in its shell or in the core, never a peer's doing: frames that arrive too late are
    ignored.
    """

    def __init__(self, index: int, state: StmgrState, wanted: StmgrState) -> None:
        self.index, self.state, self.wanted = index, state, wanted
        allowed = ", ".join(sorted(s.name for s in _NEXT_STATES[state])) or "none"
        super().__init__(f"stmgr of container {index}: cannot go from {state.name} to "
                         f"{wanted.name} (allowed: {allowed})")


class StmgrTransport(Protocol):
    """What the core asks of its shell. Every call returns at once."""

    def to_instance(self, task: int, frame: bytes | bytearray) -> bool:
        """Queue ``frame`` for local ``task``; False when it is not connected."""

    def to_peer(self, container: int, frame: bytes | bytearray) -> None:
        """Queue ``frame`` for the stmgr of ``container`` (buffered while it is down)."""

    def to_tmaster(self, frame: bytes) -> None:
        """Queue ``frame`` for the TMaster."""

    def serve_file(self, request: tmaster_pb2.FileRequest) -> None:
        """Answer the tracker's ``request`` for a file of the container's work dir, via the TMaster."""

    def set_reading(self, task: int, reading: bool) -> None:
        """Stop or resume taking frames from local ``task``."""

    def instance_queued_bytes(self, task: int) -> int:
        """Bytes queued towards local ``task``."""

    def peer_queued_bytes(self) -> int:
        """Bytes queued towards the most loaded peer stmgr."""

    def retarget_peers(self, addresses: dict[int, tuple[str, int]]) -> None:
        """Point the link to each peer container at its (host, port)."""

    def announce_stop(self) -> None:
        """Tell the container this stmgr is ending for good (before instances notice)."""

    def failure_note(self, task: int) -> str | None:
        """Why the container killed ``task``, if it did."""

    def instance_log(self, task: int) -> str:
        """Return the path of ``task``'s log file."""


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
        self._task_container = dict(plan.task_container)
        self.connected: set[int] = set()          # local tasks with a live connection
        self.instance_pids: dict[int, int] = {}   # local tasks that registered, with their pid
        self.ledger = acking.XorLedger(None, clock, tree_lifetimes(plan, self.spout_tasks))
        self._owner = np.full(max(plan.task_component) + 1, -1, dtype=np.int64)
        for task, container in plan.task_container.items():
            self._owner[task] = container
        self._owner_of = dict(plan.task_container)  # the same, for one root at a time
        self.backpressure = Backpressure(config.backpressure_high_water_bytes,
                                         config.backpressure_low_water_bytes,
                                         config.backpressure_high_water_tuples,
                                         config.backpressure_low_water_tuples)
        self.ended_sources: set[int] = set()  # tasks whose END_OF_STREAM went out
        # Tuples handed to each local bolt, and how many it executed: their difference is
        # what waits in queues for it; marks (tuples sent so far, when) date the oldest.
        self.sent_tuples: collections.Counter = collections.Counter()
        self.executed_tuples: collections.Counter = collections.Counter()
        self._sent_marks: dict[int, collections.deque] = {
            t: collections.deque() for t in self.local_tasks}
        self._gate_paused = False
        self.routed_from: collections.Counter = collections.Counter()  # local spouts' tuples
        self._routed_reported: collections.Counter = collections.Counter()
        self._routed_step = max(1, config.backpressure_high_water_tuples // 4)
        self._failure_reported: set[int] = set()
        self._next_expiry = 0.0
        # At-least-once updates of this turn, as received (packed roots, packed values),
        # applied (or forwarded) together at the end of the turn: one XOR pass, one message
        # per owner and one TreesDone per spout per turn.
        self._xor_parts: list[tuple[bytes, bytes]] = []
        self._xor_bytes = 0
        self._done: dict[int, tuple[list, list]] = {}  # spout task -> (acked, failed) chunks
        # Local spouts with no cap on their open trees: their acks leave at most every
        # TREES_DONE_HOLD_SECS (the first held one's time per task in _done_since).
        self._uncapped_spouts = frozenset(
            t for t in self.spout_tasks
            if components[plan.task_component[t]].topology_config.max_spout_pending is None)
        self._done_since: dict[int, float] = {}
        self.state = StmgrState.WAITING_PLAN
        self.paused = False  # the topology is deactivated: local spouts do not emit
        self.tuples_routed = 0
        # Heron's __server/* traffic counters (tuples and frame bytes, DATA frames only)
        self.tuples_from_workers = self.bytes_from_workers = 0
        self.tuples_to_workers = self.bytes_to_workers = 0
        self.tuples_from_stmgrs = self.bytes_from_stmgrs = 0
        self.tuples_dropped = 0          # tuples for a local instance that was not connected
        self.instances_lost = 0          # instance connections closed while running
        self.instance_registrations = 0  # restarted instances that registered again
        self.trees_acked = self.trees_failed = self.trees_expired = 0
        # Effectively once (None / unused otherwise): the epoch and checkpoint every local task
        # must restore, whether a restore is under way, and each peer's fenced epoch.
        self.gateway: CheckpointGateway | None = None
        if plan.logical.topology_config.effectively_once:
            self.gateway = CheckpointGateway(
                {t: frozenset(plan.upstream_tasks(t)) for t in self.local_tasks
                 if t not in self.spout_tasks}, self._deliver_now)
        self.epoch = 0
        self.restore_checkpoint = 0
        self.restoring = False
        self.restored_tasks: set[int] = set()  # local tasks that restored ``epoch``
        self.peer_epochs: dict[int, int] = {}
        self.frames_dropped_in_restore = 0

    @property
    def stopping(self) -> bool:
        """True once the stmgr is ending (RESTARTING or STOPPING)."""
        return self.state in _ENDING

    def _enter(self, state: StmgrState) -> None:
        """Move to ``state``; raise ``StmgrStateError`` if the lifecycle forbids it."""
        if state not in _NEXT_STATES[self.state]:
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
            self.io.set_reading(task, self.restoring)

    def on_instance_frame(self, task: int, kind: int, frame: bytes | bytearray) -> None:
        """Handle one frame from local ``task`` (prefix included)."""
        if kind == frames.DATA:
            if self.restoring and task not in self.restored_tasks:
                self.frames_dropped_in_restore += 1  # sent before it restored: the old epoch's
                return
            self._relay(frame)
            return
        message = stmgr_pb2.InstanceToStmgr()
        message.ParseFromString(memoryview(frame)[_PREFIX_BYTES:])
        body = message.WhichOneof("body")
        if body == "progress":
            executed = self.executed_tuples[task] = message.progress.executed
            marks = self._sent_marks[task]
            while marks and marks[0][0] <= executed:
                marks.popleft()
        elif body in ("acks", "edges"):
            xor = getattr(message, body)
            roots = xor.roots
            self._xor_parts.append((roots, xor.values))
            self._xor_bytes += len(roots)
        elif body == "opened":
            opened = message.opened
            edges = opened.edges
            if len(edges.roots) <= _SMALL_UPDATE_BYTES:
                self._trees_done(self.ledger.start_pairs(
                    tree_ids.unpack_list(opened.roots), tree_ids.unpack_list(edges.roots),
                    tree_ids.unpack_list(edges.values), task), [])
            else:
                self._trees_done(self.ledger.start(tree_ids.unpack(opened.roots),
                                                   tree_ids.unpack(edges.roots),
                                                   tree_ids.unpack(edges.values), task), [])
        elif body == "fails":
            self._fail_trees(tree_ids.unpack(message.fails.roots))
        elif body == "register":
            self._on_register(task, message.register.pid)
        elif body == "exhausted":
            if not self.restoring or task in self.restored_tasks:  # else the old epoch's
                self._on_exhausted(task)
        elif body == "stored":
            self._to_tmaster(tmaster_pb2.StmgrToTmaster(stored=message.stored))
        elif body == "restored":
            if message.restored.epoch == self.epoch:
                self.restored_tasks.add(task)
            self._to_tmaster(tmaster_pb2.StmgrToTmaster(restored=message.restored))
        elif body == "failed":
            self._failure_reported.add(task)  # its disconnect is the same failure
            self._to_tmaster(tmaster_pb2.StmgrToTmaster(instance_failed=message.failed))

    def _on_register(self, task: int, pid: int) -> None:
        restarted = task in self.instance_pids
        self.instance_pids[task] = pid
        self._reset_queue(task)
        if restarted:
            self.instance_registrations += 1
            log.info("task %d re-registered (pid %d)", task, pid)
        if self.state is StmgrState.RUNNING:  # a restarted instance joins a running topology
            self._start_instance(task)

    def _on_exhausted(self, task: int) -> None:
        self.ended_sources.add(task)
        for dest in self.plan.downstream_tasks(task):
            self._send_to_task(dest, frames.data_frame(_EOS, task, dest, 0, b""))
        self._to_tmaster(tmaster_pb2.StmgrToTmaster(
            drained=tmaster_pb2.TaskDrained(task_ids=[task])))

    def instance_closed(self, task: int) -> None:
        """Local ``task``'s connection ended: report the failure (unless stopping)."""
        self.connected.discard(task)
        self._reset_queue(task)
        self._done.pop(task, None)  # its trees died with it: the next instance replays them
        self._done_since.pop(task, None)
        if task in self.spout_tasks:
            self.ledger.forget_task(task)
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

    def _reset_queue(self, task: int) -> None:
        """Forget what was queued for ``task``'s old instance: a (re)started one holds nothing yet."""
        self.sent_tuples[task] = self.executed_tuples[task] = 0
        self.routed_from[task] = self._routed_reported[task] = 0
        self._sent_marks[task].clear()

    def _start_instance(self, task: int) -> None:
        """Start a (re)registered instance: processing, the spout gate, ended upstreams."""
        physical = self.plan.physical
        assert physical is not None  # instances start only once RUNNING: a plan was applied
        self.io.to_instance(task, frames.control_frame(stmgr_pb2.StmgrToInstance(
            start=stmgr_pb2.StartProcessing(generation=physical.generation,
                                            epoch=self.epoch,
                                            checkpoint_id=self.restore_checkpoint,
                                            hold=self.restoring, paused=self.paused))))
        if task in self.spout_tasks:
            self._send_gate(task)
        self._replay_ends([task], self.ended_sources)

    def _replay_ends(self, tasks, sources) -> None:
        """Send local ``tasks`` the END_OF_STREAM of each of their ``sources`` that ended."""
        for task in tasks:
            for source in sorted(set(self.plan.upstream_tasks(task)) & set(sources)):
                self.io.to_instance(task, frames.data_frame(_EOS, source, task, 0, b""))

    # ---- data ----------------------------------------------------------------------------
    def _relay(self, frame: bytes | bytearray) -> None:
        """Pass a local instance's batch on to its destination task, without decoding it."""
        kind, src, dest, rows, _ = _data_head(frame, _PREFIX_BYTES)
        self.tuples_from_workers += rows
        self.bytes_from_workers += len(frame)
        if dest not in self._task_container:
            log.error("task %d sent a batch for unknown task %d; dropped", src, dest)
            self.tuples_dropped += rows
            return
        self.tuples_routed += rows
        if src in self.spout_tasks:
            self._count_routed(src, rows)
        self._send_to_task(dest, frame, rows)

    def on_peer_frame(self, kind: int, frame: bytes | bytearray) -> None:
        """Handle one frame from a peer stmgr (prefix included)."""
        if kind == frames.DATA:
            data_kind, src, dest, rows, _ = _data_head(frame, _PREFIX_BYTES)
            self.tuples_from_stmgrs += rows
            self.bytes_from_stmgrs += len(frame)
            # An unknown task maps to container -1, which never sent a fence: its frame drops.
            # A frame behind the peer's fence of our epoch is the new epoch's, even before our
            # resume: the TMaster resumed the peer's spouts, so every task here has restored.
            if self.gateway is not None and \
                    self.peer_epochs.get(self._task_container.get(src, -1)) != self.epoch:
                self.frames_dropped_in_restore += 1  # sent before its stmgr's epoch fence
                return
            if data_kind == _EOS:
                self.ended_sources.add(src)
            if not self._deliver_local(dest, frame, rows):
                self.tuples_dropped += rows
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
            self.peer_epochs[message.fence.container_index] = message.fence.epoch
        elif body == "backpressure":
            signal = message.backpressure
            self.backpressure.set_remote(signal.container_index, signal.active)
            self._apply_spout_gate()

    def _send_to_task(self, task: int, frame: bytes | bytearray, rows: int = 0) -> None:
        container = self._task_container[task]
        if container != self.index:
            self.io.to_peer(container, frame)
        elif not self._deliver_local(task, frame, rows):
            self.tuples_dropped += rows  # at-least-once replays them; at-most-once loses them

    def _deliver_local(self, task: int, frame: bytes | bytearray, rows: int = 0) -> bool:
        """Send ``frame`` (``rows`` tuples) to a local instance; False when it is not connected.

        Under effectively once the frame goes through the checkpoint gateway. An instance that
        is not connected is restarting.
        """
        if self.gateway is not None and task not in self.spout_tasks:
            return self.gateway.offer(task, frame, rows)
        return self._deliver_now(task, frame, rows)

    def _deliver_now(self, task: int, frame: bytes | bytearray, rows: int = 0) -> bool:
        if task not in self.connected or not self.io.to_instance(task, frame):
            return False
        self.tuples_to_workers += rows
        self.bytes_to_workers += len(frame)
        if rows:
            sent = self.sent_tuples[task] = self.sent_tuples[task] + rows
            self._sent_marks[task].append((sent, self.clock()))
        return True

    def queued_tuples(self, task: int) -> int:
        """Tuples handed to local ``task`` that it has not executed yet."""
        return self.sent_tuples[task] - self.executed_tuples[task]

    def _queue_age_secs(self, task: int, now: float) -> float:
        """How long the oldest tuple waiting for local ``task`` has waited."""
        marks = self._sent_marks[task]
        return now - marks[0][1] if marks else 0.0

    # ---- at-least-once ---------------------------------------------------------------------
    def _apply_turn_updates(self) -> None:
        """Apply this turn's XOR updates here, or forward them to the trees' stmgrs.

        Combining a turn's updates is safe: each instance sends an input's ack in the same
        update as the creation of the children it emitted before it, and a checksum can only
        reach zero early if an ack is applied without those creations; applying more updates
        at once only removes intermediate states.
        """
        parts = self._xor_parts
        if not parts:
            return
        small = self._xor_bytes <= _SMALL_UPDATE_BYTES
        self._xor_parts, self._xor_bytes = [], 0
        if len(parts) == 1:
            raw_roots, raw_values = parts[0]
        else:
            raw_roots = b"".join([roots for roots, _ in parts])
            raw_values = b"".join([values for _, values in parts])
        if small:
            self._xor_pairs_into_trees(tree_ids.unpack_list(raw_roots), tree_ids.unpack_list(raw_values))
        else:
            self._xor_into_trees(tree_ids.unpack(raw_roots), tree_ids.unpack(raw_values))

    def _xor_pairs_into_trees(self, roots: list[int], values: list[int]) -> None:
        """``_xor_into_trees`` for a few pairs, as lists of ints (see ``acking``).

        The pairs are combined per root first (one XOR per tree and turn), so what goes to a
        peer is already as small as it gets and the ledger does one step per tree.
        """
        get = self._owner_of.get
        mine = self.index
        local: dict[int, int] = {}
        remote: dict[int, dict[int, int]] = {}
        for root, value in acking.xor_pairs(roots, values).items():
            container = get(root >> _ROOT_SHIFT, -1)
            if container == mine:
                local[root] = value
            else:
                remote.setdefault(container, {})[root] = value
        if local:
            self._trees_done(self.ledger.apply_combined(local), [])
        for container in sorted(remote):
            pairs = remote[container]
            self.io.to_peer(container, frames.control_frame(stmgr_pb2.StmgrToStmgr(
                xor=stmgr_pb2.XorBatch(roots=tree_ids.pack_list(list(pairs)),
                                       values=tree_ids.pack_list(list(pairs.values()))))))

    def _xor_into_trees(self, roots: np.ndarray, values: np.ndarray) -> None:
        """Apply (root, value) XOR updates here, or forward them to the trees' stmgrs.

        Combined per root first (one sort for the turn): one step per tree in the ledger, and
        what goes to a peer is no bigger than the number of its trees.
        """
        roots, values = acking.xor_by_root(roots, values)
        for container, chosen in self._by_owner(roots):
            if container == self.index:
                self._trees_done(self.ledger.apply_unique(roots[chosen], values[chosen]), [])
            else:
                self.io.to_peer(container, frames.control_frame(stmgr_pb2.StmgrToStmgr(
                    xor=stmgr_pb2.XorBatch(roots=tree_ids.pack(roots[chosen]),
                                           values=tree_ids.pack(values[chosen])))))

    def _fail_trees(self, roots: np.ndarray) -> None:
        """Fail trees here, or forward the fail to the trees' stmgrs."""
        for container, chosen in self._by_owner(roots):
            if container == self.index:
                self._trees_done([], self.ledger.fail(roots[chosen]))
            else:
                self.io.to_peer(container, frames.control_frame(stmgr_pb2.StmgrToStmgr(
                    fail=stmgr_pb2.FailBatch(roots=tree_ids.pack(roots[chosen])))))

    def _by_owner(self, roots: np.ndarray):
        """Yield (container owning the trees, the trees' mask or slice of ``roots``)."""
        if roots.size == 0:
            return
        owners = self._owner[tree_ids.root_task(roots)]
        first = owners[0]
        if (owners == first).all():
            yield int(first), slice(None)
            return
        for container in np.unique(owners).tolist():
            yield container, owners == container

    def _trees_done(self, acked: list[int], failed: list[int]) -> None:
        """Note which local spout trees completed or failed (sent by ``_send_trees_done``)."""
        self.trees_acked += len(acked)
        self.trees_failed += len(failed)
        done = self._done
        for roots, slot in ((acked, 0), (failed, 1)):
            if not roots:
                continue
            if len(roots) <= tree_ids.SMALL_UPDATE_PAIRS:
                by_task: dict[int, list[int]] = {}
                for root in roots:
                    by_task.setdefault(root >> _ROOT_SHIFT, []).append(root)
                for task, chosen in by_task.items():
                    done.setdefault(task, ([], []))[slot].append(chosen)
                continue
            array = np.asarray(roots, dtype=np.uint64)
            tasks = tree_ids.root_task(array)
            if (tasks == tasks[0]).all():
                self._done.setdefault(int(tasks[0]), ([], []))[slot].append(array)
                continue
            for task in np.unique(tasks).tolist():
                self._done.setdefault(task, ([], []))[slot].append(array[tasks == task])

    def _send_trees_done(self) -> None:
        """Tell each local spout task which of its trees completed or failed.

        A capped spout (``topology.max.spout.pending``) hears at the end of each turn, as does
        any spout with failed trees; an uncapped one at most every ``TREES_DONE_HOLD_SECS``.
        """
        by_task, self._done = self._done, {}
        held = self._uncapped_spouts
        since = self._done_since
        now = self.clock() if held else 0.0
        for task, (done, lost) in by_task.items():
            if task in held and not lost:
                first = since.get(task)
                if first is None:
                    since[task] = first = now
                if now < first + TREES_DONE_HOLD_SECS:
                    self._done[task] = (done, lost)  # held: its acks wait for company
                    continue
            since.pop(task, None)
            if task in self.connected:  # else it restarted: it forgot these trees and replays
                self.io.to_instance(task, frames.control_frame(stmgr_pb2.StmgrToInstance(
                    trees=stmgr_pb2.TreesDone(acked=_packed(done), failed=_packed(lost)))))

    def next_deadline(self) -> float | None:
        """Return when held completed trees must leave (clock seconds), or None."""
        since = self._done_since
        if not since:
            return None
        return min(since.values()) + TREES_DONE_HOLD_SECS

    # ---- backpressure ----------------------------------------------------------------------
    def _count_routed(self, spout: int, rows: int) -> None:
        """Count a local spout's routed tuples; tell it every quarter of the tuple high mark.

        That way the spout never has more than the mark on its way here.
        """
        routed = self.routed_from[spout] = self.routed_from[spout] + rows
        if routed - self._routed_reported[spout] >= self._routed_step:
            self._send_gate(spout)

    def _send_gate(self, spout: int) -> None:
        if spout in self.connected:
            self._routed_reported[spout] = self.routed_from[spout]
            self.io.to_instance(spout, frames.control_frame(stmgr_pb2.StmgrToInstance(
                gate=stmgr_pb2.SpoutGate(paused=self._gate_paused,
                                         routed=self.routed_from[spout]))))

    def end_turn(self) -> None:
        """Apply the turn's tree updates and report finished trees.

        The shell calls this at the end of each loop turn, before the turn's output is written,
        so forwarded updates and ``TreesDone`` share system calls with the turn's relays;
        ``tick`` calls it too (a no-op when nothing arrived since).
        """
        if self._xor_parts:
            self._apply_turn_updates()
        if self._done:
            self._send_trees_done()

    def tick(self, now: float) -> None:
        """End the turn (``end_turn``), check the water marks; now and then expire old trees.

        Once per loop turn, after its output was written (queues are measured then).
        """
        self.end_turn()
        io = self.io
        queued = io.peer_queued_bytes()
        tuples = 0
        sent, executed, queued_bytes = self.sent_tuples, self.executed_tuples, \
            io.instance_queued_bytes
        for task in self.connected:  # the largest queue, in bytes and in tuples
            task_bytes = queued_bytes(task)
            if task_bytes > queued:
                queued = task_bytes
            task_tuples = sent[task] - executed[task]
            if task_tuples > tuples:
                tuples = task_tuples
        backpressure = self.backpressure
        change = backpressure.observe(queued, tuples)
        if change is not None:
            log.info("backpressure %s", "started" if change else "stopped")
            frame = frames.control_frame(stmgr_pb2.StmgrToStmgr(
                backpressure=stmgr_pb2.BackpressureSignal(container_index=self.index,
                                                          active=change)))
            for container in self._peer_containers():
                io.to_peer(container, frame)
            self._apply_spout_gate()
        culprits: tuple[str, ...] = ()
        if backpressure.congested:
            culprits = tuple({self.plan.task_component[task] for task in self.connected
                              if backpressure.above_low(io.instance_queued_bytes(task),
                                                        self.queued_tuples(task))})
        backpressure.tick(now, culprits)
        if now >= self._next_expiry:
            self._next_expiry = now + self.config.metrics_interval_ms / 1000.0
            self.trees_expired += self.ledger.expire()

    def _peer_containers(self) -> list[int]:
        return [c for c in self.plan.stmgr_address if c != self.index]

    def _apply_spout_gate(self) -> None:
        """Pause or resume local spouts: stop reading them, and tell them to stop emitting.

        During a restore (effectively once) held spouts emit nothing and must be read: their
        restore reports go through the same connection.
        """
        paused = self.backpressure.spouts_paused
        changed = paused != self._gate_paused
        self._gate_paused = paused
        for task in self.spout_tasks & self.connected:
            self.io.set_reading(task, not paused or self.restoring)
            if changed:
                self._send_gate(task)

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
            self.ended_sources |= ended
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
        elif body == "resume":
            if message.resume.epoch == self.epoch:
                self.restoring = False
                frame = frames.control_frame(stmgr_pb2.StmgrToInstance(resume=message.resume))
                for task in sorted(self.spout_tasks & self.connected):
                    self._send_gate(task)
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
        log.info("restoring checkpoint %d in epoch %d", restore.checkpoint_id, restore.epoch)
        self.epoch, self.restore_checkpoint = restore.epoch, restore.checkpoint_id
        self.restoring = True
        self.restored_tasks = set()
        assert self.gateway is not None  # the TMaster restores only effectively-once topologies
        self.gateway.reset()
        self.ended_sources.clear()
        for task in self.local_tasks:  # restored tasks start counting from zero
            self._reset_queue(task)
        # Every queue is dropped: congestion announced by peers is over (a peer that is still
        # congested says so again), and held spouts must be read for their restore reports.
        self.backpressure.remote.clear()
        self._apply_spout_gate()  # restoring: reads every spout, whatever the congestion
        self._send_fences()
        if self.state is StmgrState.RUNNING:
            frame = frames.control_frame(stmgr_pb2.StmgrToInstance(restore=restore))
            for task in sorted(self.connected & set(self.instance_pids)):
                self.io.to_instance(task, frame)

    def _send_fences(self) -> None:
        """Tell every peer that everything this stmgr sends from now on is of ``epoch``."""
        if self.gateway is None:
            return
        fence = frames.control_frame(stmgr_pb2.StmgrToStmgr(
            fence=stmgr_pb2.EpochFence(container_index=self.index, epoch=self.epoch)))
        for container in self._peer_containers():
            self.io.to_peer(container, fence)

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
        self._send_fences()
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
        """Build the stmgr's metrics, stamped ``timestamp_ms``.

        ``timestamp_ms`` is wall-clock milliseconds since the epoch (0: unstamped). The core's
        thread only: it reads queues the loop changes.
        """
        publish = metrics_pb2.MetricsPublish(component=ids.STMGR_COMPONENT,
                                             task_id=ids.stmgr_metrics_task(self.index),
                                             timestamp_ms=timestamp_ms)
        add = publish.metrics.add
        add(name="__tuples-routed", value=self.tuples_routed)
        add(name="__backpressure-secs", value=self.backpressure.total_secs)
        add(name="__backpressure-episodes", value=self.backpressure.episodes)
        for component, secs in list(self.backpressure.component_secs.items()):
            add(name=f"__backpressure-secs/{component}", value=secs)
        add(name="__tuples-dropped", value=self.tuples_dropped)
        add(name=names.TUPLES_FROM_WORKERS, value=self.tuples_from_workers)
        add(name=names.BYTES_FROM_WORKERS, value=self.bytes_from_workers)
        add(name=names.TUPLES_TO_WORKERS, value=self.tuples_to_workers)
        add(name=names.BYTES_TO_WORKERS, value=self.bytes_to_workers)
        add(name=names.TUPLES_FROM_STMGRS, value=self.tuples_from_stmgrs)
        add(name=names.BYTES_FROM_STMGRS, value=self.bytes_from_stmgrs)
        backpressure = self.backpressure
        add(name=names.TIME_SPENT_BACK_PRESSURE_INITIATED,
            value=round(backpressure.initiated_secs * 1000.0, 3))
        add(name=names.TIME_SPENT_BACK_PRESSURE_AGGR, value=round(backpressure.total_secs * 1000.0, 3))
        for component, secs in list(backpressure.component_secs.items()):
            add(name=names.scoped(names.TIME_SPENT_BACK_PRESSURE_BY_COMPID, component),
                value=round(secs * 1000.0, 3))
        add(name="__instances-lost", value=self.instances_lost)
        add(name="__instances-reregistered", value=self.instance_registrations)
        add(name="__trees-open", value=len(self.ledger))
        add(name="__trees-acked", value=self.trees_acked)
        add(name="__trees-failed", value=self.trees_failed)
        add(name="__trees-expired", value=self.trees_expired)
        add(name="__peer-frames-dropped", value=peer_frames_dropped)
        if self.gateway is not None:
            add(name="__checkpoint-held-frames", value=self.gateway.held_frames)
            add(name="__restore-dropped-frames", value=self.frames_dropped_in_restore)
        now = self.clock()
        queued: dict[str, int] = {}
        age: dict[str, float] = {}
        for task in self.local_tasks - self.spout_tasks:
            component = self.plan.task_component[task]
            queued[component] = queued.get(component, 0) + self.queued_tuples(task)
            age[component] = max(age.get(component, 0.0), self._queue_age_secs(task, now))
        for component in sorted(queued):
            add(name=f"__queued-tuples/{component}", value=queued[component])
            add(name=f"__queue-age-max-ms/{component}", value=round(age[component] * 1000, 1))
        return publish


def _packed(chunks: list) -> bytes:
    """Return uint64 ``chunks`` (NumPy arrays or lists of ints; possibly none) packed as one."""
    if not chunks:
        return b""
    if len(chunks) == 1:
        only = chunks[0]
        return tree_ids.pack_list(only) if type(only) is list else tree_ids.pack(only)
    return tree_ids.pack(np.concatenate([np.asarray(chunk, dtype=np.uint64) for chunk in chunks]))
