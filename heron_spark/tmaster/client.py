"""Talk to a running topology's TMaster through its secret-checked control port."""

from __future__ import annotations

import os

from heron_spark.errors import TopologyNotFoundError
from heron_spark.proto import tmaster_pb2
from heron_spark.statemgr.base import StateManager
from heron_spark.wire import frames
from heron_spark.wire.connection import dial

_TIMEOUT_SECS = 5.0


def _request(statemgr: StateManager, name: str,
             request: tmaster_pb2.ControlRequest) -> tmaster_pb2.ControlResponse | None:
    location = statemgr.get_tmaster_location(name) or {}
    if not location.get("port") or not location.get("secret"):
        return None
    try:
        sock = dial(location["host"], location["port"], location["secret"], name, "control",
                    os.getpid(), timeout=_TIMEOUT_SECS)
    except OSError:
        return None
    try:
        sock.settimeout(_TIMEOUT_SECS)
        sock.sendall(frames.control_frame(request))
        reader = sock.makefile("rb", buffering=0)
        _kind, payload = frames.read_frame(reader, 1 << 20)
        response = tmaster_pb2.ControlResponse()
        response.ParseFromString(payload)
        return response
    except (OSError, EOFError):
        return None
    finally:
        sock.close()


def tmaster_status(statemgr: StateManager, name: str) -> str | None:
    """Return the live state of topology ``name``, or None if no TMaster answers."""
    response = _request(statemgr, name, tmaster_pb2.ControlRequest(status=True))
    return None if response is None else response.state


def kill_topology(statemgr: StateManager, name: str) -> str:
    """Ask the TMaster of ``name`` to kill it; return the state it reports."""
    if statemgr.get_topology(name) is None:
        raise TopologyNotFoundError(name, statemgr.location)
    response = _request(statemgr, name, tmaster_pb2.ControlRequest(kill=True))
    if response is None:
        state = (statemgr.get_execution_state(name) or {}).get("state", "UNKNOWN")
        return f"not running (last state {state})"
    return response.state
