"""The secret handshake every listening socket runs before it accepts a peer.

The listener sends a fresh nonce; the dialler answers with its role, id and
HMAC-SHA256(secret, nonce | role | id); the listener checks it in constant time and answers
ok or closes. A peer without the topology's secret never gets a frame through.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket

from google.protobuf.message import DecodeError

from heron_spark.contract.roles import role_name
from heron_spark.errors import AuthenticationError
from heron_spark.proto import handshake_pb2
from heron_spark.wire.frames import CONTROL, FrameError, control_frame, read_frame

HANDSHAKE_MAX_BYTES = 4096
HANDSHAKE_TIMEOUT_SECS = 10.0


def new_secret() -> str:
    """Return a fresh per-topology secret (hex)."""
    return os.urandom(32).hex()


def _mac(secret: str, nonce: bytes, role: int, peer_id: int) -> bytes:
    message = nonce + str(int(role)).encode() + b"|" + str(peer_id).encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).digest()


def _read_control(reader, message):
    kind, payload = read_frame(reader, HANDSHAKE_MAX_BYTES)
    if kind != CONTROL:
        msg = "handshake expected a control frame"
        raise AuthenticationError(msg)
    try:
        message.ParseFromString(payload)
    except DecodeError as exc:
        msg = f"handshake frame is not a {type(message).__name__}"
        raise AuthenticationError(msg) from exc
    return message


def accept_peer(sock: socket.socket, secret: str, topology: str) -> handshake_pb2.AuthResponse:
    """Run the listener side on an accepted socket; return the peer's verified response."""
    sock.settimeout(HANDSHAKE_TIMEOUT_SECS)
    nonce = os.urandom(32)
    sock.sendall(control_frame(handshake_pb2.AuthChallenge(nonce=nonce, topology_name=topology)))
    reader = sock.makefile("rb", buffering=0)  # unbuffered: no read-ahead past the handshake
    try:
        response = _read_control(reader, handshake_pb2.AuthResponse())
    except (EOFError, FrameError, OSError, ValueError) as exc:
        msg = f"handshake failed: {exc}"
        raise AuthenticationError(msg) from exc
    finally:
        reader.close()
    if not hmac.compare_digest(response.mac, _mac(secret, nonce, response.role, response.id)):
        sock.sendall(control_frame(handshake_pb2.AuthResult(ok=False, reason="bad secret")))
        msg = f"peer {role_name(response.role)}:{response.id} failed the secret check"
        raise AuthenticationError(msg)
    sock.sendall(control_frame(handshake_pb2.AuthResult(ok=True)))
    sock.settimeout(None)
    return response


def prove_secret(sock: socket.socket, secret: str, topology: str, role: int, peer_id: int) -> None:
    """Run the dialler side of the handshake on a connected socket.

    Prove the secret as ``role`` (a ``contract.roles`` value); raise AuthenticationError if
    refused.
    """
    sock.settimeout(HANDSHAKE_TIMEOUT_SECS)
    reader = sock.makefile("rb", buffering=0)  # unbuffered: no read-ahead past the handshake
    try:
        challenge = _read_control(reader, handshake_pb2.AuthChallenge())
        if challenge.topology_name != topology:
            msg = f"listener serves topology {challenge.topology_name!r}, not {topology!r}"
            raise AuthenticationError(msg)
        sock.sendall(control_frame(handshake_pb2.AuthResponse(
            role=role, id=peer_id, mac=_mac(secret, challenge.nonce, role, peer_id))))
        result = _read_control(reader, handshake_pb2.AuthResult())
    except (EOFError, FrameError, OSError) as exc:
        msg = f"handshake with listener failed: {exc}"
        raise AuthenticationError(msg) from exc
    finally:
        reader.close()
    if not result.ok:
        msg = f"listener refused us: {result.reason}"
        raise AuthenticationError(msg)
    sock.settimeout(None)
