"""Outbound links to peer stmgrs, dialled in the background so routing never waits on a peer.

A ``PeerLink`` lives on the stmgr's loop: ``send``, ``retarget``, ``queued_bytes`` and
``close`` are called on the loop's thread. Its dialer thread only connects and proves the
secret (blocking calls), then hands the socket to the loop with ``call_soon_threadsafe``;
the two share only the target and the "connection wanted" flag, under one lock.

While the peer is not connected (starting, restarting elsewhere, or gone), frames wait in a
buffer bounded by ``pending_limit_bytes``; they count towards the stmgr's water marks, so
backpressure pauses the spouts long before the bound. Past it frames are dropped and counted
(at-least-once replays them; at-most-once loses them, as when a process dies). Once
connected, the buffer is sent first, in order. A link whose connection breaks dials its
target again with a backoff until the TMaster's next plan retargets it.
"""

from __future__ import annotations

import collections
import logging
import threading

from heron_spark.contract import roles
from heron_spark.wire.connection import dial
from heron_spark.wire.tls import TlsContexts
from heron_spark.wire.loop import Channel, Loop

log = logging.getLogger(__name__)
_DIAL_TIMEOUT_SECS = 2.0
_BACKOFF_START_SECS = 0.02
_BACKOFF_MAX_SECS = 1.0


class PeerLink:
    """One peer stmgr's outbound link; see the module docstring for its threading contract."""

    def __init__(self, loop: Loop, name: str, secret: str, topology: str, my_index: int,
                 frame_max_bytes: int, pending_limit_bytes: int, *,
                 tls: TlsContexts | None = None) -> None:
        self.loop = loop
        self._tls = tls
        self.name = name
        self._secret, self._topology, self._me = secret, topology, my_index
        self._frame_max = frame_max_bytes
        self._limit = pending_limit_bytes
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._target: tuple[str, int] | None = None  # shared with the dialer (under _lock)
        self._wanted = False                          # shared: dial the target now
        self._closed = False                          # shared
        self._channel: Channel | None = None
        self._pending: collections.deque = collections.deque()
        self._pending_bytes = 0
        self.dropped_frames = 0
        self.connects = 0
        self._thread = threading.Thread(target=self._dial_loop, name=f"{name}-dialer",
                                        daemon=True)
        self._thread.start()

    @property
    def target(self) -> tuple[str, int] | None:
        """The (host, port) this link dials, if any."""
        return self._target

    @property
    def channel(self) -> Channel | None:
        """The live connection, if any."""
        return self._channel

    @property
    def connected(self) -> bool:
        """True while the connection to the peer is open."""
        return self._channel is not None and not self._channel.closed

    @property
    def queued_bytes(self) -> int:
        """Bytes waiting for this peer: the buffer plus the connection's send queue."""
        channel = self._channel
        return self._pending_bytes + (channel.queued_bytes if channel is not None else 0)

    def retarget(self, host: str, port: int) -> None:
        """Point the link at ``host:port``; a different address drops the current connection."""
        with self._lock:
            if self._target == (host, port):
                return
            if self._target is not None:
                log.info("%s: peer moved from %s:%d to %s:%d", self.name, *self._target, host, port)
            self._target = (host, port)
            self._wanted = True
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
        self._wake.set()

    def send(self, frame: bytes | bytearray) -> None:
        """Queue ``frame`` for the peer; never blocks."""
        channel = self._channel
        if channel is not None and channel.send(frame):
            return
        if self._pending_bytes + len(frame) > self._limit:
            self.dropped_frames += 1
            return
        self._pending.append(frame)
        self._pending_bytes += len(frame)

    def close(self) -> None:
        """Stop dialling and close the connection (idempotent)."""
        with self._lock:
            self._closed = True
        self._wake.set()
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()

    # ---- loop side -----------------------------------------------------------------------
    def _adopt(self, sock, target: tuple[str, int]) -> None:
        with self._lock:
            stale = self._closed or self._target != target or self._channel is not None
            if not stale:
                self._wanted = False
        if stale:
            sock.close()
            return
        channel = Channel(self.loop, sock, self.name, _ignore, self._on_lost,
                          max_frame_bytes=self._frame_max)
        self._channel = channel
        self.connects += 1
        pending, self._pending = self._pending, collections.deque()
        self._pending_bytes = 0
        for frame in pending:  # the buffered frames go first, in order
            channel.send(frame)
        log.info("%s: connected to %s:%d", self.name, *target)

    def _on_lost(self, channel: Channel) -> None:
        if self._channel is channel:
            self._channel = None
            with self._lock:
                self._wanted = not self._closed
            self._wake.set()

    # ---- dialer thread -------------------------------------------------------------------
    def _dial_loop(self) -> None:
        backoff = _BACKOFF_START_SECS
        while True:
            with self._lock:
                if self._closed:
                    return
                target = self._target if self._wanted else None
            if target is None:
                self._wake.wait(0.5)
                self._wake.clear()
                backoff = _BACKOFF_START_SECS
                continue
            try:
                sock = dial(*target, self._secret, self._topology, roles.STMGR, self._me,
                            timeout=_DIAL_TIMEOUT_SECS, tls=self._tls)
            except OSError:
                self._wake.wait(backoff)
                self._wake.clear()
                backoff = min(backoff * 2, _BACKOFF_MAX_SECS)
                continue
            with self._lock:
                if self._target == target:
                    self._wanted = False  # until the loop says the connection is lost again
            self.loop.call_soon_threadsafe(self._adopt, sock, target)
            backoff = _BACKOFF_START_SECS


def _ignore(channel: Channel, kind: int, frame: bytes | bytearray) -> None:
    """Peers never answer on an outbound link."""
