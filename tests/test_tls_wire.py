"""TLS on the wire: real TLS sockets through ``Listener``, ``dial``, the loop and ``Connection``.

A listener with TLS on refuses, at the TLS handshake, a client with no certificate, one whose
certificate another topology's CA signed and a plain TCP client; a good client passes and
frames flow both over the event loop (``wire.loop``) and the threaded ``Connection``, a
frame bigger than a TLS record and many small ones alike. No sleeps: every wait is on an
event or a loop condition with a bound.
"""

from __future__ import annotations

import datetime
import os
import socket
import ssl
import threading

import pytest

from heron_spark.contract import roles
from heron_spark.errors import AuthenticationError
from heron_spark.wire import auth, frames
from heron_spark.wire import tls as wire_tls
from heron_spark.wire.connection import Connection, Listener, dial
from heron_spark.wire.loop import Channel, Loop

SECRET = "tls-test-secret"
TOPOLOGY = "tls-topo"
NOW = datetime.datetime.now(datetime.timezone.utc)


@pytest.fixture(scope="module")
def topology_tls():
    return wire_tls.new_topology_tls(TOPOLOGY, 2)


@pytest.fixture(scope="module")
def contexts(topology_tls):
    return wire_tls.contexts(topology_tls.container(0)), \
        wire_tls.contexts(topology_tls.container(1))


# ---- the TLS handshake on a listener ------------------------------------------------------
class _Peers:
    """What a listener accepted (handshake threads append; tests wait on ``arrived``)."""

    def __init__(self) -> None:
        self.accepted: list[tuple[int, int, socket.socket]] = []
        self.arrived = threading.Event()

    def on_peer(self, sock, response) -> None:
        self.accepted.append((response.role, response.id, sock))
        self.arrived.set()


@pytest.fixture
def tls_listener(contexts):
    peers = _Peers()
    listener = Listener("127.0.0.1", 0, SECRET, TOPOLOGY, peers.on_peer, "tls-test",
                        tls=contexts[0]).start()
    yield listener, peers
    listener.close()
    for _, _, sock in peers.accepted:
        sock.close()


def _refused_by_tls(exc: BaseException) -> bool:
    while exc is not None:
        if isinstance(exc, ssl.SSLError):
            return True
        exc = exc.__cause__
    return False


def test_a_client_without_a_certificate_is_refused_at_the_tls_handshake(tls_listener,
                                                                        topology_tls):
    listener, peers = tls_listener
    bare = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    bare.check_hostname = False
    bare.load_verify_locations(cadata=topology_tls.control.ca_pem.decode())
    with pytest.raises(OSError) as err:
        dial("127.0.0.1", listener.port, SECRET, TOPOLOGY, roles.STMGR, 1,
             tls=wire_tls.TlsContexts(bare, bare))
    assert _refused_by_tls(err.value)
    assert peers.accepted == []


def test_a_client_of_another_topologys_ca_is_refused_at_the_tls_handshake(tls_listener,
                                                                         topology_tls, tmp_path):
    listener, peers = tls_listener
    other = wire_tls.new_topology_tls("another", 1).container(0)
    wire_tls.write_material(tmp_path, other)
    # It trusts our CA (so it would accept our listener) but shows a certificate of its own CA.
    client = wire_tls.client_context(topology_tls.control.ca_pem, str(tmp_path / "cert.pem"),
                                     str(tmp_path / "key.pem"))
    with pytest.raises(OSError) as err:
        dial("127.0.0.1", listener.port, SECRET, TOPOLOGY, roles.STMGR, 2,
             tls=wire_tls.TlsContexts(client, client))
    assert _refused_by_tls(err.value)
    assert peers.accepted == []


def test_a_plain_tcp_client_is_refused_before_any_frame(tls_listener):
    listener, peers = tls_listener
    raw = socket.create_connection(("127.0.0.1", listener.port), timeout=10)
    try:
        # What a plain dialler would send: a frame. The TLS server reads it as a bad hello.
        raw.sendall(frames.frame(frames.CONTROL, b"\x08\x01" * 40))
        got = b""
        try:
            while chunk := raw.recv(4096):
                got += chunk  # until the listener hangs up
        except ConnectionResetError:
            pass  # it hung up with our bytes unread
    finally:
        raw.close()
    assert got == b"" or got[0] == 0x15  # nothing, or a TLS alert: never a challenge frame
    assert peers.accepted == []


def test_a_plain_dialler_gets_no_secret_challenge(tls_listener):
    listener, peers = tls_listener
    raw = socket.create_connection(("127.0.0.1", listener.port), timeout=10)
    try:
        raw.sendall(b"\x16\x03\x01\x00\x05hello")  # a bogus TLS hello: the listener hangs up
        with pytest.raises(AuthenticationError):
            auth.prove_secret(raw, SECRET, TOPOLOGY, roles.STMGR, 3)
    finally:
        raw.close()
    assert peers.accepted == []


# ---- frames over TLS: the event loop and the threaded Connection --------------------------
BIG = 3 * 1024 * 1024 + 17  # many 16 KiB TLS records, and a channel's in-place big frame
SMALL = 3000


def _frames() -> list[bytes]:
    big = frames.frame(frames.CONTROL, os.urandom(BIG))
    small = [frames.frame(frames.CONTROL, i.to_bytes(4, "big") * (1 + i % 7))
             for i in range(SMALL)]
    return [big, *small, big]


def _poll_until(loop, predicate, turns=5000):
    for _ in range(turns):
        if predicate():
            return
        loop.poll(0.05)
    raise AssertionError("condition not reached")


def _tls_pair(tls_listener, contexts, role: int, peer_id: int):
    """Dial the TLS listener as ``role`` ``peer_id``; return (client socket, accepted socket)."""
    listener, peers = tls_listener
    client_sock = dial("127.0.0.1", listener.port, SECRET, TOPOLOGY, role, peer_id,
                       tls=contexts[1])
    assert peers.arrived.wait(10)
    return client_sock, peers.accepted[0][2]


def test_frames_flow_over_tls_on_the_event_loop(tls_listener, contexts):
    listener, peers = tls_listener
    client_sock = dial("127.0.0.1", listener.port, SECRET, TOPOLOGY, roles.STMGR, 7,
                       tls=contexts[1])
    assert peers.arrived.wait(10)
    role, peer_id, server_sock = peers.accepted[0]
    assert (role, peer_id) == (roles.STMGR, 7)
    assert isinstance(server_sock, ssl.SSLSocket) and isinstance(client_sock, ssl.SSLSocket)
    loop = Loop()
    to_server: list[bytes] = []
    to_client: list[bytes] = []
    server = Channel(loop, server_sock, "server", lambda c, k, f: to_server.append(bytes(f)),
                     max_frame_bytes=1 << 23)
    client = Channel(loop, client_sock, "client", lambda c, k, f: to_client.append(bytes(f)),
                     max_frame_bytes=1 << 23)
    sent = _frames()
    try:
        for frame in sent:
            client.send(frame)
            server.send(frame)
        _poll_until(loop, lambda: len(to_server) == len(sent) and len(to_client) == len(sent))
        assert to_server == sent and to_client == sent
    finally:
        server.close()
        client.close()
        loop.close()


def test_bytes_left_decrypted_while_paused_are_read_when_reading_resumes(tls_listener,
                                                                         contexts):
    # A big frame and small frames in one write: the big frame ends inside a TLS record. The
    # channel pauses on the big frame (as a stmgr under backpressure does), so the small ones
    # stay decrypted in the TLS layer, where epoll never reports them: resuming must read them.
    client_sock, server_sock = _tls_pair(tls_listener, contexts, roles.STMGR, 8)
    big = frames.frame(frames.CONTROL, b"b" * 100_001)
    small = [frames.frame(frames.CONTROL, bytes([i])) for i in range(20)]
    loop = Loop()
    got: list[bytes] = []

    def on_frame(channel, kind, frame):
        got.append(bytes(frame))
        if len(got) == 1:
            channel.pause_reading()

    server = Channel(loop, server_sock, "server", on_frame, max_frame_bytes=1 << 20)
    try:
        client_sock.sendall(big + b"".join(small))
        _poll_until(loop, lambda: len(got) == 1, turns=200)
        for _ in range(5):
            loop.poll(0)
        assert got == [big] and server_sock.pending() > 0  # the rest waits in the TLS layer
        server.resume_reading()
        _poll_until(loop, lambda: len(got) == 21, turns=200)
        assert got == [big, *small]
    finally:
        server.close()
        client_sock.close()
        loop.close()


def test_frames_flow_over_tls_on_the_threaded_connection(tls_listener, contexts):
    client_sock, server_sock = _tls_pair(tls_listener, contexts, roles.METRICSMGR, 9)
    sent = _frames()
    got: list[bytes] = []
    echoed: list[bytes] = []
    all_in, all_back = threading.Event(), threading.Event()

    def on_server_frame(conn, kind, payload):
        got.append(payload)
        conn.send(frames.frame(kind, payload))  # echo from the reader thread
        if len(got) == len(sent):
            all_in.set()

    def on_client_frame(conn, kind, payload):
        echoed.append(frames.frame(kind, payload))
        if len(echoed) == len(sent):
            all_back.set()

    server = Connection(server_sock, "server", on_server_frame, max_frame_bytes=1 << 23).start()
    client = Connection(client_sock, "client", on_client_frame, max_frame_bytes=1 << 23).start()
    try:
        for frame in sent:
            client.send(frame)
        assert all_in.wait(30) and all_back.wait(30)
        assert [frames.frame(frames.CONTROL, p) for p in got] == sent
        assert echoed == sent
    finally:
        client.close()
        server.close()


def test_closing_a_busy_tls_connection_ends_both_sides_cleanly(tls_listener, contexts):
    # Closing while the writer thread sends and the reader reads: both threads end on the
    # shutdown (an unhandled exception in either would fail the test), and the peer sees it.
    client_sock, server_sock = _tls_pair(tls_listener, contexts, roles.METRICSMGR, 10)
    half = threading.Event()
    server_gone, client_gone = threading.Event(), threading.Event()
    count = [0]

    def on_server_frame(conn, kind, payload):
        count[0] += 1
        if count[0] == 200:
            half.set()

    server = Connection(server_sock, "server", on_server_frame,
                        lambda c: server_gone.set(), max_frame_bytes=1 << 20).start()
    client = Connection(client_sock, "client", lambda *a: None, lambda c: client_gone.set(),
                        max_frame_bytes=1 << 20, send_capacity_bytes=1 << 20).start()
    frame = frames.frame(frames.CONTROL, b"x" * 20_000)
    for _ in range(200):
        client.send(frame)
    assert half.wait(30)
    for _ in range(200):
        client.send(frame)
    server.close()
    assert server_gone.is_set() and client_gone.wait(30)
    for thread in (*server._threads, *client._threads):
        thread.join(10)
        assert not thread.is_alive()
    assert server_sock.fileno() == -1 and client_sock.fileno() == -1
