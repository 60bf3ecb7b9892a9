"""The tracker HTTP server under hostile clients: a real server on 127.0.0.1, real sockets.

Idle, half-sent and trickled requests are closed after the idle timeout; connections beyond
the limit are refused without a thread; every method is authenticated before it is refused;
a client's reset is logged at debug level and never printed.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import selectors
import socket
import struct
import threading
import time

import pytest

from heron_spark.config import TRACKER_IDLE_TIMEOUT_SECS, TRACKER_MAX_CONNECTIONS
from heron_spark.errors import ConfigError
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until
from heron_spark.tracker.auth import TOKEN_KEY, TRACKER_KEYSPACE
from heron_spark.tracker.service import start_tracker

SECRET = "s3cret-for-tests"
AUTH = {"Authorization": f"Bearer {SECRET}"}
MAX_CONNECTIONS = 8
IDLE_SECS = 1.0
SLACK_SECS = 2.0  # scheduling slack on a busy 2-core machine


@pytest.fixture
def statemgr_url(tmp_path):
    """The state manager a tracker serves, its tracker token set to SECRET."""
    url = f"file://{tmp_path}/state"
    with open_state_manager(url) as statemgr:
        statemgr.put(TRACKER_KEYSPACE, TOKEN_KEY, SECRET.encode(), private=True)
    return url


@contextlib.contextmanager
def serving(statemgr_url):
    server = start_tracker(statemgr_url, "127.0.0.1", 0, max_connections=MAX_CONNECTIONS,
                           idle_timeout_secs=IDLE_SECS)
    try:
        yield server
    finally:
        server.shutdown()


@pytest.fixture
def tracker(statemgr_url):
    with serving(statemgr_url) as server:
        yield server


def _request(server, method: str, path: str, headers=None, body=None):
    conn = http.client.HTTPConnection(*server.server_address, timeout=5)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def _connect(server) -> socket.socket:
    return socket.create_connection(server.server_address, timeout=5)


def _wait_closed(sock: socket.socket, timeout: float) -> bool:
    """Read until the server closes ``sock``; return False if it is still open after ``timeout``."""
    deadline = time.monotonic() + timeout
    while (remaining := deadline - time.monotonic()) > 0:
        sock.settimeout(remaining)
        try:
            if not sock.recv(4096):
                return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


def test_idle_connections_are_bounded_and_closed_after_the_idle_timeout(statemgr_url):
    baseline = threading.active_count()
    bound = baseline + 1 + MAX_CONNECTIONS + 2  # the serving thread, one per slot, slack
    with serving(statemgr_url) as server:
        opened: dict[socket.socket, float] = {}
        replies: dict[socket.socket, bytes] = {}
        closed_after: dict[socket.socket, float] = {}
        peak = threading.active_count()
        try:
            for _ in range(200):
                sock = _connect(server)
                opened[sock] = time.monotonic()
                replies[sock] = b""
                peak = max(peak, threading.active_count())
            with selectors.DefaultSelector() as selector:
                for sock in opened:
                    sock.setblocking(False)
                    selector.register(sock, selectors.EVENT_READ)
                deadline = time.monotonic() + IDLE_SECS + SLACK_SECS
                while len(closed_after) < len(opened) and time.monotonic() < deadline:
                    for key, _ in selector.select(timeout=0.05):
                        sock = key.fileobj
                        try:
                            data = sock.recv(4096)
                        except ConnectionResetError:
                            data = b""
                        replies[sock] += data
                        if not data:
                            closed_after[sock] = time.monotonic() - opened[sock]
                            selector.unregister(sock)
                    peak = max(peak, threading.active_count())
            assert len(closed_after) == len(opened), "the server left connections open"
            assert peak <= bound, f"{peak} threads for {MAX_CONNECTIONS} connection slots"
            busy = [s for s in opened if replies[s].startswith(b"HTTP/1.0 503 ")]
            served = [s for s in opened if not replies[s]]
            assert len(busy) + len(served) == len(opened)
            assert server.refused == len(busy) >= 1
            assert len(served) >= MAX_CONNECTIONS  # the first ones in were idle until timed out
            assert all(closed_after[s] >= 0.9 * IDLE_SECS for s in served)
            wait_until(lambda: server.open_connections == 0, SLACK_SECS, message="every slot freed")
            wait_until(lambda: threading.active_count() <= baseline + 1, SLACK_SECS,
                       message="the handler threads to end")
            assert _request(server, "GET", "/topologies", AUTH)[0] == 200  # serves again
        finally:
            for sock in opened:
                sock.close()


def test_half_sent_and_trickled_requests_are_closed_after_the_idle_timeout(tracker):
    half = _connect(tracker)
    trickle = _connect(tracker)
    started = time.monotonic()
    half.sendall(b"GET /topologies HTTP/1.0\r\nAuthorization: Bea")
    trickle.sendall(b"GET /topologies HTTP/1.0\r\nX-Padding: ")
    try:
        # One byte every 0.2 s: a plain socket timeout would never fire.
        while not _wait_closed(trickle, 0.2):
            assert time.monotonic() - started < IDLE_SECS + SLACK_SECS, "trickler not closed"
            try:
                trickle.sendall(b"x")
            except (BrokenPipeError, ConnectionResetError):
                break
        assert time.monotonic() - started >= 0.9 * IDLE_SECS
        assert _wait_closed(half, IDLE_SECS + SLACK_SECS)
        assert time.monotonic() - started < IDLE_SECS + SLACK_SECS
    finally:
        half.close()
        trickle.close()


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"])
def test_every_method_is_authenticated_before_it_is_refused(tracker, method):
    body = b'{"state": "KILLED"}'
    status, headers, _ = _request(tracker, method, "/topologies", body=body)
    assert (status, headers["WWW-Authenticate"]) == (401, "Bearer")
    wrong = {"Authorization": "Bearer not-the-secret"}
    assert _request(tracker, method, "/topologies", wrong, body)[0] == 401
    status, headers, text = _request(tracker, method, "/topologies", AUTH, body)
    assert (status, headers["Allow"]) == (405, "GET, HEAD")
    assert method.encode() in text


def test_a_reset_connection_is_logged_at_debug_level_and_never_printed(tracker, capfd, caplog):
    caplog.set_level(logging.DEBUG, logger="heron_spark.tracker.server")
    request = f"GET /topologies HTTP/1.0\r\nAuthorization: Bearer {SECRET}\r\n\r\n".encode()
    for sent in (b"", request[:30], request):  # nothing, half a request, a whole one
        sock = _connect(tracker)
        sock.sendall(sent)
        if sent != request:  # (a whole one may be answered and closed already)
            wait_until(lambda: tracker.open_connections == 1, 5, message="the server to take it")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # linger 0: a TCP reset
        wait_until(lambda: tracker.open_connections == 0, 5, message="the server to drop the connection")
    assert capfd.readouterr().err == ""
    tracker_records = [r for r in caplog.records if r.name == "heron_spark.tracker.server"]
    assert all(r.levelno <= logging.DEBUG for r in tracker_records)
    assert sum("dropped" in r.getMessage() for r in tracker_records) >= 2


def test_authenticated_gets_still_work(tracker):
    status, headers, body = _request(tracker, "GET", "/topologies", AUTH)
    assert (status, headers["Content-Type"]) == (200, "application/json")
    assert json.loads(body) == {}  # no topology in this state manager
    status, _, body = _request(tracker, "HEAD", "/topologies", AUTH)
    assert (status, body) == (200, b"")
    assert _request(tracker, "GET", "/metrics", AUTH)[0] == 200
    assert _request(tracker, "GET", "/nope", AUTH)[0] == 404
    assert _request(tracker, "GET", "/topologies")[0] == 401


def test_unusable_limits_are_refused_with_their_config_key(statemgr_url):
    with pytest.raises(ConfigError) as error:
        start_tracker(statemgr_url, "127.0.0.1", 0, max_connections=0)
    assert (error.value.key, error.value.value) == (TRACKER_MAX_CONNECTIONS, 0)
    with pytest.raises(ConfigError) as error:
        start_tracker(statemgr_url, "127.0.0.1", 0, idle_timeout_secs=0)
    assert (error.value.key, error.value.value) == (TRACKER_IDLE_TIMEOUT_SECS, 0)


def test_shutdown_closes_the_port_and_open_connections(statemgr_url):
    with serving(statemgr_url) as server:
        idle = _connect(server)
        wait_until(lambda: server.open_connections == 1, 5, message="the server to take the connection")
        address = server.server_address
        server.shutdown()
        server.shutdown()  # idempotent
        try:
            assert _wait_closed(idle, 0.5 * IDLE_SECS)  # before its idle timeout
        finally:
            idle.close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(address, timeout=5).close()
