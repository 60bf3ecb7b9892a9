"""A single-threaded I/O loop: non-blocking framed channels, timers, hand-offs from threads.

The stmgr and every instance do all their socket I/O on one thread, the one that runs their
logic (and, in an instance, the user's code), so no batch ever waits for another thread to
get the GIL. ``Loop.poll`` waits for readiness (epoll), reads what each ready channel has,
hands every complete frame to the channel's ``on_frame`` in order, runs due timers and the
callbacks other threads queued with ``call_soon_threadsafe`` (an accepted and authenticated
peer, a dialled socket), and finally writes what the handlers queued: output is coalesced per
channel and written with one ``sendmsg`` per turn, so under load many frames share a system
call and at rest a frame leaves at the end of the turn that produced it.

``Channel.send`` never blocks: what the kernel does not take waits in the channel's queue
(``queued_bytes``), which callers watch against their water marks. ``pause_reading`` stops
taking frames from the peer, so the kernel's buffers fill and the peer's sends queue up in
turn: the way pressure travels back between processes.

A channel over a TLS socket (``ssl.SSLSocket``, ``wire.tls``) writes with ``send`` (TLS has
no ``sendmsg``), retrying a write the TLS layer could not finish with the same bytes, and
treats ``SSLWantReadError`` / ``SSLWantWriteError`` as "not now". Bytes the TLS layer already
decrypted are invisible to epoll, so after each read, after ``resume_reading`` and when the
channel is created it reads on while ``sock.pending()`` says some are buffered.

Everything here belongs to the loop's thread except ``Loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import collections
import errno
import heapq
import itertools
import logging
import select
import selectors
import socket
import ssl
import time
from typing import Callable

from heron_spark.contract import metric_names
from heron_spark.wire.frames import CONTROL, DATA, PREFIX, PREFIX_BYTES, FrameError

log = logging.getLogger(__name__)
READ_CHUNK_BYTES = 1 << 18
# A frame at least this big is received straight into a buffer of its own (``recv_into``):
# no copy into the channel's input buffer and out again, however many reads it takes.
BIG_FRAME_BYTES = 1 << 16
# What the kernel may hold of a local (Unix socket) channel's output (Linux doubles it): a
# whole batch frame leaves with one ``sendmsg`` instead of one per ~200 KiB the default takes.
LOCAL_SEND_BUFFER_BYTES = 1 << 20
_SENDMSG_MAX_BUFFERS = 512
_EVENT_READ, _EVENT_WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
_AGAIN = (errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR)
_TLS_AGAIN = (ssl.SSLWantReadError, ssl.SSLWantWriteError)
# A TLS channel's reads per readiness event before other channels get their turn (a TLS read
# returns at most one 16 KiB record).
_TLS_READS_PER_EVENT = 16
# A TLS channel joins queued frames into writes of about this many bytes.
_TLS_WRITE_BYTES = 1 << 18


class Timer:
    """A callback due at a monotonic time; ``cancel`` stops it (idempotent)."""

    __slots__ = ("when", "callback", "cancelled")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        """Stop the callback from running (idempotent)."""
        self.cancelled = True


class Loop:
    """See the module docstring. Owned by one thread.

    Only ``call_soon_threadsafe`` may be called from other threads.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._selector = selectors.DefaultSelector()
        self._timers: list = []
        self._sequence = itertools.count()
        self._handoffs: collections.deque = collections.deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, _EVENT_READ, self._drain_wakeups)
        self._dirty: list[Channel] = []
        self.turns = 0
        # Traffic over every channel this loop served: frames and bytes in and out.
        self.frames_received = self.bytes_received = self.frames_sent = self.bytes_sent = 0
        self.busy_since: float | None = clock()  # None while waiting in select

    # ---- scheduling ----------------------------------------------------------------------
    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` on the loop once ``clock()`` reaches ``when``."""
        timer = Timer(when, callback)
        heapq.heappush(self._timers, (when, next(self._sequence), timer))
        return timer

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` on the loop after ``delay`` seconds."""
        return self.call_at(self.clock() + delay, callback)

    def call_soon_threadsafe(self, callback: Callable, *args) -> None:
        """Run ``callback(*args)`` on the loop's next turn (any thread may call this)."""
        self._handoffs.append((callback, args))
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # the wake-up pipe is full (a wake-up is pending anyway) or closed

    def next_timer(self) -> float | None:
        """Return when the earliest live timer is due, or None."""
        timers = self._timers
        while timers and timers[0][2].cancelled:
            heapq.heappop(timers)
        return timers[0][0] if timers else None

    # ---- running -------------------------------------------------------------------------
    def poll(self, timeout: float | None,
             before_flush: Callable[[], None] | None = None) -> None:
        """Run one turn: handle I/O, run due timers and hand-offs, then write queued output.

        Wait up to ``timeout`` seconds (None: until something happens) for the I/O.
        ``before_flush`` runs just before the writes, so what it queues (say, the turn's
        acknowledgements) leaves with the turn's other output, in the same system calls.
        """
        if self._handoffs:
            timeout = 0.0
        due = self.next_timer()
        if due is not None:
            wait = max(0.0, due - self.clock())
            timeout = wait if timeout is None else min(timeout, wait)
        self.busy_since = None
        events = self._selector.select(timeout)
        self.busy_since = self.clock()
        for key, mask in events:
            key.data(mask)
        self.turns += 1
        self._run_handoffs()
        self._run_timers()
        if before_flush is not None:
            before_flush()
        self.flush()

    def flush(self) -> None:
        """Write what every channel has queued (as much as the kernel takes now)."""
        dirty, self._dirty = self._dirty, []
        for channel in dirty:
            channel._write()

    def _run_handoffs(self) -> None:
        handoffs = self._handoffs
        while handoffs:
            callback, args = handoffs.popleft()
            callback(*args)

    def _run_timers(self) -> None:
        timers = self._timers
        now = self.clock()
        while timers and timers[0][0] <= now:
            _, _, timer = heapq.heappop(timers)
            if not timer.cancelled:
                timer.cancelled = True
                timer.callback()

    def _drain_wakeups(self, mask: int) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def close(self) -> None:
        """Release the loop's own descriptors (channels close themselves)."""
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


class Channel:
    """One framed, non-blocking connection served by a ``Loop``. Loop thread only.

    ``on_frame(channel, kind, frame)`` gets each complete frame as ``bytes``, prefix
    included (the payload starts at ``frames.PREFIX_BYTES``), so a relay can pass a frame on
    untouched; a frame of ``BIG_FRAME_BYTES`` or more comes as the ``bytearray`` it was
    received into (never changed afterwards), so it is copied out of the kernel only once.
    ``on_close(channel)`` runs once, when the peer hangs up, a read or write fails, a frame is
    malformed, or ``close`` is called.
    """

    def __init__(self, loop: Loop, sock: socket.socket, name: str,
                 on_frame: Callable[["Channel", int, bytes | bytearray], None],
                 on_close: Callable[["Channel"], None] | None = None, *,
                 max_frame_bytes: int) -> None:
        sock.setblocking(False)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        elif sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) < LOCAL_SEND_BUFFER_BYTES:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, LOCAL_SEND_BUFFER_BYTES)
        self.loop = loop
        self.sock = sock
        self.name = name
        self.peer_id = 0
        self._on_frame = on_frame
        self._on_close = on_close
        self._max_frame = max_frame_bytes
        self._in = bytearray()
        self._big: bytearray | None = None  # a big frame being received in place
        self._big_filled = 0
        self._out: collections.deque = collections.deque()
        self._queued = 0
        self._reading = True
        self._events = _EVENT_READ
        self._closed = False
        self._ssl = sock if isinstance(sock, ssl.SSLSocket) else None
        self._tls = self._ssl is not None
        self.frames_received = 0
        self.bytes_received = 0
        self.frames_sent = 0
        self.bytes_sent = 0
        loop._selector.register(sock, _EVENT_READ, self._on_event)
        if self._tls_pending():  # frames that came with the handshake's last record
            loop.call_soon_threadsafe(self._read_pending)

    @property
    def closed(self) -> bool:
        """True once the channel is closed (by either side)."""
        return self._closed

    @property
    def queued_bytes(self) -> int:
        """Bytes sent by the caller that the kernel has not taken yet."""
        return self._queued

    @property
    def reading(self) -> bool:
        """False while ``pause_reading`` is in effect."""
        return self._reading

    def send(self, frame) -> bool:
        """Queue ``frame`` for the end of the loop's turn; False if closed.

        ``frame`` is bytes-like, or a list of bytes-like parts written in order.
        """
        if self._closed:
            return False
        if not self._out:
            self.loop._dirty.append(self)
        if type(frame) is list:
            self._out.extend(frame)
            self._queued += sum(len(part) for part in frame)
        else:
            self._out.append(frame)
            self._queued += len(frame)
        self.frames_sent += 1
        self.loop.frames_sent += 1
        return True

    def pause_reading(self) -> None:
        """Stop taking frames from the peer until ``resume_reading``."""
        if self._reading:
            self._reading = False
            self._update_events()

    def resume_reading(self) -> None:
        """Take frames from the peer again."""
        if not self._reading:
            self._reading = True
            self._update_events()
            if self._tls_pending():  # epoll will not report these
                self.loop.call_soon_threadsafe(self._read_pending)

    def write_now(self) -> None:
        """Write queued output at once instead of at the end of the turn."""
        self._write()

    def flush_blocking(self, timeout: float) -> bool:
        """Write everything queued, waiting up to ``timeout`` s (for shutdown); True if done."""
        deadline = time.monotonic() + timeout
        while self._out and not self._closed:
            self._write()
            remaining = deadline - time.monotonic()
            if not self._out or remaining <= 0:
                break
            select.select([], [self.sock], [], min(remaining, 0.05))
        return not self._out

    def close(self, reason: str = "") -> None:
        """Close the socket (idempotent); queued output is dropped."""
        if self._closed:
            return
        self._closed = True
        if reason:
            log.info("%s: closed: %s", self.name, reason)
        try:
            self.loop._selector.unregister(self.sock)
        except (KeyError, ValueError):
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        self._out.clear()
        self._queued = 0
        self._big = None
        if self._on_close is not None:
            self._on_close(self)

    # ---- loop side -----------------------------------------------------------------------
    def _update_events(self) -> None:
        if self._closed:
            return
        events = (_EVENT_READ if self._reading else 0) | (_EVENT_WRITE if self._out else 0)
        if events == self._events:
            return
        self._events = events
        try:
            if events:
                self.loop._selector.modify(self.sock, events, self._on_event)
            else:
                self.loop._selector.unregister(self.sock)
        except KeyError:
            self.loop._selector.register(self.sock, events, self._on_event)

    def _on_event(self, mask: int) -> None:
        if mask & _EVENT_WRITE:
            self._write()
        if mask & _EVENT_READ and self._reading and not self._closed:
            if not self._tls:
                self._read()
                return
            for _ in range(_TLS_READS_PER_EVENT):
                if not (self._read() and self._reading and not self._closed):
                    break
            self._read_pending()

    def _read_pending(self) -> None:
        """Read what the TLS layer holds decrypted already (epoll does not signal it)."""
        while self._reading and not self._closed and self._tls_pending():
            self._read()

    def _tls_pending(self) -> int:
        """Return the bytes the TLS layer holds decrypted (0 for a plain socket)."""
        return self._ssl.pending() if self._ssl is not None else 0

    def _read(self) -> bool:
        """Read once; return True if bytes came (False: none for now, or closed)."""
        if self._big is not None:
            return self._fill_big()
        try:
            data: bytes | bytearray = self.sock.recv(READ_CHUNK_BYTES)
        except _TLS_AGAIN:
            return False
        except OSError as exc:
            if exc.errno in _AGAIN:
                return False
            self.close(f"read failed: {exc}")
            return False
        if not data:
            self.close("peer closed the connection" if not self._in
                       else "connection closed inside a frame")
            return False
        self.bytes_received += len(data)
        self.loop.bytes_received += len(data)
        buffer = self._in
        if buffer:
            buffer += data
            data = buffer
        try:
            used = self._deliver(data)
        except FrameError as exc:
            self.close(str(exc))
            return False
        rest = len(data) - used
        if rest >= PREFIX_BYTES and not self._closed:
            size = PREFIX.unpack_from(data, used)[0] + PREFIX_BYTES  # checked by _deliver
            if size >= BIG_FRAME_BYTES:  # the rest of it goes straight into its own buffer
                big = self._big = bytearray(size)
                big[:rest] = memoryview(data)[used:]
                self._big_filled = rest
                if data is buffer:
                    buffer.clear()
                self._fill_big()
                return True
        if data is buffer:
            del buffer[:used]
        elif rest:
            buffer += memoryview(data)[used:]
        return True

    def _fill_big(self) -> bool:
        """Receive the big frame under way in place; hand it over once complete.

        Return True if bytes came.
        """
        big = self._big
        assert big is not None
        size, filled = len(big), self._big_filled
        came = False
        with memoryview(big) as view:
            while filled < size:
                wanted = size - filled
                try:
                    got = self.sock.recv_into(view[filled:], wanted)
                except _TLS_AGAIN:
                    break
                except OSError as exc:
                    if exc.errno not in _AGAIN:
                        self.close(f"read failed: {exc}")
                    break
                if not got:
                    self.close("connection closed inside a frame")
                    break
                came = True
                filled += got
                self.bytes_received += got
                self.loop.bytes_received += got
                if got < wanted and not self._tls:
                    break  # the socket is empty for now (a TLS read returns one record)
        self._big_filled = filled
        if filled < size or self._closed:
            return came
        self._big = None
        self.frames_received += 1
        self.loop.frames_received += 1
        self._on_frame(self, PREFIX.unpack_from(big)[1], big)
        return True

    def _deliver(self, data) -> int:
        """Hand every complete frame of ``data`` over; return how many bytes they used."""
        start, end = 0, len(data)
        on_frame = self._on_frame
        unpack = PREFIX.unpack_from
        whole = type(data) is bytes
        while end - start >= PREFIX_BYTES and not self._closed:
            size, kind = unpack(data, start)
            if size > self._max_frame:
                msg = (f"frame of {size} bytes exceeds the limit of {self._max_frame} bytes "
                       "(heron.frame.max.bytes)")
                raise FrameError(msg)
            if kind != DATA and kind != CONTROL:
                msg = f"unknown frame kind {kind}"
                raise FrameError(msg)
            stop = start + PREFIX_BYTES + size
            if stop > end:
                break
            if whole:
                frame = data if start == 0 and stop == end else data[start:stop]
            else:
                with memoryview(data) as view:
                    frame = bytes(view[start:stop])
            start = stop
            self.frames_received += 1
            self.loop.frames_received += 1
            on_frame(self, kind, frame)
        return start

    def _write(self) -> None:
        out = self._out
        if self._closed or not out:
            return
        sock = self.sock
        while out:
            try:
                if self._tls:
                    sent = sock.send(_tls_chunk(out))
                else:
                    buffers = list(itertools.islice(out, _SENDMSG_MAX_BUFFERS)) \
                        if len(out) > 1 else [out[0]]
                    sent = sock.sendmsg(buffers) if len(buffers) > 1 \
                        else sock.send(buffers[0])
            except _TLS_AGAIN:
                break
            except OSError as exc:
                if exc.errno in _AGAIN:
                    break
                self.close(f"write failed: {exc}")
                return
            self._queued -= sent
            self.bytes_sent += sent
            self.loop.bytes_sent += sent
            while sent:
                head = out[0]
                size = len(head)
                if sent >= size:
                    out.popleft()
                    sent -= size
                else:
                    out[0] = memoryview(head)[sent:]
                    sent = 0
                    break
            else:
                continue
            break  # the kernel took part of a buffer: it is full for now
        want_write = bool(out)
        if want_write != bool(self._events & _EVENT_WRITE):
            self._update_events()


def _tls_chunk(out: collections.deque):
    """Return the bytes of a TLS write: the queue's head buffers, joined to about 256 KiB.

    A TLS write that could not finish must be retried with the same leading bytes and at
    least as many: the queue only grows at its tail until a write succeeds, so the same head
    buffers are joined again.
    """
    head = out[0]
    if len(out) == 1 or len(head) >= _TLS_WRITE_BYTES:
        return head
    parts, size = [], 0
    for part in out:
        parts.append(part)
        size += len(part)
        if size >= _TLS_WRITE_BYTES:
            break
    return b"".join(parts)


def loop_traffic(loop: Loop, add) -> None:
    """Add a loop's turns and traffic to a metrics publish (``add(name=, value=)``)."""
    add(name=metric_names.LOOP_TURNS, value=loop.turns)
    add(name=metric_names.FRAMES_RECEIVED, value=loop.frames_received)
    add(name=metric_names.BYTES_RECEIVED, value=loop.bytes_received)
    add(name=metric_names.FRAMES_SENT, value=loop.frames_sent)
    add(name=metric_names.BYTES_SENT, value=loop.bytes_sent)
