"""Publishing a process's metrics to its container's metrics manager, from a thread of its own.

The stmgr and every instance own one ``MetricsClient``. Its thread calls ``snapshot()`` each
interval and sends the result, so metrics keep flowing while the role's main thread is busy
or blocked (a spout held in ``send`` by backpressure, a bolt in a long ``process``). The
metrics manager may die and come back on a new port: the client then drops samples (counted
in ``dropped``) and dials again with a backoff, reading the port from the manager's ready file.
Nothing here ever blocks the caller's threads.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Callable

from heron_spark.contract import layout, roles
from heron_spark.proto import metrics_pb2
from heron_spark.wire import frames
from heron_spark.wire.connection import Connection, ConnectionClosed, dial
from heron_spark.wire.tls import TlsContexts

log = logging.getLogger(__name__)
_DIAL_TIMEOUT_SECS = 2.0
_SEND_CAPACITY_BYTES = 1 << 20


class MetricsClient:
    """See the module docstring. ``snapshot`` runs on the client's thread: it must only read."""

    def __init__(self, files: layout.ContainerLayout, secret: str, topology: str, client_id: int,
                 interval_secs: float, frame_max_bytes: int,
                 snapshot: Callable[[], metrics_pb2.MetricsPublish], *,
                 tls: TlsContexts | None = None) -> None:
        self._files = files
        self._tls = tls
        self._secret = secret
        self._topology = topology
        self._id = client_id
        self._interval = interval_secs
        self._frame_max = frame_max_bytes
        self._snapshot = snapshot
        self._conn: Connection | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-client", daemon=True)
        self.sent = 0
        self.dropped = 0
        self.connects = 0

    def start(self) -> "MetricsClient":
        """Start publishing every interval; return self."""
        self._thread.start()
        return self

    def close(self, final_flush_secs: float = 1.0) -> None:
        """Publish one last snapshot (best effort), then stop (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(self._interval + _DIAL_TIMEOUT_SECS)
        self._publish()
        if self._conn is not None:
            self._conn.flush(final_flush_secs)
            self._conn.close()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._publish()

    def _publish(self) -> None:
        try:
            frame = frames.control_frame(self._snapshot())
        except Exception:  # noqa: BLE001 - a metric that cannot be read must not kill the role
            log.exception("building the metrics snapshot failed")
            return
        conn = self._connection()
        if conn is None:
            self.dropped += 1
            return
        try:
            conn.send(frame, timeout=0)
            self.sent += 1
        except (TimeoutError, ConnectionClosed):
            self.dropped += 1

    def _connection(self) -> Connection | None:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        try:
            port = json.loads(self._files.ready(layout.METRICSMGR).read_text())["port"]
            sock = dial("127.0.0.1", port, self._secret, self._topology, roles.METRICS_CLIENT,
                        self._id, timeout=_DIAL_TIMEOUT_SECS, tls=self._tls)
        except (OSError, ValueError, KeyError) as exc:
            if self._conn is not None or self.connects == 0:
                log.info("metrics manager not reachable (%s); will retry", exc)
            self._conn = None
            return None
        self.connects += 1
        self._conn = Connection(sock, f"metrics-{self._id}", lambda *a: None,
                                max_frame_bytes=self._frame_max,
                                send_capacity_bytes=_SEND_CAPACITY_BYTES).start()
        return self._conn
