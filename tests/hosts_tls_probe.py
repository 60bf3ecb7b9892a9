"""Attack heron_spark's listening ports from a host (``test_hosts_tls``): wrong clients and fuzz.

``python tests/hosts_tls_probe.py SPEC_JSON``, run in a host's network namespace
(``ip netns exec``). SPEC: ``targets`` (``[address, port]`` pairs), ``ca`` (the PEM of the
topology's CA: the wrong clients trust the listener, so a refusal is the listener's),
``other`` (a folder with another topology's ``cert.pem`` and ``key.pem``), ``topology``,
``probes`` (``clients`` or ``fuzz``: which of the probes below). Prints
one JSON line: per ``address:port``, per probe, ``"refused: <how>"`` or ``"ACCEPTED: <what>"``.

Probes, all at once (threads), each on its own connection:

- ``other_ca``: a TLS 1.3 client presenting a certificate another topology's CA signed;
  ``no_cert``: one presenting none; both dial like a stmgr (``wire.connection.dial``), so a
  listener that let them through would send its secret challenge. Refused = the dial failed
  with an ``ssl.SSLError`` in its causes (the TLS handshake), as in ``test_tls_wire``.
- ``plain_frame``: a plain TCP client sending a heron_spark frame; ``plain_challenge``: one
  waiting for the secret challenge (``auth.prove_secret``) after a bogus TLS hello. Refused =
  the listener hung up with nothing or a TLS alert; no challenge.
- fuzz: random bytes of several sizes; a real TLS ClientHello then garbage; a frame prefix
  announcing a huge length; a ClientHello then silence (a handshake left half done); a
  connection left idle. Refused = the listener closed the connection within the handshake
  timeout plus slack, having sent nothing but TLS records (handshake or alert): no
  connection stays open, none gets a frame.
"""

from __future__ import annotations

import json
import random
import socket
import ssl
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS.parent)]

from heron_spark.contract import roles  # noqa: E402
from heron_spark.errors import AuthenticationError  # noqa: E402
from heron_spark.wire import auth, frames  # noqa: E402
from heron_spark.wire import tls as wire_tls  # noqa: E402
from heron_spark.wire.connection import dial  # noqa: E402

CLOSE_WITHIN = auth.HANDSHAKE_TIMEOUT_SECS + 10.0
TLS_RECORD_TYPES = {0x14, 0x15, 0x16, 0x17}  # change cipher spec, alert, handshake, data


def _tls_caused(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, ssl.SSLError):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _dial_with(host: str, port: int, topology: str, context: ssl.SSLContext) -> str:
    try:
        sock = dial(host, port, "not-the-secret", topology, roles.STMGR, 99,
                    tls=wire_tls.TlsContexts(context, context))
    except OSError as exc:
        if _tls_caused(exc):
            return f"refused: TLS handshake ({exc})"[:200]
        return f"ACCEPTED: past TLS, refused later ({type(exc).__name__}: {exc})"[:200]
    sock.close()
    return "ACCEPTED: dialled and authenticated"


def other_ca(host: str, port: int, spec: dict) -> str:
    # It trusts the listener's CA but shows a certificate of another topology's CA.
    context = wire_tls.client_context(spec["ca"].encode(), f"{spec['other']}/cert.pem",
                                      f"{spec['other']}/key.pem")
    return _dial_with(host, port, spec["topology"], context)


def no_cert(host: str, port: int, spec: dict) -> str:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_verify_locations(cadata=spec["ca"])
    return _dial_with(host, port, spec["topology"], context)


def _until_closed(sock: socket.socket) -> tuple[bytes, str]:
    """Read until the listener hangs up; return (what it sent, how it ended)."""
    got = b""
    deadline = time.monotonic() + CLOSE_WITHIN
    while True:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return got, "STILL OPEN"
        except ConnectionResetError:
            return got, "reset"
        if not chunk:
            return got, "closed"
        got += chunk


def _send_then_wait(host: str, port: int, data: bytes, then: bytes = b"") -> str:
    sock = socket.create_connection((host, port), timeout=10)
    try:
        try:
            sock.sendall(data)
            if then:
                sock.sendall(then)
        except (BrokenPipeError, ConnectionResetError):
            pass  # hung up while we still sent: refused
        got, ended = _until_closed(sock)
    finally:
        sock.close()
    if ended == "STILL OPEN":
        return f"ACCEPTED: still open after {CLOSE_WITHIN} s, {len(got)} bytes received"
    if not _only_tls_records(got):
        return f"ACCEPTED: {len(got)} non-TLS bytes received: {got[:40]!r}"
    return f"refused: {ended} after {len(got)} bytes of TLS records"


def _only_tls_records(data: bytes) -> bool:
    """Whether ``data`` is a sequence of TLS records (a frame or a challenge is not)."""
    offset = 0
    while offset < len(data):
        head = data[offset:offset + 5]
        if head[0] not in TLS_RECORD_TYPES:
            return False
        if len(head) < 5:
            return True  # cut off mid-header by the hang-up
        if head[1:3] not in (b"\x03\x01", b"\x03\x03"):
            return False
        offset += 5 + int.from_bytes(head[3:5], "big")
    return True


def plain_frame(host: str, port: int, spec: dict) -> str:
    # What a plain dialler sends: a frame. A TLS server reads it as a bad hello.
    return _send_then_wait(host, port, frames.frame(frames.CONTROL, b"\x08\x01" * 40))


def plain_challenge(host: str, port: int, spec: dict) -> str:
    sock = socket.create_connection((host, port), timeout=10)
    try:
        sock.sendall(b"\x16\x03\x01\x00\x05hello")  # a bogus TLS hello
        try:
            auth.prove_secret(sock, "not-the-secret", spec["topology"], roles.STMGR, 98)
        except AuthenticationError as exc:
            return f"refused: no challenge ({exc})"[:200]
        return "ACCEPTED: the secret handshake ran"
    finally:
        sock.close()


def client_hello() -> bytes:
    """A real TLS 1.3 ClientHello (what ``ssl`` sends first)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    tls = context.wrap_bio(ssl.MemoryBIO(), outgoing := ssl.MemoryBIO())
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def fuzz_random(size: int):
    def probe(host: str, port: int, spec: dict) -> str:
        return _send_then_wait(host, port, random.randbytes(size))
    probe.__name__ = f"random_{size}"
    return probe


def hello_then_garbage(host: str, port: int, spec: dict) -> str:
    return _send_then_wait(host, port, client_hello(), random.randbytes(3000))


def huge_frame(host: str, port: int, spec: dict) -> str:
    # A frame prefix announcing 4 GB - 1 of control payload, then a little of it.
    return _send_then_wait(host, port, frames.PREFIX.pack(0xFFFFFFFF, frames.CONTROL) + b"x" * 64)


def hello_then_silence(host: str, port: int, spec: dict) -> str:
    return _send_then_wait(host, port, client_hello())


def idle(host: str, port: int, spec: dict) -> str:
    return _send_then_wait(host, port, b"")


PROBES = {"clients": [other_ca, no_cert, plain_frame, plain_challenge],
          "fuzz": [*map(fuzz_random, (1, 5, 512, 70_000)), hello_then_garbage, huge_frame,
                   hello_then_silence, idle]}


def main(spec: dict) -> dict[str, dict[str, str]]:
    jobs = {(f"{host}:{port}", probe.__name__): (probe, host, port)
            for host, port in spec["targets"] for probe in PROBES[spec["probes"]]}
    with ThreadPoolExecutor(max_workers=min(64, len(jobs))) as pool:
        futures = {key: pool.submit(probe, host, port, spec)
                   for key, (probe, host, port) in jobs.items()}
        results: dict[str, dict[str, str]] = {}
        for (target, name), future in futures.items():
            try:
                outcome = future.result()
            except OSError as exc:  # e.g. the connect itself refused: nothing accepted
                outcome = f"refused: {type(exc).__name__}: {exc}"
            results.setdefault(target, {})[name] = outcome
    return results


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
