"""The Heron Instance: one spout or bolt task in its own process.

Threads: the gateway (a ``Connection``'s reader and writer threads, talking to the local
stmgr) and the task-execution thread (this module's loops, running user code). They share
only the bounded ``in_queue`` (frames from the stmgr) and the connection's bounded send queue
(batches to the stmgr): a slow bolt fills ``in_queue``, the reader stops reading, and TCP
flow control carries the pressure back to the stmgr.
"""

from __future__ import annotations

import logging
import os
import queue
import time
import traceback

from heron_spark.api.tuple import Tuple, TupleHelper
from heron_spark.container.files import ContainerFiles
from heron_spark.instance.collector import OutputCollector
from heron_spark.instance.context import InstanceContext
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

    def __init__(self, files: ContainerFiles, task_id: int, stmgr_port: int,
                 metrics_port: int) -> None:
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
        metrics_sock = dial_with_retry(host, metrics_port, secret, topology, "metrics-client",
                                       task_id, self.config.startup_timeout_secs)
        self.metrics_conn = Connection(metrics_sock, f"metrics-{task_id}", lambda *a: None,
                                       max_frame_bytes=self.config.frame_max_bytes,
                                       send_capacity_bytes=1 << 20).start()
        self.context = InstanceContext(self.plan, task_id)
        self.collector: OutputCollector | None = None
        self.component = None
        self.exhausted = False
        self.executed = 0
        self.metrics_dropped = 0
        self._stmgr_gone = False
        self._next_metrics = 0.0
        self._metric_due: dict[str, float] = {}
        self._control(stmgr_pb2.InstanceToStmgr(
            register=stmgr_pb2.RegisterInstance(task_id=task_id, pid=os.getpid())))

    # ---- delegate API (task-execution thread) ----------------------------------------------
    def log(self, message: str, level: str | None = None) -> None:
        self.logger.log(_LEVELS.get((level or "info").lower(), logging.INFO), message)

    def emit(self, values, stream, tup_id, anchors, direct_task, need_task_ids):
        return self.collector.emit(values, stream, direct_task, need_task_ids)

    def ack(self, tup) -> None:
        """At-most-once: nothing to track."""

    def fail(self, tup) -> None:
        """At-most-once: nothing to replay."""

    def declare_exhausted(self) -> None:
        self.exhausted = True

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
            self.component.initialize(self.context.get_cluster_config(), self.context)
            self.logger.info("task %d of %s started", self.task_id, self.component_name)
            if self.decl.is_spout:
                self.component.activate()
                self._run_spout()
            else:
                self._run_bolt(held)
        except _Stop as stop:
            self._close_component()
            self._publish_metrics(force=True)
            self.conn.flush(self.config.kill_grace_secs)
            self.metrics_conn.flush(1.0)
            return stop.code
        except Exception as exc:  # noqa: BLE001 - user code failed: report, then exit non-zero
            self.logger.exception("user code of %s task %d failed", self.component_name,
                                  self.task_id)
            self._report_failure(exc)
            return 1
        return 0

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
        announced = False
        while True:
            self._drain_control()
            if not self.exhausted:
                slice_end = time.monotonic() + _SPOUT_SLICE_SECS
                before = collector.pending + sum(collector.emitted().values())
                while not self.exhausted and time.monotonic() < slice_end:
                    self.component.next_tuple()
                if collector.pending + sum(collector.emitted().values()) == before:
                    self._wait_control(_IDLE_WAIT_SECS)
            elif not announced:
                collector.flush_all()
                self._control(stmgr_pb2.InstanceToStmgr(
                    exhausted=stmgr_pb2.InstanceExhausted(task_id=self.task_id)))
                announced = True
                self.logger.info("spout task %d exhausted", self.task_id)
            else:
                self._wait_control(self.config.metrics_interval_ms / 1000.0)
            self._housekeeping()

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
                    self.component.process_tick(Tuple(None, TupleHelper.TICK_SOURCE_COMPONENT,
                                                      TupleHelper.TICK_TUPLE_ID, -1, ()))
                    next_tick += tick_secs * max(1, int((now - next_tick) / tick_secs) + 1)
                wake = next_tick if wake is None else min(wake, next_tick)
            timeout = self.config.metrics_interval_ms / 1000.0
            if wake is not None:
                timeout = max(0.0, min(timeout, wake - time.monotonic()))
            try:
                kind, payload = self._next_frame(timeout)
            except queue.Empty:
                self._housekeeping()
                continue
            self._handle_bolt_frame(kind, payload, upstream)
            self._housekeeping()

    def _handle_bolt_frame(self, kind: int, payload: bytes, upstream: set) -> None:
        if kind == frames.CONTROL:
            self._handle_control(self._parse_control(payload))
            return
        header, body = frames.split_data(payload)
        if header.kind == stmgr_pb2.END_OF_STREAM:
            upstream.discard(header.src_task)
            if not upstream:
                self.component.end_of_input()
                self.collector.flush_all()
                self._control(stmgr_pb2.InstanceToStmgr(
                    exhausted=stmgr_pb2.InstanceExhausted(task_id=self.task_id)))
                self.logger.info("bolt task %d drained", self.task_id)
            return
        batch = tuple_batch.decode(body)
        source = self.plan.task_component[header.src_task]
        stream, src_task = header.stream, header.src_task
        width = len(self.plan.logical.components[source].outputs[stream].fields)
        process = self.component.process
        for values in tuple_batch.rows(batch, width):
            process(Tuple(None, source, stream, src_task, values))
        self.executed += batch.num_rows

    def _housekeeping(self) -> None:
        self.collector.flush_due(time.monotonic())
        self._publish_metrics()

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
        item = self.in_queue.get(timeout=timeout)
        if item == _CLOSED:
            self.logger.warning("stmgr connection closed; exiting")
            raise _Stop(2)
        return item

    def _handle_control(self, message: stmgr_pb2.StmgrToInstance) -> None:
        if message.WhichOneof("body") == "shutdown":
            reason = tmaster_pb2.ShutdownReason.Name(message.shutdown.reason)
            self.logger.info("shutdown (%s) %s", reason, message.shutdown.detail)
            self.collector.flush_all()
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
        try:
            self.conn.send(frame)
        except ConnectionClosed as exc:
            raise _Stop(2) from exc

    def _control(self, message) -> None:
        try:
            self.conn.send(frames.control_frame(message))
        except ConnectionClosed as exc:
            raise _Stop(2) from exc

    def _report_failure(self, exc: BaseException) -> None:
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

    def _publish_metrics(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now < self._next_metrics:
            return
        self._next_metrics = now + self.config.metrics_interval_ms / 1000.0
        publish = metrics_pb2.MetricsPublish(component=self.component_name, task_id=self.task_id,
                                             timestamp_ms=int(time.time() * 1000))
        if self.collector is not None:
            for stream, count in self.collector.emitted().items():
                publish.metrics.add(name=f"__emit-count/{stream}", value=count)
        publish.metrics.add(name="__execute-count", value=self.executed)
        for name, metric, bucket in self.context.metrics:
            if force or now >= self._metric_due.get(name, 0.0):
                self._metric_due[name] = now + bucket
                value = metric.get_value_and_reset()
                items = value.items() if isinstance(value, dict) else [(None, value)]
                for key, number in items:
                    if isinstance(number, (int, float)):
                        full = name if key is None else f"{name}/{key}"
                        publish.metrics.add(name=full, value=float(number))
        try:
            self.metrics_conn.send(frames.control_frame(publish), timeout=0)
        except (TimeoutError, ConnectionClosed):
            self.metrics_dropped += 1
