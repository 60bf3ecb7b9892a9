"""Talk to a running topology's TMaster through its secret-checked control port."""

from __future__ import annotations

import json
import os

from heron_spark.errors import TopologyNotFoundError
from heron_spark.proto import tmaster_pb2
from heron_spark.statemgr.base import StateManager
from heron_spark.wire import frames
from heron_spark.wire.connection import dial

_TIMEOUT_SECS = 5.0


def _request(statemgr: StateManager, name: str, request: tmaster_pb2.ControlRequest,
             max_bytes: int = 1 << 20,
             timeout: float = _TIMEOUT_SECS) -> tmaster_pb2.ControlResponse | None:
    location = statemgr.get_tmaster_location(name) or {}
    if not location.get("port") or not location.get("secret"):
        return None
    try:
        sock = dial(location["host"], location["port"], location["secret"], name, "control",
                    os.getpid(), timeout=timeout)
    except OSError:
        return None
    try:
        sock.settimeout(timeout)
        sock.sendall(frames.control_frame(request))
        reader = sock.makefile("rb", buffering=0)
        _kind, payload = frames.read_frame(reader, max_bytes)
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


VIEW_MAX_BYTES = 16 << 20  # a view's JSON (a file slice of 256 KiB, escaped, fits)
VIEW_TIMEOUT_SECS = 15.0   # the TMaster may wait up to 10 s for a stmgr's file answer


def query_view(statemgr: StateManager, name: str, path: str,
               params: dict[str, list[str]]) -> tuple[int, object]:
    """Ask the TMaster of ``name`` for the live view ``path`` (a tracker path) with Heron's
    query ``params``; return (HTTP status, result or error message). 503 if no TMaster
    answers."""
    request = tmaster_pb2.ControlRequest(query=tmaster_pb2.ViewQuery(
        path=path, params_json=json.dumps(params)))
    response = _request(statemgr, name, request, VIEW_MAX_BYTES, VIEW_TIMEOUT_SECS)
    if response is None:
        return 503, f"topology {name!r} has no live TMaster (it is not running)"
    if response.code == 200:
        return 200, json.loads(response.json)
    return response.code or 500, response.detail
