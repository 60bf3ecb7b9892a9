"""The tracker API: a small JSON-over-HTTP view of a running topology, served by the driver.

``GET /topology`` (state), ``/topology/physicalplan``, ``/topology/metrics``, and
``/metrics`` in Prometheus text format. Read-only: control goes through the control port
(``heron-spark kill``). Like every heron_spark port it answers only requests that carry the
topology secret: ``Authorization: Bearer <secret>`` (the secret is in the state manager,
readable by its owner only).

Hardened like the binary ports, since anyone who can reach the driver can connect:

- a client has ``idle_timeout_secs`` to send its request line and headers (a connection that
  sends nothing, half a request, or trickles bytes is closed after that long), and each write
  of the reply times out after as long;
- at most ``max_connections`` connections are served at once, one daemon thread each; beyond
  that a new connection is answered ``503`` and closed on the accepting thread, no thread spawned;
- every method is authenticated first (``401``), then anything but GET gets ``405``;
- a client that resets or drops its connection is logged at debug level, never printed.
"""

from __future__ import annotations

import hmac
import io
import json
import logging
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict

from heron_spark.config import TRACKER_IDLE_TIMEOUT_SECS, TRACKER_MAX_CONNECTIONS
from heron_spark.errors import ConfigError
from heron_spark.tmaster.master import TMaster

log = logging.getLogger(__name__)

_REQUEST_LINE_MAX_BYTES = 65536  # as http.server: longer request lines get 414
_DISCARD_BODY_MAX_BYTES = 64 * 1024  # a refused request's body is read (then dropped) up to this
_BUSY_BODY = b"tracker busy: too many open connections; retry later\n"
_BUSY_REPLY = (b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
               b"Retry-After: 1\r\nConnection: close\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY))


def start_tracker(tmaster: TMaster, host: str, port: int, secret: str, *,
                  max_connections: int = 64, idle_timeout_secs: float = 10.0) -> TrackerServer:
    """Serve the tracker API for ``tmaster`` on ``host:port`` (0 = any free port); driver only.

    ``max_connections``: connections served at once (``heron.tracker.max.connections``).
    ``idle_timeout_secs``: seconds a client has to send its request, and per write of the
    reply (``heron.tracker.idle.timeout.secs``). Stop it with ``shutdown()``.
    """
    if max_connections < 1:
        raise ConfigError(TRACKER_MAX_CONNECTIONS, max_connections, "use a value >= 1")
    if not idle_timeout_secs > 0:
        raise ConfigError(TRACKER_IDLE_TIMEOUT_SECS, idle_timeout_secs,
                          "use a positive number of seconds")
    handler = _handler_class(tmaster, f"Bearer {secret}".encode(), idle_timeout_secs)
    server = TrackerServer((host, port), handler, max_connections)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="tracker",
                     daemon=True).start()  # shutdown() returns within 0.1 s
    return server


class TrackerServer(ThreadingHTTPServer):
    """The tracker's HTTP server: one daemon thread per connection, at most ``max_connections``.

    Runs on the driver. Thread-safe: the serving thread admits connections, handler threads
    release them, and ``shutdown`` may be called from any thread but the serving one.
    """

    daemon_threads = True
    block_on_close = False  # handler threads end on their own, within the idle timeout
    request_queue_size = 128  # a burst of connects is accepted (and maybe refused) at once

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 max_connections: int) -> None:
        super().__init__(address, handler)
        self.max_connections = max_connections
        self.refused = 0  # connections closed at once because max_connections were open
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closing = False

    @property
    def open_connections(self) -> int:
        """Return how many connections are being served now."""
        with self._lock:
            return len(self._open)

    def process_request(self, request, client_address) -> None:
        """Serve ``request`` on a new thread, or answer 503 and close it if the server is full."""
        with self._lock:
            admitted = not self._closing and len(self._open) < self.max_connections
            if admitted:
                self._open.add(request)
            else:
                self.refused += 1
        if admitted:
            super().process_request(request, client_address)
            return
        if self.refused == 1:
            log.warning("tracker: %d connections open; refusing more (raise %s to allow more)",
                        self.max_connections, TRACKER_MAX_CONNECTIONS)
        log.debug("tracker: refused %s (%d refused so far)", client_address, self.refused)
        try:
            request.setblocking(False)  # never let a client stall the accepting thread
            request.send(_BUSY_REPLY)
        except OSError:
            pass
        self.shutdown_request(request)

    def shutdown_request(self, request) -> None:
        """Close ``request`` and free its slot."""
        with self._lock:  # under the lock: shutdown() never touches a closed (reused) fd
            self._open.discard(request)
            super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        """Log a failed connection: at debug level if the client dropped it, else as an error."""
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            log.debug("tracker: connection from %s dropped: %r", client_address, error)
        else:
            log.error("tracker: request from %s failed", client_address, exc_info=True)

    def shutdown(self) -> None:
        """Stop serving, close the port and drop every open connection (idempotent)."""
        with self._lock:
            self._closing = True
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        super().shutdown()
        self.server_close()


class _DeadlineReader(io.RawIOBase):
    """Read a socket, failing with TimeoutError once ``deadline`` (time.monotonic) has passed.

    A plain socket timeout restarts with every byte received; this one bounds the whole request.
    Used by one handler thread only.
    """

    def __init__(self, sock: socket.socket, timeout_secs: float) -> None:
        self._sock = sock
        self._timeout = timeout_secs  # the socket's own timeout, restored after each read
        self.deadline = time.monotonic() + timeout_secs

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request was not complete in time")
        self._sock.settimeout(remaining)
        try:
            return self._sock.recv_into(buffer)
        finally:
            self._sock.settimeout(self._timeout)


def _handler_class(tmaster: TMaster, expected: bytes, idle_timeout_secs: float):
    class Handler(BaseHTTPRequestHandler):
        timeout = idle_timeout_secs  # StreamRequestHandler.setup sets it on the socket

        def setup(self) -> None:
            super().setup()
            self.rfile.close()
            self._reader = _DeadlineReader(self.connection, idle_timeout_secs)
            self.rfile = io.BufferedReader(self._reader)

        def handle_one_request(self) -> None:
            # http.server's, except that every method is authenticated before it is looked at
            # and the request line and headers must arrive within the idle timeout.
            self._reader.deadline = time.monotonic() + idle_timeout_secs
            try:
                self.raw_requestline = self.rfile.readline(_REQUEST_LINE_MAX_BYTES + 1)
                if not self.raw_requestline:
                    self.close_connection = True
                    return
                if len(self.raw_requestline) > _REQUEST_LINE_MAX_BYTES:
                    self.requestline = self.request_version = self.command = ""
                    self.send_error(414)
                    return
                if not self.parse_request():
                    return  # parse_request has answered 400 or similar
                self._dispatch()
                self.wfile.flush()
            except TimeoutError as exc:
                log.debug("tracker: closing %s: timed out (%s)", self.client_address, exc)
                self.close_connection = True

        def _dispatch(self) -> None:
            given = (self.headers.get("Authorization") or "").encode()
            if not hmac.compare_digest(given, expected):
                self._refuse(401, "send Authorization: Bearer <topology secret>",
                             ("WWW-Authenticate", "Bearer"))
            elif self.command != "GET":
                self._refuse(405, f"the tracker is read-only: use GET, not {self.command} "
                                  "(to kill a topology, run `heron-spark kill`)", ("Allow", "GET"))
            elif self.path == "/topology":
                self._json(tmaster.status())
            elif self.path == "/topology/physicalplan":
                plan = tmaster.physical_plan
                self._json(MessageToDict(plan) if plan is not None else {})
            elif self.path == "/topology/metrics":
                self._json(tmaster.metrics_by_component())
            elif self.path == "/metrics":
                self._text(_prometheus(tmaster))
            else:
                self._refuse(404, "unknown path; try /topology")

        def _json(self, data) -> None:
            self._reply(json.dumps(data, indent=1).encode(), "application/json")

        def _text(self, text: str) -> None:
            self._reply(text.encode(), "text/plain; version=0.0.4")

        def _reply(self, body: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _refuse(self, code: int, message: str, *headers: tuple[str, str]) -> None:
            """Answer ``code`` with ``message`` as a text body, then close the connection."""
            self._discard_body()  # unread bytes would turn our close into a reset
            body = (message + "\n").encode()
            self.send_response(code)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _discard_body(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                return
            if 0 < length <= _DISCARD_BODY_MAX_BYTES:
                self.rfile.read(length)

        def log_message(self, format: str, *args) -> None:
            log.debug("tracker %s: " + format, self.client_address, *args)

    return Handler


def _prometheus(tmaster: TMaster) -> str:
    lines = []
    for component, values in sorted(tmaster.metrics_by_component().items()):
        for name, value in sorted(values.items()):
            metric = "heron_" + "".join(c if c.isalnum() else "_" for c in name.strip("_"))
            lines.append(f'{metric}{{topology="{tmaster.name}",component="{component}"}} {value}')
    return "\n".join(lines) + "\n"
