"""The Stream Manager: one per container, routes every tuple of its local instances.

Threads: a listener (local instances and peer stmgrs dial in, secret checked), one reader and
one writer per connection, a heartbeat thread, and the routing thread (``run``), the only one
that touches routing state. Readers hand frames to the routing thread through one bounded
queue; the routing thread never blocks on a send (queues towards instances and peers are
watched by water marks instead; see ``backpressure``), so it always drains and cannot deadlock.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time

import numpy as np

from heron_spark import _process
from heron_spark.container.files import ContainerFiles
from heron_spark.plan.logical import message_timeout_secs
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, physical_plan_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.stmgr import acking
from heron_spark.stmgr.backpressure import Backpressure
from heron_spark.stmgr.routing import Router
from heron_spark.wire import frames, tree_ids, tuple_batch
from heron_spark.wire.connection import Connection, ConnectionClosed, Listener, dial_with_retry

log = logging.getLogger(__name__)
FROM_INSTANCE, FROM_PEER, FROM_TMASTER, CLOSED = "instance", "peer", "tmaster", "closed"
_POLL_SECS = 0.05


class StreamManager:
    """See the module docstring. ``run`` returns the process exit code."""

    def __init__(self, files: ContainerFiles, container_index: int, tmaster_host: str,
                 tmaster_port: int, metrics_port: int, host: str, generation: int) -> None:
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
        self.peers: dict[int, Connection] = {}     # outbound, one per other container
        self.inbound_peers: list[Connection] = []
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
        self.peer_addresses: dict[int, tuple[str, int]] = {}
        self._failure_reported: set[int] = set()
        self.backpressure = Backpressure(self.config.backpressure_high_water_bytes,
                                         self.config.backpressure_low_water_bytes)
        self._registered = threading.Event()
        self._lock = threading.Lock()
        self._stopping = False
        self._started = False
        self.tuples_routed = 0
        self.listener = Listener(host, 0, self.secret, self.topology, self._on_peer,
                                 name=f"stmgr-{container_index}")
        self.metrics_port = metrics_port
        self.tmaster: Connection | None = None
        self.metrics: Connection | None = None

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
                              None, max_frame_bytes=self.config.frame_max_bytes)
            with self._lock:
                self.inbound_peers.append(conn)
            conn.start()
        else:
            log.warning("refusing peer with role %s:%s", response.role, response.id)
            sock.close()

    def _enqueue_closed(self, source: str, ident: int) -> None:
        if not self._stopping:
            self.inbound.put((CLOSED, (source, ident), 0, b""))

    # ---- routing thread ------------------------------------------------------------------
    def run(self) -> int:
        """Serve until the TMaster says shut down (0) or the TMaster goes away (2)."""
        self.listener.start()
        _process.write_json_atomic(self.files.ready("stmgr"),
                                   {"port": self.listener.port, "pid": os.getpid()})
        if not self._registered.wait(self.config.startup_timeout_secs):
            missing = sorted(self.local_tasks - set(self.instances))
            log.error("instances %s never registered", missing)
            return 1
        self._await_instance_registrations()
        self._connect_metrics()
        self._connect_tmaster()
        threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True).start()
        next_metrics = 0.0
        try:
            while True:
                try:
                    item = self.inbound.get(timeout=_POLL_SECS)
                except queue.Empty:
                    item = None
                if item is not None:
                    code = self._dispatch(*item)
                    if code is not None:
                        return code
                self._check_water_marks()
                now = time.monotonic()
                if now >= next_metrics:
                    next_metrics = now + self.config.metrics_interval_ms / 1000.0
                    self._publish_metrics()
                    self.trees_expired += self.ledger.expire()
        finally:
            self._close_all()

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
                header, body = frames.split_data(payload)
                if not self._deliver_local(header.dest_task, frames.frame(frames.DATA, payload)) \
                        and header.kind == stmgr_pb2.TUPLES:
                    self.tuples_dropped += tuple_batch.decode(body).num_rows  # counted lazily
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
        if tuple_batch.ROOTS_COLUMN in batch.schema.names:
            self._route_tracked(header, batch, destinations)
            return
        plain = batch.schema.names[-1] not in tuple_batch.ROUTING_COLUMNS
        stripped = None
        for task, rows in destinations.items():
            out_header = stmgr_pb2.DataHeader(kind=stmgr_pb2.TUPLES, src_task=header.src_task,
                                              stream=header.stream, dest_task=task)
            if rows is None and plain:
                frame = frames.data_frame(out_header, body)  # no re-encoding
            else:
                if stripped is None:
                    stripped = _strip_routing(batch)
                part = stripped if rows is None else stripped.take(rows)
                frame = frames.data_frame(out_header, tuple_batch.encode_batch(part))
            self._send_to_task(task, frame, batch.num_rows if rows is None else len(rows))

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
                                              stream=header.stream, dest_task=task)
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
                self._send(self.peers[container], frames.control_frame(stmgr_pb2.StmgrToStmgr(
                    xor=stmgr_pb2.XorBatch(roots=tree_ids.pack(roots[chosen]),
                                           values=tree_ids.pack(values[chosen])))))

    def _fail_trees(self, roots: np.ndarray) -> None:
        """Fail trees here, or forward the fail to the trees' stmgrs."""
        for container, chosen in self._by_owner(roots):
            if container == self.index:
                self._trees_done([], self.ledger.fail(roots[chosen]))
            elif container in self.peers:
                self._send(self.peers[container], frames.control_frame(stmgr_pb2.StmgrToStmgr(
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
            self._send(self.peers[container], frame)
        elif not self._deliver_local(task, frame):
            self.tuples_dropped += rows  # at-least-once replays them; at-most-once loses them

    def _deliver_local(self, task: int, frame: bytes) -> bool:
        """Send ``frame`` to a local instance; False when it is not connected (restarting)."""
        conn = self.instances.get(task)
        if conn is None or conn.closed:
            return False
        self._send(conn, frame)
        return True

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
            if restarted:
                self.instance_registrations += 1
                log.info("task %d re-registered (pid %d)", task, message.register.pid)
            if self._started:  # a restarted instance joins a running topology
                self._send(self.instances[task], frames.control_frame(stmgr_pb2.StmgrToInstance(
                    start=stmgr_pb2.StartProcessing(generation=self.plan.physical.generation))))
        elif body == "exhausted":
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

    def _on_tmaster(self, message: tmaster_pb2.TmasterToStmgr) -> int | None:
        body = message.WhichOneof("body")
        if body == "plan":
            self._apply_plan(message.plan)
        elif body == "shutdown":
            log.info("shutdown from TMaster: %s %s",
                     tmaster_pb2.ShutdownReason.Name(message.shutdown.reason),
                     message.shutdown.detail)
            self._stopping = True
            frame = frames.control_frame(stmgr_pb2.StmgrToInstance(shutdown=message.shutdown))
            for conn in self.instances.values():
                self._send(conn, frame)
            deadline = time.monotonic() + self.config.kill_grace_secs
            for conn in self.instances.values():
                conn.flush(max(0.0, deadline - time.monotonic()))
            return 0
        return None

    def _apply_plan(self, plan: physical_plan_pb2.PhysicalPlan) -> None:
        self.plan = PlanView(self.plan.logical, self.plan.packing, plan)
        for container, (host, port) in self.plan.stmgr_address.items():
            if container == self.index:
                continue
            current = self.peers.get(container)
            if current is not None and not current.closed \
                    and self.peer_addresses.get(container) == (host, port):
                continue
            if current is not None:
                current.close()  # the peer stmgr restarted elsewhere
                log.info("peer stmgr %d moved to %s:%d; reconnecting", container, host, port)
            self.peer_addresses[container] = (host, port)
            sock = dial_with_retry(host, port, self.secret, self.topology, "stmgr", self.index,
                                   self.config.startup_timeout_secs)
            self.peers[container] = Connection(
                sock, f"stmgr-{self.index}->stmgr-{container}", lambda *a: None, None,
                max_frame_bytes=self.config.frame_max_bytes).start()
        if not self._started:
            self._started = True
            start = frames.control_frame(stmgr_pb2.StmgrToInstance(
                start=stmgr_pb2.StartProcessing(generation=plan.generation)))
            for conn in self.instances.values():
                self._send(conn, start)
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
                if ident in self._failure_reported:
                    self._failure_reported.discard(ident)
                    return None
                failed = tmaster_pb2.InstanceFailed(
                    task_id=ident, component=self.plan.task_component[ident],
                    error="instance process exited or closed its connection",
                    log_path=str(self.files.instance_log(self.plan.task_component[ident], ident)))
                self._to_tmaster(tmaster_pb2.StmgrToTmaster(instance_failed=failed))
            return None
        if kind_source == FROM_TMASTER:
            log.error("TMaster connection lost; shutting down")
            return 2
        return None

    # ---- backpressure ----------------------------------------------------------------------
    def _check_water_marks(self) -> None:
        queued = [c.queued_bytes for c in self.instances.values()]
        queued += [c.queued_bytes for c in self.peers.values()]
        change = self.backpressure.observe(max(queued, default=0))
        if change is not None:
            log.info("backpressure %s", "started" if change else "stopped")
            frame = frames.control_frame(stmgr_pb2.StmgrToStmgr(
                backpressure=stmgr_pb2.BackpressureSignal(container_index=self.index,
                                                          active=change)))
            for conn in self.peers.values():
                self._send(conn, frame)
            self._apply_spout_gate()
        culprits = ()
        if self.backpressure.congested:
            culprits = tuple({self.plan.task_component[task] for task, conn in self.instances.items()
                              if conn.queued_bytes > self.backpressure.low})
        self.backpressure.tick(culprits=culprits)

    def _apply_spout_gate(self) -> None:
        paused = self.backpressure.spouts_paused
        for task in self.spout_tasks:
            conn = self.instances.get(task)
            if conn is not None:
                (conn.pause_reading if paused else conn.resume_reading)()

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

    def _connect_metrics(self) -> None:
        sock = dial_with_retry("127.0.0.1", self.metrics_port, self.secret, self.topology,
                               "metrics-client", -1 - self.index, self.config.startup_timeout_secs)
        self.metrics = Connection(sock, f"stmgr-{self.index}->metricsmgr", lambda *a: None, None,
                                  max_frame_bytes=self.config.frame_max_bytes,
                                  send_capacity_bytes=1 << 20).start()

    def _publish_metrics(self) -> None:
        publish = metrics_pb2.MetricsPublish(component="__stmgr__", task_id=-1 - self.index,
                                             timestamp_ms=int(time.time() * 1000))
        publish.metrics.add(name="__tuples-routed", value=self.tuples_routed)
        publish.metrics.add(name="__backpressure-secs", value=self.backpressure.total_secs)
        publish.metrics.add(name="__backpressure-episodes", value=self.backpressure.episodes)
        for component, secs in self.backpressure.component_secs.items():
            publish.metrics.add(name=f"__backpressure-secs/{component}", value=secs)
        publish.metrics.add(name="__tuples-dropped", value=self.tuples_dropped)
        publish.metrics.add(name="__instances-lost", value=self.instances_lost)
        publish.metrics.add(name="__instances-reregistered", value=self.instance_registrations)
        publish.metrics.add(name="__trees-open", value=len(self.ledger))
        publish.metrics.add(name="__trees-acked", value=self.trees_acked)
        publish.metrics.add(name="__trees-failed", value=self.trees_failed)
        publish.metrics.add(name="__trees-expired", value=self.trees_expired)
        try:
            self.metrics.send(frames.control_frame(publish), timeout=0)
        except (TimeoutError, ConnectionClosed):
            pass

    def _close_all(self) -> None:
        self._stopping = True
        if self.metrics is not None:
            self._publish_metrics()  # final values
            self.metrics.flush(1.0)
        self.listener.close()
        for conn in [*self.instances.values(), *self.peers.values(), *self.inbound_peers,
                     self.tmaster, self.metrics]:
            if conn is not None:
                conn.close()


def _strip_routing(batch):
    names = batch.schema.names
    keep = [i for i, n in enumerate(names) if n not in tuple_batch.ROUTING_COLUMNS]
    return batch.select(keep) if len(keep) != len(names) else batch
