"""The Metrics Manager: one per container; collects what instances and the stmgr publish and
forwards the latest value of every metric to the TMaster each interval.

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
from heron_spark.proto import metrics_pb2
from heron_spark.wire import frames
from heron_spark.wire.connection import Connection, ConnectionClosed, Listener, dial_with_retry

log = logging.getLogger(__name__)


class MetricsManager:
    """See the module docstring."""

    def __init__(self, files: ContainerFiles, container_index: int, tmaster_host: str,
                 tmaster_port: int) -> None:
        self.files = files
        self.config = files.load_config()
        self.secret = files.load_secret()
        self.topology = files.load_plan().logical.name
        self.index = container_index
        self.tmaster_address = (tmaster_host, tmaster_port)
        self._latest: dict[tuple[str, int], metrics_pb2.MetricsPublish] = {}
        self._lock = threading.Lock()
        self._clients: list[Connection] = []
        self._stop = threading.Event()
        self.listener = Listener("127.0.0.1", 0, self.secret, self.topology, self._on_peer,
                                 name=f"metricsmgr-{container_index}")

    def _on_peer(self, sock, response) -> None:
        if response.role != "metrics-client":
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

    def _on_frame(self, conn: Connection, kind: int, payload: bytes) -> None:
        publish = metrics_pb2.MetricsPublish()
        publish.ParseFromString(payload)
        with self._lock:
            self._latest[(publish.component, publish.task_id)] = publish

    def run(self) -> int:
        """Forward snapshots until the TMaster goes away; return the exit code."""
        self.listener.start()
        _process.write_json_atomic(self.files.ready("metricsmgr"),
                                   {"port": self.listener.port, "pid": os.getpid()})
        host, port = self.tmaster_address
        sock = dial_with_retry(host, port, self.secret, self.topology, "metricsmgr", self.index,
                               self.config.startup_timeout_secs)
        tmaster = Connection(sock, "metricsmgr->tmaster", lambda *a: None,
                             lambda c: self._stop.set(),
                             max_frame_bytes=self.config.frame_max_bytes,
                             send_capacity_bytes=4 << 20).start()
        # The container SIGTERMs us last: forward the final values before exiting.
        signal.signal(signal.SIGTERM, lambda signum, frame: self._stop.set())
        interval = self.config.metrics_interval_ms / 1000.0
        while not self._stop.wait(interval):
            self._forward(tmaster, interval)
        self._forward(tmaster, interval)
        tmaster.flush(interval)
        self.listener.close()
        return 0

    def _forward(self, tmaster: Connection, timeout: float) -> None:
        with self._lock:
            snapshot = metrics_pb2.MetricsSnapshot(container_index=self.index,
                                                   publishes=list(self._latest.values()))
        try:
            tmaster.send(frames.control_frame(snapshot), timeout=timeout)
        except (TimeoutError, ConnectionClosed):
            log.warning("TMaster not taking metrics")


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m heron_spark.metrics``."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="heron_spark.metrics")
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--topology", required=True)
    parser.add_argument("--container", required=True, type=int)
    parser.add_argument("--tmaster", required=True, help="host:port")
    args = parser.parse_args(argv)
    _process.become_child(f"hs-metrics-{args.container}")
    files = ContainerFiles(args.workdir)
    _process.setup_logging(files.logs / "metricsmgr.log")
    host, _, port = args.tmaster.rpartition(":")
    try:
        return MetricsManager(files, args.container, host, int(port)).run()
    except Exception:  # noqa: BLE001 - log why, exit non-zero
        log.exception("metrics manager failed")
        return 1
