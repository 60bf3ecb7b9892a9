"""The tracker over HTTPS (the topology's TLS on): real servers on 127.0.0.1, real sockets.

A client trusting the topology's CA gets its answers; one trusting the system CAs or another
topology's CA fails verification; a plain-HTTP request gets no page and no token, only a
close. The tracker asks no client certificate (browsers have none): the token authenticates.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time

import pytest
from cryptography import x509

from heron_spark.contract.topology_view import TMasterLocation
from heron_spark.statemgr import open_state_manager
from heron_spark.tracker import service
from heron_spark.tracker.auth import SESSION_COOKIE, login_link
from heron_spark.wire import tls as wire_tls
from test_tracker import Tracker
from test_tracker_limits import SECRET, statemgr_url  # noqa: F401  (the fixture: token SECRET)


@pytest.fixture(scope="module")
def topology_tls():
    return wire_tls.new_topology_tls("alpha", 1, tracker_hosts=["alpha.example"])


@pytest.fixture(scope="module")
def other_tls():
    return wire_tls.new_topology_tls("beta", 1)


@pytest.fixture
def https_tracker(statemgr_url, topology_tls):  # noqa: F811
    server = service.start_tracker(statemgr_url, "127.0.0.1", 0, idle_timeout_secs=2.0,
                                   tls=topology_tls.tracker)
    try:
        yield server
    finally:
        server.shutdown()


def _trusting(material: wire_tls.TlsMaterial) -> ssl.SSLContext:
    return wire_tls.https_client_context(material.ca_pem)


def test_a_client_trusting_the_topology_ca_gets_answers_over_tls_1_3(https_tracker,
                                                                     topology_tls):
    assert https_tracker.url == f"https://127.0.0.1:{https_tracker.server_address[1]}"
    tracker = Tracker(https_tracker.url, SECRET, _trusting(topology_tls.control))
    assert tracker.get("/topologies") == {}
    assert tracker.request("GET", "/topologies", auth=False)[0] == 401  # the token still counts
    with socket.create_connection(https_tracker.server_address, timeout=5) as raw, \
            _trusting(topology_tls.control).wrap_socket(raw) as sock:
        assert sock.version() == "TLSv1.3"
        served = x509.load_der_x509_certificate(sock.getpeercert(binary_form=True))
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"alpha.example", "localhost"} <= set(names.get_values_for_type(x509.DNSName))
    assert "127.0.0.1" in {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}


def test_a_login_link_over_https_sets_a_secure_session_cookie(https_tracker, topology_tls):
    tracker = Tracker(https_tracker.url, SECRET, _trusting(topology_tls.control))
    link = login_link(https_tracker.url, SECRET)
    assert link.startswith(f"{https_tracker.url}/login?token=")
    status, headers, _ = tracker.request("GET", link[len(https_tracker.url):], auth=False)
    assert status == 303
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=") and "; Secure" in cookie


@pytest.mark.parametrize("trust", ["system CAs", "another topology's CA"])
def test_a_client_not_trusting_the_topology_ca_fails_verification(https_tracker, other_tls,
                                                                  trust):
    context = ssl.create_default_context() if trust == "system CAs" \
        else _trusting(other_tls.control)
    with pytest.raises(ssl.SSLCertVerificationError):
        Tracker(https_tracker.url, SECRET, context).request("GET", "/topologies")


def _plain_exchange(address, request: bytes) -> bytes:
    """Send ``request`` unencrypted and read until the server closes; return what came back."""
    received = b""
    with socket.create_connection(address, timeout=5) as sock:
        sock.sendall(request)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
        else:
            pytest.fail("the tracker kept a plain-HTTP connection open")
    return received


def test_plain_http_gets_no_page_and_no_token(https_tracker):
    address = https_tracker.server_address
    for path, headers in (("/topologies", f"Authorization: Bearer {SECRET}\r\n"),
                          ("/", ""), ("/health", ""),
                          ("/login?" + login_link("http://x", SECRET).split("?")[1], "")):
        reply = _plain_exchange(
            address, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode())
        assert b"HTTP/" not in reply and SECRET.encode() not in reply, (path, reply[:200])
    conn = http.client.HTTPConnection(*address, timeout=5)
    try:
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            conn.request("GET", "/topologies", headers={"Authorization": f"Bearer {SECRET}"})
            conn.getresponse()
    finally:
        conn.close()


def test_with_tls_off_the_tracker_serves_plain_http(statemgr_url):  # noqa: F811
    server = service.start_tracker(statemgr_url, "127.0.0.1", 0)
    try:
        assert server.url.startswith("http://") and not server.tls
        assert Tracker(server.url, SECRET).get("/topologies") == {}
    finally:
        server.shutdown()


def test_a_driver_shares_a_tracker_per_ca_only(statemgr_url, topology_tls, other_tls):  # noqa: F811
    plain = service.acquire(statemgr_url, "127.0.0.1", 0)
    alpha = service.acquire(statemgr_url, "127.0.0.1", 0, tls=topology_tls.tracker)
    beta = service.acquire(statemgr_url, "127.0.0.1", 0, tls=other_tls.control)
    try:
        assert service.acquire(statemgr_url, "127.0.0.1", 0, tls=topology_tls.control) is alpha
        service.release(alpha)  # the second use of the same CA's tracker
        assert len({id(plain), id(alpha), id(beta)}) == 3
        assert plain.url.startswith("http://")
        assert alpha.url.startswith("https://") and beta.url.startswith("https://")
        assert Tracker(beta.url, SECRET, _trusting(other_tls.control)).get("/topologies") == {}
        with pytest.raises(ssl.SSLCertVerificationError):
            Tracker(beta.url, SECRET, _trusting(topology_tls.control)).get("/topologies")
    finally:
        for server in (plain, alpha, beta):
            service.release(server)


def test_the_state_manager_gives_the_ca_and_an_https_url(statemgr_url, https_tracker,  # noqa: F811
                                                         topology_tls):
    location = TMasterLocation("127.0.0.1", 1, 1, "s" * 64, https_tracker.server_address[1],
                               control_tls=topology_tls.control.to_json())
    with open_state_manager(statemgr_url) as statemgr:
        statemgr.claim_tmaster("alpha", location.as_dict())
        assert service.topology_ca_pem(statemgr, "alpha") == topology_tls.control.ca_pem
        assert service.topology_ca_pem(statemgr, "nobody") is None
        urls = service.tracker_urls(statemgr, "alpha")
    assert urls[0] == https_tracker.url
    assert json.loads(Tracker(urls[0], SECRET, _trusting(topology_tls.control))
                      .request("GET", "/topologies")[2]) == {}


def test_the_tracker_certificate_pin_is_its_public_key(topology_tls):
    pin = wire_tls.spki_sha256(topology_tls.tracker.cert_pem)
    assert len(pin) == 44 and pin != wire_tls.spki_sha256(topology_tls.control.cert_pem)


def test_the_cli_writes_the_ca_and_prints_an_https_link(statemgr_url, https_tracker,  # noqa: F811
                                                        topology_tls, tmp_path, capsys):
    from heron_spark.cli.main import main
    from heron_spark.proto import topology_pb2

    location = TMasterLocation("127.0.0.1", 1, 1, "s" * 64, https_tracker.server_address[1],
                               control_tls=topology_tls.control.to_json())
    ca_file = tmp_path / "alpha-ca.pem"
    conf = ["--conf", f"heron.statemgr={statemgr_url}"]
    with open_state_manager(statemgr_url) as statemgr:  # the claim lasts while it is open
        statemgr.set_topology(topology_pb2.Topology(name="alpha", id="alpha-1"))
        statemgr.claim_tmaster("alpha", location.as_dict())
        assert main(["ui", "alpha", "--ca-file", str(ca_file), *conf]) == 0
    link = capsys.readouterr().out.split()[0]
    assert link.startswith(f"{https_tracker.url}/login?token=")
    assert ca_file.read_bytes() == topology_tls.control.ca_pem
    tracker = Tracker(https_tracker.url, SECRET,
                      wire_tls.https_client_context(ca_file.read_bytes()))
    assert tracker.request("GET", link[len(https_tracker.url):], auth=False)[0] == 303
    with pytest.raises(SystemExit, match="heron.tls.enabled"):  # no TLS, no CA to write
        main(["ui", "--ca-file", str(ca_file), *conf])


def test_a_client_that_never_shakes_hands_is_closed_after_the_idle_timeout(https_tracker):
    from test_tracker_limits import SLACK_SECS, _wait_closed

    started = time.monotonic()
    with socket.create_connection(https_tracker.server_address, timeout=5) as sock:
        assert _wait_closed(sock, 2.0 + SLACK_SECS)  # the fixture's idle timeout: 2 s
    assert time.monotonic() - started >= 1.5


def test_a_standalone_tracker_serves_https_with_the_users_certificate(statemgr_url,  # noqa: F811
                                                                      topology_tls, tmp_path):
    import subprocess
    import sys

    material = tmp_path / "mine"
    wire_tls.write_material(material, topology_tls.tracker)
    conf = [f"heron.statemgr={statemgr_url}", f"heron.tls.cert={material / 'cert.pem'}",
            f"heron.tls.key={material / 'key.pem'}", f"heron.tls.ca={material / 'ca.pem'}"]
    proc = subprocess.Popen([sys.executable, "-m", "heron_spark.cli", "tracker", "--port", "0",
                             *[arg for pair in conf for arg in ("--conf", pair)]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert " at https://127.0.0.1:" in first, first
        url = first.split(" at ")[1].strip()
        assert Tracker(url, SECRET, _trusting(topology_tls.control)).get("/topologies") == {}
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
