"""The Stream Manager: one per container, routes every tuple of its local instances.

Threads: two listeners (peer stmgrs dial the advertised ``host``; local instances dial a
loopback port, whatever that host is; secret checked on both), one reader and one writer per
connection, a dialer per peer stmgr (``peers.PeerLink``), a heartbeat thread, the metrics
client, and the routing thread (``run``), the only one that touches routing state. Readers
hand frames to the routing thread through one bounded queue; the routing thread never blocks
(not on a send, not on a peer that is down: queues towards instances and peers are watched by
water marks in bytes and in tuples instead; see ``backpressure``), so it always drains and
cannot deadlock. The watchdog stops the heartbeat if the routing thread stops turning.

End of input survives restarts: the stmgr remembers which tasks ended (END_OF_STREAM seen, or
the TMaster's list of drained tasks when this stmgr registers late) and replays their
END_OF_STREAM to a local instance that restarts.
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import threading
import time

import numpy as np

from heron_spark import _process
from heron_spark.container.files import ContainerFiles
from heron_spark.metrics.client import MetricsClient
from heron_spark.plan.logical import message_timeout_secs
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, physical_plan_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.stmgr import acking
from heron_spark.stmgr.backpressure import Backpressure
from heron_spark.stmgr.peers import PeerLink
from heron_spark.stmgr.routing import Router
from heron_spark.wire import frames, tree_ids, tuple_batch
from heron_spark.wire.connection import Connection, ConnectionClosed, Listener, dial_with_retry

log = logging.getLogger(__name__)
FROM_INSTANCE, FROM_PEER, FROM_TMASTER, CLOSED = "instance", "peer", "tmaster", "closed"
LOOPBACK = "127.0.0.1"
_POLL_SECS = 0.05


class StreamManager:
    """See the module docstring. ``run`` returns the process exit code."""

    def __init__(self, files: ContainerFiles, container_index: int, tmaster_host: str,
                 tmaster_port: int, host: str, generation: int) -> None:
        self.files = files
        self.config = files.load_config()
        self.plan: PlanView = files.load_plan()
        self.secret = files.load_secret()
        self.topology = self.plan.logical.name
        self.index = container_index
        self.generation = generation
        self.host = host
        self.tmaster_address = (tmaster_host, tmaster_port)
        self.local_tasks = set(self.plan.tasks_in(container_index))
        self.spout_tasks = {t for t in self.local_tasks
                            if self.plan.logical.components[self.plan.task_component[t]].is_spout}
        self.inbound: queue.Queue = queue.Queue(maxsize=self.config.stmgr_in_queue_frames)
        self.instances: dict[int, Connection] = {}
        self.instance_pids: dict[int, int] = {}
        self.peers: dict[int, PeerLink] = {}       # outbound, one per other container
        self.inbound_peers: set[Connection] = set()
        self.router = Router(self.plan)
        self.ledger = acking.XorLedger(
            expiry_secs=2 * message_timeout_secs(self.plan.logical.config))
        self._rng = np.random.default_rng()
        self._owner = np.full(max(self.plan.task_component) + 1, -1, dtype=np.int64)
        for task, container in self.plan.task_container.items():
            self._owner[task] = container
        self.trees_acked = self.trees_failed = self.trees_expired = 0
        self.tuples_dropped = 0         # tuples for a local instance that was not connected
        self.instances_lost = 0         # instance connections closed while running
        self.instance_registrations = 0  # restarted instances that registered again
        self._failure_reported: set[int] = set()
        self.backpressure = Backpressure(self.config.backpressure_high_water_bytes,
                                         self.config.backpressure_low_water_bytes,
                                         self.config.backpressure_high_water_tuples,
                                         self.config.backpressure_low_water_tuples)
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
        self._routed_step = max(1, self.config.backpressure_high_water_tuples // 4)
        self._loop_tick: float | None = None
        self._registered = threading.Event()
        self._lock = threading.Lock()
        self._stopping = False
        self._started = False
        self.tuples_routed = 0
        self.listener = Listener(host, 0, self.secret, self.topology, self._on_peer,
                                 name=f"stmgr-{container_index}")
        self.local_listener = self.listener if host == LOOPBACK else Listener(
            LOOPBACK, 0, self.secret, self.topology, self._on_peer,
            name=f"stmgr-{container_index}-local")
        self.tmaster: Connection | None = None
        self.metrics: MetricsClient | None = None
        _process.set_health_check(self._routing_health)

    # ---- connections (listener / reader threads) ------------------------------------------
    def _on_peer(self, sock, response) -> None:
        if response.role == "instance" and response.id in self.local_tasks:
            task = response.id
            conn = Connection(sock, f"stmgr-{self.index}<-task-{task}",
                              lambda c, k, p, t=task: self.inbound.put((FROM_INSTANCE, t, k, p)),
                              lambda c, t=task: self._enqueue_closed(FROM_INSTANCE, t),
                              max_frame_bytes=self.config.frame_max_bytes)
            conn.peer_role, conn.peer_id = "instance", task
            with self._lock:
                self.instances[task] = conn
                if self.spout_tasks and task in self.spout_tasks and self.backpressure.spouts_paused:
                    conn.pause_reading()
                if set(self.instances) == self.local_tasks:
                    self._registered.set()
            conn.start()
        elif response.role == "stmgr":
            peer = response.id
            conn = Connection(sock, f"stmgr-{self.index}<-stmgr-{peer}",
                              lambda c, k, p, s=peer: self.inbound.put((FROM_PEER, s, k, p)),
                              self._forget_inbound_peer,
                              max_frame_bytes=self.config.frame_max_bytes)
            with self._lock:
                self.inbound_peers.add(conn)
            conn.start()
        else:
            log.warning("refusing peer with role %s:%s", response.role, response.id)
            sock.close()

    def _forget_inbound_peer(self, conn: Connection) -> None:
        with self._lock:
            self.inbound_peers.discard(conn)

    def _enqueue_closed(self, source: str, ident: int) -> None:
        if not self._stopping:
            self.inbound.put((CLOSED, (source, ident), 0, b""))

    # ---- routing thread ------------------------------------------------------------------
    def run(self) -> int:
        """Serve until the TMaster says shut down (0) or the TMaster goes away (2)."""
        self.listener.start()
        if self.local_listener is not self.listener:
            self.local_listener.start()
        _process.write_json_atomic(self.files.ready("stmgr"),
                                   {"port": self.listener.port,
                                    "local_port": self.local_listener.port, "pid": os.getpid()})
        if not self._registered.wait(self.config.startup_timeout_secs):
            missing = sorted(self.local_tasks - set(self.instances))
            log.error("instances %s never registered", missing)
            return 1
        self._await_instance_registrations()
        self.metrics = MetricsClient(self.files, self.secret, self.topology, -1 - self.index,
                                     self.config.metrics_interval_ms / 1000.0,
                                     self.config.frame_max_bytes, self._metrics_snapshot).start()
        self._connect_tmaster()
        threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True).start()
        next_expiry = 0.0
        try:
            while True:
                try:
                    item = self.inbound.get(timeout=_POLL_SECS)
                except queue.Empty:
                    item = None
                now = time.monotonic()
                self._loop_tick = now
                if item is not None:
                    code = self._dispatch(*item)
                    if code is not None:
                        return code
                self._check_water_marks()
                if now >= next_expiry:
                    next_expiry = now + self.config.metrics_interval_ms / 1000.0
                    self.trees_expired += self.ledger.expire()
        finally:
            self._close_all()

    def _routing_health(self) -> str | None:
        """Watchdog check: the routing thread must turn at least once per stall timeout."""
        tick = self._loop_tick
        if tick is None or self._stopping:
            return None
        idle = time.monotonic() - tick
        if idle > self.config.stall_timeout_secs:
            return f"the routing thread has not turned for {idle:.1f} s"
        return None

    def _await_instance_registrations(self) -> None:
        """Handle the first frame of every instance (its pid) before registering with the TMaster."""
        deadline = time.monotonic() + self.config.startup_timeout_secs
        while len(self.instance_pids) < len(self.local_tasks) and time.monotonic() < deadline:
            try:
                self._dispatch(*self.inbound.get(timeout=_POLL_SECS))
            except queue.Empty:
                continue

    def _dispatch(self, source: str, ident, kind: int, payload: bytes) -> int | None:
        if source == FROM_INSTANCE:
            if kind == frames.DATA:
                self._route(payload)
            else:
                message = stmgr_pb2.InstanceToStmgr()
                message.ParseFromString(payload)
                self._on_instance_control(ident, message)
        elif source == FROM_PEER:
            if kind == frames.DATA:
                header, _ = frames.split_data(payload)
                if header.kind == stmgr_pb2.END_OF_STREAM:
                    self.ended_sources.add(header.src_task)
                if not self._deliver_local(header.dest_task, frames.frame(frames.DATA, payload),
                                           header.rows):
                    self.tuples_dropped += header.rows
            else:
                message = stmgr_pb2.StmgrToStmgr()
                message.ParseFromString(payload)
                self._on_peer_control(message)
        elif source == FROM_TMASTER:
            message = tmaster_pb2.TmasterToStmgr()
            message.ParseFromString(payload)
            return self._on_tmaster(message)
        elif source == CLOSED:
            return self._on_closed(*ident)
        return None

    def _on_peer_control(self, message: stmgr_pb2.StmgrToStmgr) -> None:
        body = message.WhichOneof("body")
        if body == "backpressure":
            signal = message.backpressure
            self.backpressure.set_remote(signal.container_index, signal.active)
            self._apply_spout_gate()
        elif body == "xor":
            done = self.ledger.apply(tree_ids.unpack(message.xor.roots),
                                     tree_ids.unpack(message.xor.values))
            self._trees_done(done, [])
        elif body == "fail":
            self._trees_done([], self.ledger.fail(tree_ids.unpack(message.fail.roots)))

    def _route(self, payload: bytes) -> None:
        header, body = frames.split_data(payload)
        batch = tuple_batch.decode(body)
        destinations = self.router.route(header.src_task, header.stream, batch)
        self.tuples_routed += batch.num_rows
        if header.src_task in self.spout_tasks:
            self._count_routed(header.src_task, batch.num_rows)
        if tuple_batch.ROOTS_COLUMN in batch.schema.names:
            self._route_tracked(header, batch, destinations)
            return
        plain = batch.schema.names[-1] not in tuple_batch.ROUTING_COLUMNS
        stripped = None
        for task, rows in destinations.items():
            count = batch.num_rows if rows is None else len(rows)
            out_header = stmgr_pb2.DataHeader(kind=stmgr_pb2.TUPLES, src_task=header.src_task,
                                              stream=header.stream, dest_task=task, rows=count)
            if rows is None and plain:
                frame = frames.data_frame(out_header, body)  # no re-encoding
            else:
                if stripped is None:
                    stripped = _strip_routing(batch)
                part = stripped if rows is None else stripped.take(rows)
                frame = frames.data_frame(out_header, tuple_batch.encode_batch(part))
            self._send_to_task(task, frame, count)

    def _route_tracked(self, header: stmgr_pb2.DataHeader, batch, destinations: dict) -> None:
        """Route a batch of tree members: a fresh edge id per copy, XORed into its roots."""
        stripped = _strip_routing(batch)
        update_roots, update_values = [], []
        for task, rows in destinations.items():
            part = stripped if rows is None else stripped.take(rows)
            keys = self._rng.integers(1, np.iinfo(np.uint64).max, size=part.num_rows,
                                      dtype=np.uint64, endpoint=True)
            flat, counts = tuple_batch.root_lists(part.column(tuple_batch.ROOTS_COLUMN))
            update_roots.append(flat)
            update_values.append(np.repeat(keys, counts))
            out_header = stmgr_pb2.DataHeader(kind=stmgr_pb2.TUPLES, src_task=header.src_task,
                                              stream=header.stream, dest_task=task,
                                              rows=part.num_rows)
            self._send_to_task(task, frames.data_frame(
                out_header, tuple_batch.encode_batch(tuple_batch.with_keys(part, keys))),
                part.num_rows)
        roots = np.concatenate(update_roots) if update_roots else np.empty(0, np.uint64)
        values = np.concatenate(update_values) if update_values else np.empty(0, np.uint64)
        if header.src_task in self.spout_tasks:
            new, _ = tuple_batch.root_lists(stripped.column(tuple_batch.ROOTS_COLUMN))
            self._trees_done(self.ledger.start(new, roots, values), [])
        else:
            self._xor_into_trees(roots, values)

    def _xor_into_trees(self, roots: np.ndarray, values: np.ndarray) -> None:
        """Apply (root, value) XOR updates here, or forward them to the trees' stmgrs."""
        for container, chosen in self._by_owner(roots):
            if container == self.index:
                self._trees_done(self.ledger.apply(roots[chosen], values[chosen]), [])
            elif container in self.peers:
                self.peers[container].send(frames.control_frame(stmgr_pb2.StmgrToStmgr(
                    xor=stmgr_pb2.XorBatch(roots=tree_ids.pack(roots[chosen]),
                                           values=tree_ids.pack(values[chosen])))))

    def _fail_trees(self, roots: np.ndarray) -> None:
        """Fail trees here, or forward the fail to the trees' stmgrs."""
        for container, chosen in self._by_owner(roots):
            if container == self.index:
                self._trees_done([], self.ledger.fail(roots[chosen]))
            elif container in self.peers:
                self.peers[container].send(frames.control_frame(stmgr_pb2.StmgrToStmgr(
                    fail=stmgr_pb2.FailBatch(roots=tree_ids.pack(roots[chosen])))))

    def _by_owner(self, roots: np.ndarray):
        """Yield (container owning the trees, mask of ``roots``) for each owner present."""
        if roots.size == 0:
            return
        owners = self._owner[tree_ids.root_task(roots)]
        for container in np.unique(owners).tolist():
            yield container, owners == container

    def _trees_done(self, acked: list[int], failed: list[int]) -> None:
        """Tell each local spout task which of its trees completed or failed."""
        if not acked and not failed:
            return
        self.trees_acked += len(acked)
        self.trees_failed += len(failed)
        by_task: dict[int, tuple[list, list]] = {}
        for root in acked:
            by_task.setdefault(root >> tree_ids.ROOT_TASK_SHIFT, ([], []))[0].append(root)
        for root in failed:
            by_task.setdefault(root >> tree_ids.ROOT_TASK_SHIFT, ([], []))[1].append(root)
        for task, (done, lost) in by_task.items():
            conn = self.instances.get(task)
            if conn is None or conn.closed:
                continue  # the spout restarted: it forgot these trees and replays by itself
            self._send(conn, frames.control_frame(stmgr_pb2.StmgrToInstance(
                trees=stmgr_pb2.TreesDone(acked=tree_ids.pack(done), failed=tree_ids.pack(lost)))))

    def _send_to_task(self, task: int, frame: bytes, rows: int = 0) -> None:
        container = self.plan.task_container[task]
        if container != self.index:
            self.peers[container].send(frame)
        elif not self._deliver_local(task, frame, rows):
            self.tuples_dropped += rows  # at-least-once replays them; at-most-once loses them

    def _deliver_local(self, task: int, frame: bytes, rows: int = 0) -> bool:
        """Send ``frame`` (``rows`` tuples) to a local instance; False when it is not connected
        (restarting)."""
        conn = self.instances.get(task)
        if conn is None or conn.closed:
            return False
        self._send(conn, frame)
        if rows:
            self.sent_tuples[task] += rows
            self._sent_marks[task].append((self.sent_tuples[task], time.monotonic()))
        return True

    def _queued_tuples(self, task: int) -> int:
        """Tuples handed to local ``task`` that it has not executed yet."""
        return self.sent_tuples[task] - self.executed_tuples[task]

    def _queue_age_secs(self, task: int, now: float) -> float:
        """How long the oldest tuple waiting for local ``task`` has waited."""
        marks = self._sent_marks[task]
        return now - marks[0][1] if marks else 0.0

    def _send(self, conn: Connection, frame: bytes) -> None:
        try:
            conn.send(frame)
        except ConnectionClosed:
            log.warning("%s closed; frame not sent", conn.name)

    def _on_instance_control(self, task: int, message: stmgr_pb2.InstanceToStmgr) -> None:
        body = message.WhichOneof("body")
        if body == "register":
            restarted = task in self.instance_pids
            self.instance_pids[task] = message.register.pid
            self._reset_queue(task)
            if restarted:
                self.instance_registrations += 1
                log.info("task %d re-registered (pid %d)", task, message.register.pid)
            if self._started:  # a restarted instance joins a running topology
                self._start_instance(task)
        elif body == "progress":
            self.executed_tuples[task] = message.progress.executed
            marks = self._sent_marks[task]
            while marks and marks[0][0] <= message.progress.executed:
                marks.popleft()
        elif body == "exhausted":
            self.ended_sources.add(task)
            header = stmgr_pb2.DataHeader(kind=stmgr_pb2.END_OF_STREAM, src_task=task)
            for dest in self.plan.downstream_tasks(task):
                header.dest_task = dest
                self._send_to_task(dest, frames.data_frame(header))
            self._to_tmaster(tmaster_pb2.StmgrToTmaster(
                drained=tmaster_pb2.TaskDrained(task_ids=[task])))
        elif body == "failed":
            self._failure_reported.add(task)  # its disconnect is the same failure
            self._to_tmaster(tmaster_pb2.StmgrToTmaster(instance_failed=message.failed))
        elif body == "acks":
            self._xor_into_trees(tree_ids.unpack(message.acks.roots),
                                 tree_ids.unpack(message.acks.values))
        elif body == "fails":
            self._fail_trees(tree_ids.unpack(message.fails.roots))

    def _reset_queue(self, task: int) -> None:
        """A (re)started instance holds nothing yet: what was queued for the old one is gone."""
        self.sent_tuples[task] = self.executed_tuples[task] = 0
        self.routed_from[task] = self._routed_reported[task] = 0
        self._sent_marks[task].clear()

    def _count_routed(self, spout: int, rows: int) -> None:
        """Count a local spout's routed tuples; tell it every quarter of the tuple high mark,
        so it never has more than the mark on its way here."""
        self.routed_from[spout] += rows
        if self.routed_from[spout] - self._routed_reported[spout] >= self._routed_step:
            self._send_gate(spout)

    def _send_gate(self, spout: int) -> None:
        conn = self.instances.get(spout)
        if conn is not None:
            self._routed_reported[spout] = self.routed_from[spout]
            self._send(conn, frames.control_frame(stmgr_pb2.StmgrToInstance(
                gate=stmgr_pb2.SpoutGate(paused=self._gate_paused,
                                         routed=self.routed_from[spout]))))

    def _start_instance(self, task: int) -> None:
        """Start a (re)registered instance: processing, the spout gate, ended upstreams."""
        conn = self.instances[task]
        self._send(conn, frames.control_frame(stmgr_pb2.StmgrToInstance(
            start=stmgr_pb2.StartProcessing(generation=self.plan.physical.generation))))
        if task in self.spout_tasks:
            self._send_gate(task)
        self._replay_ends([task], self.ended_sources)

    def _replay_ends(self, tasks, sources) -> None:
        """Send local ``tasks`` the END_OF_STREAM of each of their ``sources`` that ended."""
        for task in tasks:
            upstream = set(self.plan.upstream_tasks(task))
            for source in sorted(upstream & set(sources)):
                self._deliver_local(task, frames.data_frame(stmgr_pb2.DataHeader(
                    kind=stmgr_pb2.END_OF_STREAM, src_task=source, dest_task=task)))

    def _on_tmaster(self, message: tmaster_pb2.TmasterToStmgr) -> int | None:
        body = message.WhichOneof("body")
        if body == "plan":
            self._apply_plan(message.plan)
        elif body == "drained":
            ended = set(message.drained.task_ids) - self.ended_sources
            self.ended_sources |= ended
            if self._started and ended:
                log.info("tasks %s ended before this stmgr registered; replaying their end of "
                         "stream", sorted(ended))
                self._replay_ends(sorted(self.instances), ended)
        elif body == "shutdown":
            log.info("shutdown from TMaster: %s %s",
                     tmaster_pb2.ShutdownReason.Name(message.shutdown.reason),
                     message.shutdown.detail)
            self._stopping = True
            self._announce_stop()
            frame = frames.control_frame(stmgr_pb2.StmgrToInstance(shutdown=message.shutdown))
            for conn in self.instances.values():
                self._send(conn, frame)
            deadline = time.monotonic() + self.config.kill_grace_secs
            for conn in self.instances.values():
                conn.flush(max(0.0, deadline - time.monotonic()))
            return 0
        return None

    def _announce_stop(self) -> None:
        """Tell the container's supervisor this stmgr is ending for good, before any instance
        can notice (so their exits are not restarted)."""
        _process.write_json_atomic(self.files.stmgr_stopping, {"pid": os.getpid()})

    def _apply_plan(self, plan: physical_plan_pb2.PhysicalPlan) -> None:
        """Take a new physical plan: (re)target peer links (dialled in the background) and, the
        first time, start the local instances."""
        self.plan = PlanView(self.plan.logical, self.plan.packing, plan)
        for container, (host, port) in self.plan.stmgr_address.items():
            if container == self.index:
                continue
            link = self.peers.get(container)
            if link is None:
                link = self.peers[container] = PeerLink(
                    f"stmgr-{self.index}->stmgr-{container}", self.secret, self.topology,
                    self.index, self.config.frame_max_bytes,
                    2 * self.config.backpressure_high_water_bytes)
            link.retarget(host, port)
        if not self._started:
            self._started = True
            for task in sorted(self.instances):
                self._start_instance(task)
            log.info("physical plan generation %d applied; %d local instances started",
                     plan.generation, len(self.instances))

    def _on_closed(self, kind_source: str, ident: int) -> int | None:
        """React to a lost connection: an instance (report it) or the TMaster (exit)."""
        if self._stopping:
            return None
        if kind_source == FROM_INSTANCE:
            if ident in self.instances and self.instances[ident].closed:
                log.error("instance task %d disconnected", ident)
                self.instances_lost += 1
                self._reset_queue(ident)
                if ident in self._failure_reported:
                    self._failure_reported.discard(ident)
                    return None
                note = self.files.stall_note(f"task-{ident}")
                try:
                    error = note.read_text()
                except OSError:
                    error = "instance process exited or closed its connection"
                failed = tmaster_pb2.InstanceFailed(
                    task_id=ident, component=self.plan.task_component[ident], error=error,
                    log_path=str(self.files.instance_log(self.plan.task_component[ident], ident)))
                self._to_tmaster(tmaster_pb2.StmgrToTmaster(instance_failed=failed))
            return None
        if kind_source == FROM_TMASTER:
            log.error("TMaster connection lost; shutting down")
            self._announce_stop()
            return 2
        return None

    # ---- backpressure ----------------------------------------------------------------------
    def _check_water_marks(self) -> None:
        queued = [c.queued_bytes for c in self.instances.values()]
        queued += [c.queued_bytes for c in self.peers.values()]
        tuples = max((self._queued_tuples(t) for t in self.instances), default=0)
        change = self.backpressure.observe(max(queued, default=0), tuples)
        if change is not None:
            log.info("backpressure %s", "started" if change else "stopped")
            frame = frames.control_frame(stmgr_pb2.StmgrToStmgr(
                backpressure=stmgr_pb2.BackpressureSignal(container_index=self.index,
                                                          active=change)))
            for link in self.peers.values():
                link.send(frame)
            self._apply_spout_gate()
        culprits = ()
        if self.backpressure.congested:
            culprits = tuple({self.plan.task_component[task] for task, conn in self.instances.items()
                              if self.backpressure.above_low(conn.queued_bytes,
                                                             self._queued_tuples(task))})
        self.backpressure.tick(culprits=culprits)

    def _apply_spout_gate(self) -> None:
        """Pause or resume local spouts: stop reading them, and tell them to stop emitting."""
        paused = self.backpressure.spouts_paused
        changed = paused != self._gate_paused
        self._gate_paused = paused
        for task in self.spout_tasks:
            conn = self.instances.get(task)
            if conn is not None:
                (conn.pause_reading if paused else conn.resume_reading)()
                if changed:
                    self._send_gate(task)

    # ---- TMaster and metrics ---------------------------------------------------------------
    def _connect_tmaster(self) -> None:
        host, port = self.tmaster_address
        sock = dial_with_retry(host, port, self.secret, self.topology, "stmgr", self.index,
                               self.config.startup_timeout_secs)
        self.tmaster = Connection(sock, f"stmgr-{self.index}->tmaster",
                                  lambda c, k, p: self.inbound.put((FROM_TMASTER, 0, k, p)),
                                  lambda c: self._enqueue_closed(FROM_TMASTER, 0),
                                  max_frame_bytes=self.config.frame_max_bytes).start()
        register = tmaster_pb2.RegisterStmgr(container_index=self.index, host=self.host,
                                             data_port=self.listener.port, pid=os.getpid(),
                                             generation=self.generation)
        for task in sorted(self.local_tasks):
            register.instances.add(task_id=task, component=self.plan.task_component[task],
                                   component_index=self.plan.task_index[task],
                                   container_index=self.index,
                                   pid=self.instance_pids.get(task, 0))
        self._to_tmaster(tmaster_pb2.StmgrToTmaster(register=register))

    def _to_tmaster(self, message: tmaster_pb2.StmgrToTmaster) -> None:
        if self.tmaster is not None:
            self._send(self.tmaster, frames.control_frame(message))

    def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000.0
        while not self._stopping and self.tmaster is not None and not self.tmaster.closed:
            self._to_tmaster(tmaster_pb2.StmgrToTmaster(heartbeat=tmaster_pb2.StmgrHeartbeat(
                container_index=self.index, sent_at_ms=int(time.time() * 1000))))
            time.sleep(interval)

    def _metrics_snapshot(self) -> metrics_pb2.MetricsPublish:
        """Build the stmgr's metrics (metrics-client thread: reads counters only)."""
        publish = metrics_pb2.MetricsPublish(component="__stmgr__", task_id=-1 - self.index,
                                             timestamp_ms=int(time.time() * 1000))
        add = publish.metrics.add
        add(name="__tuples-routed", value=self.tuples_routed)
        add(name="__backpressure-secs", value=self.backpressure.total_secs)
        add(name="__backpressure-episodes", value=self.backpressure.episodes)
        for component, secs in list(self.backpressure.component_secs.items()):
            add(name=f"__backpressure-secs/{component}", value=secs)
        add(name="__tuples-dropped", value=self.tuples_dropped)
        add(name="__instances-lost", value=self.instances_lost)
        add(name="__instances-reregistered", value=self.instance_registrations)
        add(name="__trees-open", value=len(self.ledger))
        add(name="__trees-acked", value=self.trees_acked)
        add(name="__trees-failed", value=self.trees_failed)
        add(name="__trees-expired", value=self.trees_expired)
        add(name="__peer-frames-dropped",
            value=sum(link.dropped_frames for link in list(self.peers.values())))
        now = time.monotonic()
        queued: dict[str, int] = {}
        age: dict[str, float] = {}
        for task in self.local_tasks - self.spout_tasks:
            component = self.plan.task_component[task]
            queued[component] = queued.get(component, 0) + self._queued_tuples(task)
            age[component] = max(age.get(component, 0.0), self._queue_age_secs(task, now))
        for component in sorted(queued):
            add(name=f"__queued-tuples/{component}", value=queued[component])
            add(name=f"__queue-age-max-ms/{component}", value=round(age[component] * 1000, 1))
        return publish

    def _close_all(self) -> None:
        self._stopping = True
        if self.metrics is not None:
            self.metrics.close()  # publishes the final values
        self.listener.close()
        self.local_listener.close()
        for link in self.peers.values():
            link.close()
        for conn in [*self.instances.values(), *list(self.inbound_peers), self.tmaster]:
            if conn is not None:
                conn.close()


def _strip_routing(batch):
    names = batch.schema.names
    keep = [i for i, n in enumerate(names) if n not in tuple_batch.ROUTING_COLUMNS]
    return batch.select(keep) if len(keep) != len(names) else batch
