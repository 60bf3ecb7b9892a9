"""The Metrics Manager: one per container, forwarding the latest metrics to the TMaster.

It collects what instances and the stmgr publish and forwards the latest value of every
metric to the TMaster each interval.

Threads: the listener, one reader per publisher (they update ``_latest`` under a lock), and
the forwarding loop (``run``).
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from heron_spark import _process
from heron_spark.container.files import ContainerFiles
from heron_spark.contract import layout, roles
from heron_spark.contract.exit_codes import ExitCode
from heron_spark.proto import metrics_pb2
from heron_spark.wire import frames
from heron_spark.wire.connection import Connection, ConnectionClosed, Listener, dial

log = logging.getLogger(__name__)


class MetricsManager:
    """See the module docstring."""

    def __init__(self, files: ContainerFiles, container_index: int, tmaster_host: str,
                 tmaster_port: int) -> None:
        self.files = files
        self.config = files.load_config()
        self.secret = files.load_secret()
        self.tls = files.load_tls()
        self.topology = _topology_name(files)
        self.index = container_index
        self.tmaster_address = (tmaster_host, tmaster_port)
        self._latest: dict[tuple[str, int], metrics_pb2.MetricsPublish] = {}
        self._lock = threading.Lock()
        self._clients: list[Connection] = []
        self._client_gone = threading.Condition(self._lock)
        self._stop = threading.Event()
        self.listener = Listener("127.0.0.1", 0, self.secret, self.topology, self._on_peer,
                                 name=f"metricsmgr-{container_index}", tls=self.tls)

    def _on_peer(self, sock, response) -> None:
        if response.role != roles.METRICS_CLIENT:
            sock.close()
            return
        conn = Connection(sock, f"metricsmgr<-{response.id}", self._on_frame, self._forget,
                          max_frame_bytes=self.config.frame_max_bytes)
        with self._lock:
            self._clients.append(conn)
        conn.start()

    def _forget(self, conn: Connection) -> None:
        with self._lock:
            if conn in self._clients:
                self._clients.remove(conn)
                self._client_gone.notify_all()

    def _on_frame(self, conn: Connection, kind: int, payload: bytes) -> None:
        publish = metrics_pb2.MetricsPublish()
        publish.ParseFromString(payload)
        with self._lock:
            self._latest[(publish.component, publish.task_id)] = publish

    def run(self) -> int:
        """Forward snapshots each interval until SIGTERM; return the exit code.

        The container stops the metrics manager last. A lost TMaster connection is dialled
        again each interval: the metrics manager outlives its TMaster's restarts and the
        topology's end, so its exit is never mistaken for a fault.
        """
        self.listener.start()
        _process.write_json_atomic(self.files.ready(layout.METRICSMGR),
                                   {"port": self.listener.port, "pid": os.getpid()})
        signal.signal(signal.SIGTERM, lambda signum, frame: self._stop.set())
        interval = self.config.metrics_interval_ms / 1000.0
        tmaster = self._dial_tmaster(interval)
        while True:
            stopping = self._stop.wait(interval)
            if tmaster is None or tmaster.closed:
                tmaster = self._dial_tmaster(interval)
            if stopping:  # the container stopped its tasks first: read their last snapshots
                self._await_clients(interval)
            if tmaster is not None:
                self._forward(tmaster, interval)
                if stopping:  # the final values, before exiting
                    tmaster.flush(interval)
            if stopping:
                break
        if tmaster is not None:
            tmaster.close()
        self.listener.close()
        return ExitCode.OK

    def _await_clients(self, timeout: float) -> None:
        """Wait (at most ``timeout``) until every client hung up, its last frame read."""
        with self._client_gone:
            if not self._client_gone.wait_for(lambda: not self._clients, timeout):
                log.warning("%d metrics client(s) still connected at the end", len(self._clients))

    def _dial_tmaster(self, timeout: float) -> Connection | None:
        host, port = self.tmaster_address
        try:
            sock = dial(host, port, self.secret, self.topology, roles.METRICSMGR, self.index,
                        timeout=max(timeout, 1.0), tls=self.tls)
        except OSError as exc:
            log.debug("TMaster %s:%d not reachable: %s", host, port, exc)
            return None
        return Connection(sock, "metricsmgr->tmaster", lambda *a: None, lambda c: None,
                          max_frame_bytes=self.config.frame_max_bytes,
                          send_capacity_bytes=4 << 20).start()

    def _forward(self, tmaster: Connection, timeout: float) -> None:
        with self._lock:
            snapshot = metrics_pb2.MetricsSnapshot(container_index=self.index,
                                                   publishes=list(self._latest.values()))
        try:
            tmaster.send(frames.control_frame(snapshot), timeout=timeout)
        except (TimeoutError, ConnectionClosed):
            log.warning("TMaster not taking metrics")


def _topology_name(files: ContainerFiles) -> str:
    """Read the topology's name from the packing plan.

    Not from the logical plan: unpickling it imports the user's modules (and what they
    import) into a process that runs no user code.
    """
    return files.load_packing().topology_name
