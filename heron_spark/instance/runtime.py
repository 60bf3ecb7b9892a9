"""The Heron Instance: one spout or bolt task in its own process.

Threads: the gateway (a ``Connection``'s reader and writer threads, talking to the local
stmgr over loopback, whatever address the stmgr advertises to its peers), the metrics client
(publishes counters on its own thread, so metrics never freeze with user code), the watchdog
(heartbeat; kills the process when one user-code call outlasts
``heron.instance.user.code.timeout.secs``) and the task-execution thread (this module's
loops, running user code). The task thread and the gateway share only the bounded
``in_queue`` (frames from the stmgr) and the connection's bounded send queue (batches to the
stmgr): a slow bolt fills ``in_queue``, the reader stops reading, and TCP flow control carries
the pressure back to the stmgr. A bolt reports how many tuples it executed (``progress``) so
the stmgr bounds queued tuples; a spout stops calling ``next_tuple`` while its stmgr says the
topology is congested (``gate``).
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
import time
import traceback

from heron_spark import _process
from heron_spark.api import api_constants as keys
from heron_spark.api.tuple import HeronTuple, TupleHelper
from heron_spark.container.files import ContainerFiles
from heron_spark.instance.acking import AckBuffer, SpoutTrees
from heron_spark.instance.collector import OutputCollector
from heron_spark.instance.context import InstanceContext
from heron_spark.metrics.client import MetricsClient
from heron_spark.plan.logical import message_timeout_secs
from heron_spark.proto import metrics_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.wire import frames, tuple_batch
from heron_spark.wire.connection import Connection, ConnectionClosed, dial_with_retry

log = logging.getLogger(__name__)
_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
           "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR}
_CLOSED = (0, b"")
_SPOUT_SLICE_SECS = 0.002
_IDLE_WAIT_SECS = 0.001


class _Stop(Exception):
    """Leave the task loop: the stmgr said shut down, or went away."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class InstanceRuntime:
    """Runs one task; the delegate behind the user's ``Spout``/``Bolt`` methods."""

    def __init__(self, files: ContainerFiles, task_id: int, stmgr_port: int) -> None:
        self.files = files
        self.config = files.load_config()
        self.plan = files.load_plan()
        self.task_id = task_id
        self.component_name = self.plan.task_component[task_id]
        self.decl = self.plan.logical.components[self.component_name]
        self.log_path = str(files.instance_log(self.component_name, task_id))
        self.logger = logging.getLogger(f"{self.component_name}.{task_id}")
        self.in_queue: queue.Queue = queue.Queue(maxsize=self.config.instance_in_queue_batches)
        secret = files.load_secret()
        topology = self.plan.logical.name
        host = "127.0.0.1"
        sock = dial_with_retry(host, stmgr_port, secret, topology, "instance", task_id,
                               self.config.startup_timeout_secs)
        self.conn = Connection(sock, f"instance-{task_id}", self._on_frame, self._on_close,
                               max_frame_bytes=self.config.frame_max_bytes,
                               send_capacity_bytes=self.config.instance_out_queue_bytes).start()
        self.context = InstanceContext(self.plan, task_id)
        self.collector: OutputCollector | None = None
        self.component = None
        self.exhausted = False
        self.reliable = (self.plan.logical.reliability_mode
                         == keys.TopologyReliabilityMode.ATLEAST_ONCE)
        self.trees: SpoutTrees | None = None  # a reliable spout's open trees
        self.acks = AckBuffer()
        self.auto_ack = False
        self._current: HeronTuple | None = None  # auto-ack: the tuple in process()
        self._settled = False                     # auto-ack: process() acked or failed it
        self._acks_since: float | None = None     # oldest buffered ack waiting for a flush
        self._flush_secs = self.config.batch_flush_interval_ms / 1000.0
        self.executed = 0
        self._stmgr_gone = False
        self._next_metrics = 0.0
        self._metric_due: dict[str, float] = {}
        self._user_metrics: dict[str, float] = {}  # latest values, gathered on the task thread
        self._gated = False                   # spout: the stmgr said the topology is congested
        self._routed = 0                      # spout: its tuples the stmgr has taken in
        self._unrouted_max = self.config.backpressure_high_water_tuples
        self._busy_since: float | None = time.monotonic()  # task thread in user code since
        self._reported_executed = 0
        self._next_progress = 0.0
        self._task_thread = threading.get_ident()
        self.metrics = MetricsClient(files, secret, topology, task_id,
                                     self.config.metrics_interval_ms / 1000.0,
                                     self.config.frame_max_bytes, self._metrics_snapshot).start()
        if self.config.user_code_timeout_secs > 0:
            _process.set_health_check(self._user_code_health, self._on_stuck)
        self._control(stmgr_pb2.InstanceToStmgr(
            register=stmgr_pb2.RegisterInstance(task_id=task_id, pid=os.getpid())))

    # ---- delegate API (task-execution thread) ----------------------------------------------
    def log(self, message: str, level: str | None = None) -> None:
        self.logger.log(_LEVELS.get((level or "info").lower(), logging.INFO), message)

    def emit(self, values, stream, tup_id, anchors, direct_task, need_task_ids):
        roots = ()
        if self.reliable:
            if self.trees is not None:
                if tup_id is not None:
                    roots = (self.trees.open(tup_id),)
            else:
                if anchors is None and self._current is not None:
                    anchors = (self._current,)  # auto-ack bolts anchor to their input
                if anchors:
                    roots = _roots_of(anchors)
        return self.collector.emit(values, stream, direct_task, need_task_ids, roots)

    def ack(self, tup) -> None:
        """Record ``tup`` processed (at-least-once; nothing to do at-most-once)."""
        if self.reliable and self._settle(tup):
            self.acks.ack(tup)

    def fail(self, tup) -> None:
        """Record ``tup`` failed: its spouts replay their trees (at-least-once)."""
        if self.reliable and self._settle(tup):
            self.acks.fail(tup)

    def _settle(self, tup) -> bool:
        """Return False when ``tup`` is auto-ack's current input and was already settled."""
        if tup is not self._current:
            return True
        if self._settled:
            return False
        self._settled = True
        return True

    def declare_exhausted(self) -> None:
        self.exhausted = True

    def spout_state_store(self) -> "SpoutStateStore":
        """Return where this task keeps its source offsets (the topology's state manager)."""
        return SpoutStateStore(self.config.statemgr, self.plan.logical.name,
                               f"{self.component_name}.{self.context.get_task_index()}")

    # ---- gateway callbacks (reader thread) ------------------------------------------------
    def _on_frame(self, conn: Connection, kind: int, payload: bytes) -> None:
        self.in_queue.put((kind, payload))

    def _on_close(self, conn: Connection) -> None:
        self._stmgr_gone = True
        try:
            self.in_queue.put_nowait(_CLOSED)
        except queue.Full:
            pass  # the task loop also checks _stmgr_gone

    # ---- task-execution thread -------------------------------------------------------------
    def run(self) -> int:
        """Run the task until shutdown; return the process exit code."""
        try:
            held = self._await_start()
            self.component = self.decl.component_class(self)
            self.collector = OutputCollector(
                self.plan, self.task_id, self.context, self._send_batch,
                self.config.batch_max_tuples, self.config.batch_flush_interval_ms / 1000.0)
            config = self.context.get_cluster_config()
            self.component.initialize(config, self.context)
            self._configure_acking(config)
            self.logger.info("task %d of %s started", self.task_id, self.component_name)
            if self.decl.is_spout:
                self.component.activate()
                self._run_spout()
            else:
                self._run_bolt(held)
        except _Stop as stop:
            self._close_component()
            self._gather_user_metrics(force=True)
            self.conn.flush(self.config.kill_grace_secs)
            self.metrics.close()
            return stop.code
        except Exception as exc:  # noqa: BLE001 - user code failed: report, then exit non-zero
            self.logger.exception("user code of %s task %d failed", self.component_name,
                                  self.task_id)
            self._report_failure(exc)
            return 1
        return 0

    def _configure_acking(self, config: dict) -> None:
        if not self.reliable:
            return
        if self.decl.is_spout:
            timeout = message_timeout_secs(config)
            if str(config.get(keys.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True)).lower() == "false":
                timeout = None
            pending = config.get(keys.TOPOLOGY_MAX_SPOUT_PENDING)
            self.trees = SpoutTrees(self.task_id, timeout, int(pending) if pending else None)
        else:
            self.auto_ack = bool(getattr(self.component, "auto_ack", False)) or \
                str(config.get(keys.TOPOLOGY_BOLT_AUTO_ACK, False)).lower() == "true"

    def _await_start(self) -> list:
        held = []
        while True:
            kind, payload = self._next_frame(None)
            if kind == frames.CONTROL:
                message = self._parse_control(payload)
                if message.WhichOneof("body") == "start":
                    return held
            else:
                held.append((kind, payload))

    def _run_spout(self) -> None:
        collector = self.collector
        trees = self.trees
        announced = False
        while True:
            self._busy_since = time.monotonic()  # each slice of next_tuple calls is timed anew
            self._drain_control()
            self._expire_trees()
            # Tuples of this spout not yet taken in by the stmgr stay under the tuple mark.
            limit = self._routed + self._unrouted_max
            if self._gated or collector.pending + collector.sent >= limit:
                collector.flush_all()
                self._wait_control(_IDLE_WAIT_SECS * 10)
            elif not self.exhausted and not (trees is not None and trees.full):
                slice_end = time.monotonic() + _SPOUT_SLICE_SECS
                before = collector.pending + collector.sent
                while not self.exhausted and time.monotonic() < slice_end:
                    self.component.next_tuple()
                    if trees is not None and trees.full:
                        collector.flush_all()  # nothing more until acks come back
                        break
                    if collector.pending + collector.sent >= limit:
                        break
                if collector.pending + collector.sent == before:
                    self._wait_control(_IDLE_WAIT_SECS)
            elif self.exhausted and not announced and not trees:
                collector.flush_all()
                self._control(stmgr_pb2.InstanceToStmgr(
                    exhausted=stmgr_pb2.InstanceExhausted(task_id=self.task_id)))
                announced = True
                self.logger.info("spout task %d exhausted", self.task_id)
            else:
                collector.flush_all()
                self._wait_control(self._spout_wait_secs(announced))
            self._housekeeping()

    def _spout_wait_secs(self, announced: bool) -> float:
        if self.trees is not None and len(self.trees) and not announced:
            return _IDLE_WAIT_SECS * 10  # trees open: wake for their timeouts
        return self.config.metrics_interval_ms / 1000.0

    def _expire_trees(self) -> None:
        if self.trees is None:
            return
        for message_id in self.trees.expired():
            self.exhausted = False  # a bounded spout replays, then declares exhaustion again
            self.component.fail(message_id)

    def _close_trees(self, done: stmgr_pb2.TreesDone) -> None:
        if self.trees is None:
            return
        acked, failed = self.trees.close(done.acked, done.failed)
        for message_id in acked:
            self.component.ack(message_id)
        for message_id in failed:
            self.exhausted = False
            self.component.fail(message_id)

    def _run_bolt(self, held: list) -> None:
        upstream = set(self.plan.upstream_tasks(self.task_id))
        tick_secs = float(self.context.get_cluster_config().get(
            "topology.tick.tuple.freq.secs", 0) or 0)
        next_tick = time.monotonic() + tick_secs if tick_secs > 0 else None
        for kind, payload in held:
            self._handle_bolt_frame(kind, payload, upstream)
        while True:
            now = time.monotonic()
            wake = self.collector.flush_due(now)
            if next_tick is not None:
                if now >= next_tick:
                    self.component.process_tick(HeronTuple(
                        None, TupleHelper.TICK_SOURCE_COMPONENT, TupleHelper.TICK_TUPLE_ID, -1,
                        (), time.time(), ()))
                    next_tick += tick_secs * max(1, int((now - next_tick) / tick_secs) + 1)
                wake = next_tick if wake is None else min(wake, next_tick)
            timeout = self.config.metrics_interval_ms / 1000.0
            if wake is not None:
                timeout = max(0.0, min(timeout, wake - time.monotonic()))
            try:
                kind, payload = self._next_frame(timeout)
            except queue.Empty:
                self._housekeeping()
                self._report_progress(force=True)
                continue
            self._handle_bolt_frame(kind, payload, upstream)
            self._housekeeping()

    def _handle_bolt_frame(self, kind: int, payload: bytes, upstream: set) -> None:
        if kind == frames.CONTROL:
            self._handle_control(self._parse_control(payload))
            return
        header, body = frames.split_data(payload)
        if header.kind == stmgr_pb2.END_OF_STREAM:
            if header.src_task not in upstream:
                return  # replayed after a restart, or already seen
            upstream.discard(header.src_task)
            if not upstream:
                self.component.end_of_input()
                self.collector.flush_all()
                self._send_acks(force=True)
                self._control(stmgr_pb2.InstanceToStmgr(
                    exhausted=stmgr_pb2.InstanceExhausted(task_id=self.task_id)))
                self.logger.info("bolt task %d drained", self.task_id)
            return
        batch = tuple_batch.decode(body)
        source = self.plan.task_component[header.src_task]
        stream, src_task = header.stream, header.src_task
        width = len(self.plan.logical.components[source].outputs[stream].fields)
        process = self.component.process
        now = time.time()
        roots = tuple_batch.row_roots(batch)
        if roots is None:
            for values in tuple_batch.rows(batch, width):
                process(HeronTuple(None, source, stream, src_task, values, now, ()))
        else:
            edge_ids = batch.column(tuple_batch.KEY_COLUMN).to_numpy().tolist()
            tuples = [HeronTuple(key, source, stream, src_task, values, now, tree)
                      for values, key, tree in zip(tuple_batch.rows(batch, width), edge_ids, roots)]
            if self.auto_ack:
                self._process_auto_acked(tuples)
            else:
                for tup in tuples:
                    process(tup)
        self.executed += batch.num_rows
        self._send_acks()
        self._report_progress()

    def _process_auto_acked(self, tuples: list) -> None:
        process = self.component.process
        try:
            for tup in tuples:
                self._current, self._settled = tup, False
                process(tup)
                if not self._settled:
                    self.acks.ack(tup)
        finally:
            self._current = None

    def _send_acks(self, force: bool = False) -> None:
        """Send buffered acks and fails once the emits they may anchor have left.

        Order matters (a child's creation must reach the stmgr before its parent's ack), so
        acks wait while emits are buffered, riding behind the next flush; a bolt that keeps
        emitting flushes everything after at most one flush interval (or when ``force``).
        """
        if not self.acks:
            return
        if self.collector.pending:
            now = time.monotonic()
            if self._acks_since is None:
                self._acks_since = now
            if not force and now - self._acks_since < self._flush_secs:
                return
            self.collector.flush_all()
        self._acks_since = None
        roots, edge_ids, failed = self.acks.take()
        if roots:
            self._control(stmgr_pb2.InstanceToStmgr(
                acks=stmgr_pb2.XorBatch(roots=roots, values=edge_ids)))
        if failed:
            self._control(stmgr_pb2.InstanceToStmgr(fails=stmgr_pb2.FailBatch(roots=failed)))

    def _report_progress(self, force: bool = False) -> None:
        """Tell the stmgr how many tuples this bolt executed (at most once per flush interval,
        or now when ``force``): it bounds the tuples waiting for this bolt."""
        if self.executed == self._reported_executed:
            return
        now = time.monotonic()
        if not force and now < self._next_progress:
            return
        self._next_progress = now + self._flush_secs
        self._reported_executed = self.executed
        self._control(stmgr_pb2.InstanceToStmgr(
            progress=stmgr_pb2.InstanceProgress(executed=self.executed)))

    def _housekeeping(self) -> None:
        self.collector.flush_due(time.monotonic())
        self._send_acks()
        self._report_progress()
        self._gather_user_metrics()

    def _drain_control(self) -> None:
        while True:
            try:
                kind, payload = self.in_queue.get_nowait()
            except queue.Empty:
                return
            self._dispatch_spout_frame(kind, payload)

    def _wait_control(self, timeout: float) -> None:
        try:
            kind, payload = self._next_frame(timeout)
        except queue.Empty:
            self._busy_since = time.monotonic()
            return
        self._dispatch_spout_frame(kind, payload)

    def _dispatch_spout_frame(self, kind: int, payload: bytes) -> None:
        if (kind, payload) == _CLOSED:
            raise _Stop(2)
        if kind == frames.CONTROL:
            self._handle_control(self._parse_control(payload))

    def _next_frame(self, timeout: float | None):
        if self._stmgr_gone and self.in_queue.empty():
            raise _Stop(2)
        self._busy_since = None  # waiting for input is not user code
        item = self.in_queue.get(timeout=timeout)
        self._busy_since = time.monotonic()
        if item == _CLOSED:
            self.logger.warning("stmgr connection closed; exiting")
            raise _Stop(2)
        return item

    def _handle_control(self, message: stmgr_pb2.StmgrToInstance) -> None:
        body = message.WhichOneof("body")
        if body == "trees":
            self._close_trees(message.trees)
        elif body == "gate":
            self._gated = message.gate.paused
            self._routed = message.gate.routed
        elif body == "shutdown":
            reason = tmaster_pb2.ShutdownReason.Name(message.shutdown.reason)
            self.logger.info("shutdown (%s) %s", reason, message.shutdown.detail)
            self.collector.flush_all()
            self._send_acks(force=True)
            raise _Stop(0)

    def _close_component(self) -> None:
        if self.component is not None and self.decl.is_spout:
            try:
                self.component.close()
            except Exception:  # noqa: BLE001 - we are exiting anyway; keep the trace in the log
                self.logger.exception("spout close() failed")

    @staticmethod
    def _parse_control(payload: bytes) -> stmgr_pb2.StmgrToInstance:
        message = stmgr_pb2.StmgrToInstance()
        message.ParseFromString(payload)
        return message

    def _send_batch(self, frame: bytes) -> None:
        busy, self._busy_since = self._busy_since, None  # blocked by backpressure: not user code
        try:
            self.conn.send(frame)
        except ConnectionClosed as exc:
            raise _Stop(2) from exc
        finally:
            if busy is not None:
                self._busy_since = time.monotonic()

    def _control(self, message) -> None:
        try:
            self.conn.send(frames.control_frame(message))
        except ConnectionClosed as exc:
            raise _Stop(2) from exc

    def _report_failure(self, exc: BaseException | None, error: str = "") -> None:
        if exc is not None:
            error = "".join(traceback.format_exception(exc))
        failed = tmaster_pb2.InstanceFailed(task_id=self.task_id, component=self.component_name,
                                            error=error[-8000:], log_path=self.log_path,
                                            exit_code=1)
        try:
            self.conn.send(frames.control_frame(stmgr_pb2.InstanceToStmgr(failed=failed)),
                           timeout=self.config.kill_grace_secs)
            self.conn.flush(self.config.kill_grace_secs)
        except (ConnectionClosed, TimeoutError):
            pass

    # ---- health (watchdog thread) -----------------------------------------------------------
    def _user_code_health(self) -> str | None:
        busy = self._busy_since
        limit = self.config.user_code_timeout_secs
        if busy is None or time.monotonic() - busy <= limit:
            return None
        frame = sys._current_frames().get(self._task_thread)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else ""
        return (f"{self.component_name} task {self.task_id} has been inside one call of user "
                f"code for more than {limit:g} s (heron.instance.user.code.timeout.secs); "
                f"killed and restarted. Its stack:\n{stack}")

    def _on_stuck(self, reason: str) -> None:
        self.logger.error("%s", reason)
        self._report_failure(None, reason)
        logging.shutdown()
        os._exit(1)

    # ---- metrics ---------------------------------------------------------------------------
    def _gather_user_metrics(self, force: bool = False) -> None:
        """Read the user's registered metrics (task thread: they are not thread-safe)."""
        now = time.monotonic()
        if not force and now < self._next_metrics:
            return
        self._next_metrics = now + self.config.metrics_interval_ms / 1000.0
        values = dict(self._user_metrics)
        for name, metric, bucket in self.context.metrics:
            if force or now >= self._metric_due.get(name, 0.0):
                self._metric_due[name] = now + bucket
                value = metric.get_value_and_reset()
                items = value.items() if isinstance(value, dict) else [(None, value)]
                for key, number in items:
                    if isinstance(number, (int, float)):
                        values[name if key is None else f"{name}/{key}"] = float(number)
        self._user_metrics = values

    def _metrics_snapshot(self) -> metrics_pb2.MetricsPublish:
        """Build this task's metrics (metrics-client thread: reads counters only)."""
        publish = metrics_pb2.MetricsPublish(component=self.component_name, task_id=self.task_id,
                                             timestamp_ms=int(time.time() * 1000))
        add = publish.metrics.add
        if self.collector is not None:
            for stream, count in list(self.collector.emitted().items()):
                add(name=f"__emit-count/{stream}", value=count)
        add(name="__execute-count", value=self.executed)
        trees = self.trees
        if trees is not None:
            add(name="__ack-count", value=trees.acked)
            add(name="__fail-count", value=trees.failed)
            add(name="__timeout-count", value=trees.timed_out)
            add(name="__pending-trees", value=len(trees))
            add(name="__complete-latency-ms-total", value=trees.latency_ms_total)
        elif self.reliable:
            add(name="__ack-count", value=self.acks.acked)
            add(name="__fail-count", value=self.acks.failed)
        add(name="__metrics-dropped", value=self.metrics.dropped)
        for name, value in self._user_metrics.items():
            add(name=name, value=value)
        return publish


def _roots_of(anchors) -> tuple[int, ...]:
    """Return the union of the trees of ``anchors`` (tuples received by this bolt)."""
    if not isinstance(anchors, (list, tuple)) or isinstance(anchors, HeronTuple):
        anchors = (anchors,)
    if len(anchors) == 1:
        return getattr(anchors[0], "roots", None) or ()
    return tuple(dict.fromkeys(r for a in anchors for r in (getattr(a, "roots", None) or ())))


class SpoutStateStore:
    """One spout task's saved state (JSON) in the state manager; opened on first use."""

    def __init__(self, statemgr_url: str, topology: str, key: str) -> None:
        self._url = statemgr_url
        self._topology = topology
        self._key = key
        self._manager = None

    def _open(self):
        if self._manager is None:
            from heron_spark.statemgr import open_state_manager

            self._manager = open_state_manager(self._url)
        return self._manager

    def load(self) -> dict | None:
        """Return the last saved state, or None."""
        return self._open().get_spout_state(self._topology, self._key)

    def save(self, state: dict) -> None:
        """Replace the saved state."""
        self._open().set_spout_state(self._topology, self._key, state)
