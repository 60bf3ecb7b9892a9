"""Authenticated, framed TCP connections: dialling, listening, and the threaded ``Connection``.

``dial*`` and ``Listener`` serve both transport stacks: the event loop (``wire.loop``), which
carries tuples between instances and stream managers, and ``Connection``, one reader and one
writer thread per connection, for the TMaster's and the metrics manager's low-rate control
traffic. ``Connection`` is shared between threads: ``send`` may be called from any thread;
frames are written in call order by the connection's writer thread; received frames are handed
to ``on_frame`` on the reader thread, in order. ``send_capacity_bytes`` bounds what may wait
in the send queue (callers block beyond it); with None the queue never blocks.

With ``tls`` contexts (``wire.tls``), every TCP socket is wrapped in TLS 1.3 right after
connect / accept, before the secret handshake: a peer without a certificate signed by the
topology's CA is refused at the TLS handshake, before any frame is read. Unix sockets (links
inside one container, which never leave the host) stay plain.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import ssl
import threading
import time
from typing import TYPE_CHECKING, Callable

from heron_spark.wire import auth
from heron_spark.wire.frames import FrameError, read_frame

if TYPE_CHECKING:
    from heron_spark.wire.tls import TlsContexts

log = logging.getLogger(__name__)
_WRITE_CHUNK_BYTES = 1 << 20
_READ_BUFFER_BYTES = 1 << 16
# How long a TLS connection's reader waits for its writer (unblocked by the shutdown) to stop.
_TLS_WRITER_JOIN_SECS = 5.0


class ConnectionClosed(ConnectionError):
    """The connection was closed before the frame could be queued."""


class Connection:
    """A framed connection; see the module docstring for its threading contract."""

    def __init__(self, sock: socket.socket, name: str,
                 on_frame: Callable[["Connection", int, bytes], None],
                 on_close: Callable[["Connection"], None] | None = None, *,
                 max_frame_bytes: int, send_capacity_bytes: int | None = None) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.name = name
        self.peer_role = 0  # a contract.roles value (set by whoever adopts the socket)
        self.peer_id = 0
        self._on_frame = on_frame
        self._on_close = on_close
        self._max_frame_bytes = max_frame_bytes
        self._capacity = send_capacity_bytes
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._cond = threading.Condition()
        self._closed = False
        self._tls = isinstance(sock, ssl.SSLSocket)
        self._threads = [threading.Thread(target=self._read_loop, name=f"{name}-reader", daemon=True),
                         threading.Thread(target=self._write_loop, name=f"{name}-writer", daemon=True)]

    def start(self) -> "Connection":
        """Start the reader and writer threads; return self."""
        for thread in self._threads:
            thread.start()
        return self

    @property
    def closed(self) -> bool:
        """True once the connection is closed (by either side)."""
        return self._closed

    def send(self, frame: bytes, timeout: float | None = None) -> None:
        """Queue ``frame``; blocks while the send queue is over capacity (if bounded)."""
        with self._cond:
            if self._capacity is not None:
                deadline = None if timeout is None else time.monotonic() + timeout
                while self._queued >= self._capacity and not self._closed:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        msg = f"{self.name}: send queue full for {timeout} s"
                        raise TimeoutError(msg)
                    self._cond.wait(remaining)
            if self._closed:
                msg = f"{self.name} is closed"
                raise ConnectionClosed(msg)
            self._queue.append(frame)
            self._queued += len(frame)
            self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until every queued frame is written; return False on timeout or close."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return not self._queue

    def close(self) -> None:
        """Close the socket and stop both threads (idempotent).

        A TLS socket is only shut down here, which ends both threads' calls; the reader thread
        closes it once the writer is done too: closing an ``SSLSocket`` drops its TLS state,
        which the other thread may be using at that moment.
        """
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        try:  # the plain socket's shutdown: an SSLSocket's own drops its TLS state first
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass
        if not self._tls or self._threads[0].ident is None:  # no reader thread to do it
            self.sock.close()
        if self._on_close is not None:
            self._on_close(self)

    def _read_loop(self) -> None:
        reader = self.sock.makefile("rb", buffering=_READ_BUFFER_BYTES)
        try:
            while not self._closed:
                # typeshed types makefile("rb", buffering=n) as IOBase; it is a BufferedReader
                kind, payload = read_frame(reader, self._max_frame_bytes)  # type: ignore[arg-type]
                self._on_frame(self, kind, payload)
        except (EOFError, FrameError, OSError, ValueError) as exc:
            if not self._closed:
                log.info("%s: connection ended: %s", self.name, exc)
        finally:
            reader.close()
            self.close()
            if self._tls:
                writer = self._threads[1]
                if writer.ident is not None and writer is not threading.current_thread():
                    writer.join(_TLS_WRITER_JOIN_SECS)
                self.sock.close()

    def _write_loop(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._queue and not self._closed:
                        self._cond.wait()
                    if self._closed:
                        return
                    chunk, size = [], 0
                    while self._queue and size < _WRITE_CHUNK_BYTES:
                        frame = self._queue.popleft()
                        chunk.append(frame)
                        size += len(frame)
                self.sock.sendall(b"".join(chunk) if len(chunk) > 1 else chunk[0])
                with self._cond:
                    self._queued -= size
                    self._cond.notify_all()
        except OSError as exc:
            if not self._closed:
                log.info("%s: write failed: %s", self.name, exc)
            self.close()


def dial(host: str, port: int, secret: str, topology: str, role: int, peer_id: int,
         timeout: float = 10.0, *, tls: TlsContexts | None = None) -> socket.socket:
    """Connect to a heron_spark listener and prove the secret; return the ready socket.

    With ``tls``, the socket is a TLS one (``ssl.SSLSocket``): see the module docstring.
    """
    return dial_address(f"{host}:{port}", secret, topology, role, peer_id, timeout, tls=tls)


def dial_address(address: str, secret: str, topology: str, role: int, peer_id: int,
                 timeout: float = 10.0, *, tls: TlsContexts | None = None) -> socket.socket:
    """``dial`` an address as ``Listener.address`` gives it (``host:port`` or ``unix:...``)."""
    _, sockaddr = socket_address(address)
    if isinstance(sockaddr, str):  # AF_UNIX
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
        except BaseException:
            sock.close()
            raise
    else:
        sock = socket.create_connection(sockaddr, timeout=timeout)
        cap_retransmit_backoff(sock)
        if tls is not None:
            try:  # the TLS handshake; a refused certificate surfaces at the first read
                sock = tls.client.wrap_socket(sock)
            except BaseException:
                sock.close()
                raise
    try:
        auth.prove_secret(sock, secret, topology, role, peer_id)
    except BaseException:
        sock.close()
        raise
    return sock


# Linux >= 6.15: the most a TCP retransmission timeout may back off to (default 120 s).
_TCP_RTO_MAX_MS = getattr(socket, "TCP_RTO_MAX_MS", 44)
RETRANSMIT_BACKOFF_MAX_MS = 1000


def cap_retransmit_backoff(sock: socket.socket) -> None:
    """Cap the TCP retransmission backoff of ``sock`` at 1 s, where the kernel allows it.

    A link cut for T seconds (a partition, a flapping or unplugged cable) leaves the kernel's
    retransmission timer backed off to about T; after healing nothing moves until it fires,
    so a 10 s cut stalled a connection for up to 10 s more. Capped, the flow resumes within
    about a second of healing. Older kernels refuse the option: nothing changes there.
    """
    try:
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_RTO_MAX_MS, RETRANSMIT_BACKOFF_MAX_MS)
    except OSError:
        pass


def dial_with_retry(address: str, secret: str, topology: str, role: int, peer_id: int,
                    deadline_secs: float, *, tls: TlsContexts | None = None) -> socket.socket:
    """``dial_address`` until it works or ``deadline_secs`` pass (peers start in any order)."""
    deadline = time.monotonic() + deadline_secs
    delay = 0.05
    while True:
        try:
            return dial_address(address, secret, topology, role, peer_id, tls=tls)
        except OSError:
            if time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


class Listener:
    """Accept peers on ``host:port`` and hand authenticated ones over.

    Port 0 means any free port; ``host`` may instead be a ``unix:...`` address (see
    ``socket_address``).
    ``on_peer(sock, response)`` runs on a short-lived handshake thread per peer; peers that fail
    the TLS handshake (with ``tls``, TCP only) or the secret check are logged and dropped.
    ``address`` is what ``dial_address`` takes.
    """

    def __init__(self, host: str, port: int, secret: str, topology: str,
                 on_peer: Callable[[socket.socket, object], None], name: str, *,
                 tls: TlsContexts | None = None) -> None:
        self._secret = secret
        self._tls = tls
        self._topology = topology
        self._on_peer = on_peer
        self.name = name
        self.host = host
        if host.startswith("unix:"):
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sock.bind(socket_address(host)[1])
            self._sock.listen(128)
            self.port = 0
            self.address = host
        else:
            self._sock = socket.create_server((host, port), backlog=128)
            self.port = self._sock.getsockname()[1]
            self.address = f"{host}:{self.port}"
        self._closed = False
        self.rejected = 0
        self._thread = threading.Thread(target=self._accept_loop, name=f"{name}-accept",
                                        daemon=True)

    def start(self) -> "Listener":
        """Start accepting; return self."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop accepting (idempotent)."""
        if not self._closed:
            self._closed = True
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                sock, addr = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handshake, args=(sock, addr), daemon=True,
                             name=f"{self.name}-handshake").start()

    def _handshake(self, sock: socket.socket, addr) -> None:
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                cap_retransmit_backoff(sock)
                if self._tls is not None:
                    sock.settimeout(auth.HANDSHAKE_TIMEOUT_SECS)
                    sock = self._tls.server.wrap_socket(sock, server_side=True)
            response = auth.accept_peer(sock, self._secret, self._topology)
        except (OSError, auth.AuthenticationError) as exc:
            self.rejected += 1
            log.warning("%s: rejected peer %s: %s", self.name, addr, exc)
            sock.close()
            return
        self._on_peer(sock, response)


def socket_address(address: str) -> tuple[int, str | tuple[str, int]]:
    """Return ``(family, sockaddr)`` for ``host:port`` or ``unix:<path>``.

    ``unix:@name`` is a Linux abstract socket.
    """
    if address.startswith("unix:"):
        path = address[len("unix:"):]
        return socket.AF_UNIX, ("\0" + path[1:]) if path.startswith("@") else path
    host, _, port = address.rpartition(":")
    return socket.AF_INET, (host, int(port))


def local_socket_address(tag: str) -> str:
    """Return a fresh address for a listener that only processes of this machine dial.

    An abstract Unix socket on Linux (no file to clean up, no path length to exceed), loopback
    TCP (any free port) elsewhere.
    """
    if hasattr(socket, "AF_UNIX") and os.uname().sysname == "Linux":
        return f"unix:@heron_spark-{tag}-{os.getpid()}-{os.urandom(6).hex()}"
    return "127.0.0.1:0"
