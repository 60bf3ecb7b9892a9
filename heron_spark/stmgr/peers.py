"""Outbound links to peer stmgrs, dialled in the background so routing never waits on a peer.

A ``PeerLink`` is shared between the stmgr's routing thread (``send``, ``retarget``,
``queued_bytes``, ``close``) and its own dialer thread, under one lock. While the peer is not
connected (starting, restarting elsewhere, or gone), frames wait in a buffer bounded by
``pending_limit_bytes``; they count towards the stmgr's water marks, so backpressure pauses
the spouts long before the bound. Past it frames are dropped and counted (at-least-once
replays them; at-most-once loses them, as when a process dies). Once connected, the buffer is
sent first, in order. A link whose connection breaks dials its target again with a backoff
until the TMaster's next plan retargets it.
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Callable

from heron_spark.wire.connection import Connection, ConnectionClosed, dial

log = logging.getLogger(__name__)
_DIAL_TIMEOUT_SECS = 2.0
_BACKOFF_START_SECS = 0.02
_BACKOFF_MAX_SECS = 1.0


class PeerLink:
    """One peer stmgr's outbound link; see the module docstring for its threading contract."""

    def __init__(self, name: str, secret: str, topology: str, my_index: int,
                 frame_max_bytes: int, pending_limit_bytes: int,
                 on_connected: Callable[["PeerLink"], None] | None = None) -> None:
        self.name = name
        self._secret, self._topology, self._me = secret, topology, my_index
        self._frame_max = frame_max_bytes
        self._limit = pending_limit_bytes
        self._on_connected = on_connected
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._target: tuple[str, int] | None = None
        self._conn: Connection | None = None
        self._pending: collections.deque[bytes] = collections.deque()
        self._pending_bytes = 0
        self._closed = False
        self.dropped_frames = 0
        self.connects = 0
        self._thread = threading.Thread(target=self._dial_loop, name=f"{name}-dialer",
                                        daemon=True)
        self._thread.start()

    @property
    def target(self) -> tuple[str, int] | None:
        return self._target

    @property
    def connected(self) -> bool:
        conn = self._conn
        return conn is not None and not conn.closed

    @property
    def queued_bytes(self) -> int:
        """Bytes waiting for this peer: the buffer plus the connection's send queue."""
        conn = self._conn
        return self._pending_bytes + (conn.queued_bytes if conn is not None else 0)

    def retarget(self, host: str, port: int) -> None:
        """Point the link at ``host:port``; a different address drops the current connection."""
        with self._lock:
            if self._target == (host, port):
                return
            if self._target is not None:
                log.info("%s: peer moved from %s:%d to %s:%d", self.name, *self._target, host, port)
            self._target = (host, port)
            old, self._conn = self._conn, None
        if old is not None:
            old.close()
        self._wake.set()

    def send(self, frame: bytes) -> None:
        """Queue ``frame`` for the peer; never blocks."""
        with self._lock:
            conn = self._conn
            if conn is not None and not self._pending:
                try:
                    conn.send(frame)
                    return
                except ConnectionClosed:
                    self._conn = None
                    self._wake.set()
            if self._pending_bytes + len(frame) > self._limit:
                self.dropped_frames += 1
                return
            self._pending.append(frame)
            self._pending_bytes += len(frame)

    def close(self) -> None:
        """Stop dialling and close the connection (idempotent)."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        self._wake.set()
        if conn is not None:
            conn.close()

    def _dial_loop(self) -> None:
        backoff = _BACKOFF_START_SECS
        while True:
            with self._lock:
                if self._closed:
                    return
                target = self._target
                needed = target is not None and (self._conn is None or self._conn.closed)
            if not needed:
                self._wake.wait(0.1)
                self._wake.clear()
                backoff = _BACKOFF_START_SECS
                continue
            try:
                sock = dial(*target, self._secret, self._topology, "stmgr", self._me,
                            timeout=_DIAL_TIMEOUT_SECS)
            except OSError:
                self._wake.wait(backoff)
                self._wake.clear()
                backoff = min(backoff * 2, _BACKOFF_MAX_SECS)
                continue
            conn = Connection(sock, self.name, lambda *a: None, None,
                              max_frame_bytes=self._frame_max).start()
            with self._lock:
                if self._closed or self._target != target:
                    conn.close()
                    continue
                try:
                    while self._pending:  # the buffered frames go first, in order
                        conn.send(self._pending[0])
                        self._pending_bytes -= len(self._pending.popleft())
                except ConnectionClosed:
                    continue  # broke at once: dial again
                self._conn = conn
                self.connects += 1
            backoff = _BACKOFF_START_SECS
            log.info("%s: connected to %s:%d", self.name, *target)
            if self._on_connected is not None:
                self._on_connected(self)
