"""Start, share and find trackers.

A tracker serves every topology of one state manager. ``start_tracker`` runs one (with its
own state manager connection, closed when it shuts down) and records its location in the
state manager (``__tracker__/location.<host>_<port>``, removed on shutdown) so the CLI can
find it. In a driver, ``acquire`` / ``release`` share one tracker among the topologies the
driver submits to the same state manager (refcounted: it stops with the last one).
``heron-spark tracker`` runs one standalone; with the TMaster in container 0, that TMaster's
child process runs one beside it (``start_beside_tmaster``). With the topology's TLS on, a
tracker serves HTTPS with a certificate its CA signed (``tls``); topologies under different
CAs (or one with TLS off) get a tracker each. Thread-safe.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import threading
import time
from typing import Callable
from urllib.parse import urlsplit

from heron_spark.contract.topology_view import TMasterLocation
from heron_spark.statemgr import open_state_manager
from heron_spark.statemgr.base import StateManager
from heron_spark.tracker import auth, server
from heron_spark.tracker.app import TrackerApp
from heron_spark.wire import tls as wire_tls

log = logging.getLogger(__name__)
_PROBE_TIMEOUT_SECS = 2.0


def start_tracker(statemgr_url: str, host: str, port: int, *, max_connections: int = 64,
                  idle_timeout_secs: float = 10.0,
                  tls: wire_tls.TlsMaterial | None = None) -> server.TrackerServer:
    """Serve the tracker for the state manager at ``statemgr_url`` on ``host:port``.

    Port 0 takes any free port. ``tls``: serve HTTPS with this certificate (signed by the
    topology's CA), else plain HTTP. Return the server (``.url``, ``.app``, ``shutdown()``).
    """
    context = None if tls is None else wire_tls.tracker_server_context(tls)
    statemgr = open_state_manager(statemgr_url)
    try:
        authenticator = auth.Authenticator(lambda: auth.tracker_token(statemgr),
                                           secure=tls is not None)
        app = TrackerApp(statemgr, authenticator)
        tracker = server.serve(app, host, port, max_connections=max_connections,
                               idle_timeout_secs=idle_timeout_secs, tls=context)
    except BaseException:
        statemgr.close()
        raise
    key = f"{auth.LOCATION_PREFIX}{host}_{tracker.server_address[1]}"
    statemgr.put(auth.TRACKER_KEYSPACE, key, json.dumps({
        "url": tracker.url, "host": host, "port": tracker.server_address[1],
        "pid": os.getpid(), "started_at": time.time()}).encode())

    def forget() -> None:
        try:
            statemgr.delete(auth.TRACKER_KEYSPACE, key)
        finally:
            statemgr.close()

    tracker.on_shutdown(forget)
    log.info("tracker for %s at %s", statemgr.location, tracker.url)
    return tracker


_shared_lock = threading.Lock()
_shared: dict[tuple, list] = {}  # (statemgr url, host, port) -> [server, users]


def _start_on_port_or_any(statemgr_url: str, host: str, port: int,
                          **limits) -> server.TrackerServer:
    """Start a tracker on ``port``; if something else holds that port, on any free port."""
    try:
        return start_tracker(statemgr_url, host, port, **limits)
    except OSError as exc:
        if port == 0 or exc.errno != errno.EADDRINUSE:
            raise
        # Another tracker (or any program) holds the port: the topology still gets one;
        # `heron-spark ui` and the handle find it through the state manager.
        log.warning("tracker port %d on %s is in use (%s); serving on a free port instead",
                    port, host, exc)
        return start_tracker(statemgr_url, host, 0, **limits)


def start_beside_tmaster(statemgr_url: str, host: str, port: int,
                         **limits) -> tuple[server.TrackerServer, Callable[[], str]]:
    """Start the tracker of container 0's TMaster child; return it and a login-link minter.

    The same tracker as a driver's (routes, token, login links, limits; ``tls``: container
    0's material, TLS on), on the executor's address ``host``; see ``entry.tmaster``. Runs in
    container 0's TMaster child.
    """
    tracker = _start_on_port_or_any(statemgr_url, host, port, **limits)

    def link() -> str:
        return auth.login_link(tracker.url, tracker.app.auth.token)

    return tracker, link


def acquire(statemgr_url: str, host: str, port: int, *,
            tls: wire_tls.TlsMaterial | None = None, **limits) -> server.TrackerServer:
    """Return this process's tracker for ``statemgr_url`` on ``host`` (and the CA of ``tls``).

    Start it on ``port`` if there is none yet; pair each call with ``release``.
    """
    key = (statemgr_url, host, port, None if tls is None else wire_tls.ca_fingerprint(tls.ca_pem))
    with _shared_lock:
        entry = _shared.get(key)
        if entry is None:
            tracker = _start_on_port_or_any(statemgr_url, host, port, tls=tls, **limits)
            entry = _shared[key] = [tracker, 0]
        entry[1] += 1
        return entry[0]


def release(tracker: server.TrackerServer) -> None:
    """Drop one use of a shared tracker; shut it down after the last one."""
    with _shared_lock:
        for key, entry in list(_shared.items()):
            if entry[0] is tracker:
                entry[1] -= 1
                if entry[1] > 0:
                    return
                del _shared[key]
                break
    tracker.shutdown()


def tracker_urls(statemgr: StateManager, name: str | None = None) -> list[str]:
    """Return the URLs of the trackers recorded for ``statemgr`` that accept connections.

    The one of ``name``'s driver first (if given), then every other.
    """
    urls = []
    if name is not None:
        location = TMasterLocation.from_stored(statemgr.get_tmaster_location(name))
        if location is not None and location.tracker_url:
            urls.append(location.tracker_url)
        elif location is not None and location.tracker_port > 0:
            scheme = "https" if location.control_tls else "http"
            urls.append(f"{scheme}://{location.host}:{location.tracker_port}")
    for key in statemgr.keys(auth.TRACKER_KEYSPACE):
        if key.startswith(auth.LOCATION_PREFIX):
            raw = statemgr.get(auth.TRACKER_KEYSPACE, key)
            if raw:
                urls.append(json.loads(raw)["url"])
    seen, live = set(), []
    for url in urls:
        if url not in seen and _accepts(url):
            live.append(url)
        seen.add(url)
    return live


def topology_ca_pem(statemgr: StateManager, name: str) -> bytes | None:
    """Return the CA certificate (PEM) of ``name``'s running TMaster, None if TLS is off.

    Read from the TMaster's claim (``control_tls``, private to the state manager's owner): a
    client trusting it (``wire.tls.https_client_context``, or a browser) reaches the
    topology's tracker over HTTPS.
    """
    location = TMasterLocation.from_stored(statemgr.get_tmaster_location(name))
    if location is None or not location.control_tls:
        return None
    return wire_tls.TlsMaterial.from_json(location.control_tls).ca_pem


def _accepts(url: str) -> bool:
    parts = urlsplit(url)
    if parts.port is None:  # every URL recorded names its port
        return False
    try:
        socket.create_connection((parts.hostname, parts.port), _PROBE_TIMEOUT_SECS).close()
    except OSError:
        return False
    return True
