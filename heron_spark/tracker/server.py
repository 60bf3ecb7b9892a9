"""The tracker's HTTP shell: sockets, threads, limits; the answers come from ``app.TrackerApp``.

Hardened, since anyone who can reach the port can connect:

- a client has ``idle_timeout_secs`` to send its request line and headers (a connection that
  sends nothing, half a request, or trickles bytes is closed after that long), and each write
  of the reply times out after as long; a request body (POST) is read within the same deadline
  and is at most ``BODY_MAX_BYTES``;
- at most ``max_connections`` connections are served at once, one daemon thread each; beyond
  that a new connection is answered ``503`` (over TLS: not answered) and closed on the
  accepting thread, no thread spawned;
- every method is authenticated first (``401``), then checked (``405``) — by the app;
- a client that resets or drops its connection is logged at debug level, never printed;
- with a TLS context (the topology's TLS on: ``wire.tls.tracker_server_context``) it serves
  only HTTPS: the handshake runs on the connection's thread within the idle timeout, and a
  client speaking plain HTTP (or not trusting the certificate) gets no reply, only a close.

Runs wherever a tracker runs: a submitting driver, or ``heron-spark tracker``.
"""

from __future__ import annotations

import io
import logging
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from heron_spark.config import TRACKER_IDLE_TIMEOUT_SECS, TRACKER_MAX_CONNECTIONS
from heron_spark.errors import ConfigError
from heron_spark.tracker.app import TrackerApp
from heron_spark.tracker.http import Request, Response

log = logging.getLogger(__name__)

_REQUEST_LINE_MAX_BYTES = 65536  # as http.server: longer request lines get 414
BODY_MAX_BYTES = 64 * 1024  # a request body is read up to this (POST of a management verb)
_BUSY_BODY = b"tracker busy: too many open connections; retry later\n"
_BUSY_REPLY = (b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
               b"Retry-After: 1\r\nConnection: close\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY))


def serve(app: TrackerApp, host: str, port: int, *, max_connections: int = 64,
          idle_timeout_secs: float = 10.0, tls: ssl.SSLContext | None = None) -> TrackerServer:
    """Serve ``app`` (``app.handle(Request) -> Response``) on ``host:port`` (0: any free port).

    ``max_connections``: connections served at once (``heron.tracker.max.connections``).
    ``idle_timeout_secs``: seconds a client has to send its request (and finish the TLS
    handshake), and per write of the reply (``heron.tracker.idle.timeout.secs``). ``tls``: a
    server context to serve HTTPS with (None: plain HTTP). Stop it with ``shutdown()``.
    """
    if max_connections < 1:
        raise ConfigError(TRACKER_MAX_CONNECTIONS, max_connections, "use a value >= 1")
    if not idle_timeout_secs > 0:
        raise ConfigError(TRACKER_IDLE_TIMEOUT_SECS, idle_timeout_secs,
                          "use a positive number of seconds")
    server = TrackerServer((host, port), _handler_class(app, idle_timeout_secs), max_connections,
                           app)
    if tls is not None:  # accepted sockets shake hands on their own thread (Handler.setup)
        server.socket = tls.wrap_socket(server.socket, server_side=True,
                                        do_handshake_on_connect=False)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="tracker",
                     daemon=True).start()  # shutdown() returns within 0.1 s
    return server


class TrackerServer(ThreadingHTTPServer):
    """The tracker's HTTP server: one daemon thread per connection, at most ``max_connections``.

    Thread-safe: the serving thread admits connections, handler threads release them, and
    ``shutdown`` may be called from any thread but the serving one.
    """

    daemon_threads = True
    block_on_close = False  # handler threads end on their own, within the idle timeout
    request_queue_size = 128  # a burst of connects is accepted (and maybe refused) at once

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 max_connections: int, app: TrackerApp) -> None:
        super().__init__(address, handler)
        self.max_connections = max_connections
        self.refused = 0  # connections closed at once because max_connections were open
        self.app = app
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closing = False
        self._on_shutdown: list = []

    @property
    def tls(self) -> bool:
        """Whether this server serves HTTPS."""
        return isinstance(self.socket, ssl.SSLSocket)

    @property
    def url(self) -> str:
        """``http://host:port`` of this server (``https://`` with TLS)."""
        host, port = self.server_address[:2]
        if not isinstance(host, str):  # typeshed allows bytes; a bound socket names a str
            host = host.decode()
        if host in ("0.0.0.0", "::", ""):  # every address: advertise the host's name
            host = socket.gethostname()
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    @property
    def open_connections(self) -> int:
        """Return how many connections are being served now."""
        with self._lock:
            return len(self._open)

    def on_shutdown(self, callback) -> None:
        """Call ``callback()`` once when the server shuts down (before the port closes)."""
        self._on_shutdown.append(callback)

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
        if not isinstance(request, ssl.SSLSocket):  # (TLS: no handshake here; just close)
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
            first = not self._closing
            self._closing = True
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        if first:
            for callback in self._on_shutdown:
                try:
                    callback()
                except Exception:  # noqa: BLE001 - cleanup goes on; the error is logged
                    log.warning("tracker: shutdown callback failed", exc_info=True)
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
            msg = "the request was not complete in time"
            raise TimeoutError(msg)
        self._sock.settimeout(remaining)
        try:
            return self._sock.recv_into(buffer)
        finally:
            self._sock.settimeout(self._timeout)


def _handler_class(app: TrackerApp, idle_timeout_secs: float):
    class Handler(BaseHTTPRequestHandler):
        timeout = idle_timeout_secs  # StreamRequestHandler.setup sets it on the socket
        server_version = "heron-spark-tracker"

        def setup(self) -> None:
            if isinstance(self.request, ssl.SSLSocket):  # bounded: one deadline for it all
                self.request.settimeout(idle_timeout_secs)
                self.request.do_handshake()  # a failure (plain HTTP, say) closes, unanswered
            super().setup()
            self.rfile.close()
            self._reader = _DeadlineReader(self.connection, idle_timeout_secs)
            self.rfile = io.BufferedReader(self._reader)

        def handle_one_request(self) -> None:
            # http.server's, except that the app sees every method (it authenticates before
            # anything else) and the request must arrive within the idle timeout.
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
            body, too_long = self._read_body()
            split = urlsplit(self.path)
            request = Request(method=self.command, path=split.path,
                              query=parse_qs(split.query, keep_blank_values=True),
                              headers={k.lower(): v for k, v in self.headers.items()},
                              body=body)
            if too_long:
                response = Response.error(413, f"request bodies are limited to "
                                               f"{BODY_MAX_BYTES} bytes")
            else:
                response = app.handle(request)
            self._send(response)

        def _read_body(self) -> tuple[bytes, bool]:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                return b"", False
            if length <= 0:
                return b"", False
            if length > BODY_MAX_BYTES:
                self.close_connection = True  # unread bytes: this connection cannot go on
                return b"", True
            return self.rfile.read(length), False

        def _send(self, response: Response) -> None:
            self.send_response(response.status)
            for name, value in response.headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(response.body)))
            if response.status >= 400:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(response.body)

        def log_message(self, format: str, *args) -> None:
            log.debug("tracker %s: " + format, self.client_address, *args)

    return Handler
