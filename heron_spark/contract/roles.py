"""Who dials whom: the handshake's ``PeerRole`` (``proto/handshake.proto``, the one source).

The dialler sends its role in ``AuthResponse.role``; a listener compares it with these values.
"""

from __future__ import annotations

from heron_spark.proto import handshake_pb2

PeerRole = handshake_pb2.PeerRole
INSTANCE = handshake_pb2.ROLE_INSTANCE
STMGR = handshake_pb2.ROLE_STMGR
METRICSMGR = handshake_pb2.ROLE_METRICSMGR
METRICS_CLIENT = handshake_pb2.ROLE_METRICS_CLIENT
CONTROL = handshake_pb2.ROLE_CONTROL


def role_name(role: int) -> str:
    """Return ``role`` for a log line (``stmgr``); an unknown value as its number."""
    try:
        return PeerRole.Name(role).removeprefix("ROLE_").lower()
    except ValueError:
        return str(role)
