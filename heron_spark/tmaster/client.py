"""Talk to a running topology's TMaster through its secret-checked control port.

Plain functions of (state manager, topology name): the CLI, the tracker and tests call them
from any process that can read the state manager. A verb the TMaster refuses raises the
TMaster's own error (``TopologyStateError``, ``TopologyValueError``,
``ClusterCapacityError``) with its code and fields; a topology whose TMaster does not answer raises
``TopologyStateError`` with its last recorded state.
"""

from __future__ import annotations

import functools
import json
import os

from heron_spark import errors
from heron_spark.contract import execution_state, roles
from heron_spark.contract.topology_view import TMasterLocation
from heron_spark.errors import TopologyNotFoundError, TopologyStateError
from heron_spark.proto import tmaster_pb2
from heron_spark.statemgr.base import StateManager
from heron_spark.wire import frames
from heron_spark.wire.connection import dial
from heron_spark.wire.tls import TlsContexts, TlsMaterial, contexts

_TIMEOUT_SECS = 5.0


def _request(statemgr: StateManager, name: str, request: tmaster_pb2.ControlRequest,
             max_bytes: int = 1 << 20,
             timeout: float = _TIMEOUT_SECS) -> tmaster_pb2.ControlResponse | None:
    location = TMasterLocation.from_stored(statemgr.get_tmaster_location(name))
    if location is None or not location.reachable:
        return None
    try:
        tls = _control_contexts(location.control_tls) if location.control_tls else None
        sock = dial(location.host, location.port, location.secret, name, roles.CONTROL,
                    os.getpid(), timeout=timeout, tls=tls)
    except OSError:
        return None
    try:
        sock.settimeout(timeout)
        sock.sendall(frames.control_frame(request))
        reader = sock.makefile("rb", buffering=0)
        _kind, payload = frames.read_frame(reader, max_bytes)  # type: ignore[arg-type]
        response = tmaster_pb2.ControlResponse()
        response.ParseFromString(payload)
        return response
    except (OSError, EOFError):
        return None
    finally:
        sock.close()


@functools.lru_cache(maxsize=8)
def _control_contexts(material_json: str) -> TlsContexts:
    """Return the contexts of a topology's control material (made once per material)."""
    return contexts(TlsMaterial.from_json(material_json))


def request_tmaster(statemgr: StateManager, name: str, request: tmaster_pb2.ControlRequest,
                    max_bytes: int = 1 << 20,
                    timeout: float = _TIMEOUT_SECS) -> tmaster_pb2.ControlResponse | None:
    """Send ``request`` to the TMaster of ``name``; return its answer, None if none answers."""
    return _request(statemgr, name, request, max_bytes, timeout)


def raise_refusal(name: str, response: tmaster_pb2.ControlResponse) -> None:
    """Raise a refused verb's answer as the TMaster's own error class, with its message."""
    _raise_refusal(name, response)


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
        state = execution_state.state_of(statemgr.get_execution_state(name))
        return f"not running (last state {state})"
    return response.state


def activate_topology(statemgr: StateManager, name: str) -> str:
    """``heron activate``: resume a deactivated topology's spouts; return its new state."""
    return _verb(statemgr, name, "activate it", tmaster_pb2.ControlRequest(activate=True)).state


def deactivate_topology(statemgr: StateManager, name: str) -> str:
    """Stop ``name``'s spouts emitting (``heron deactivate``); return its new state (PAUSED).

    Bolts go on and acks still flow.
    """
    return _verb(statemgr, name, "deactivate it",
                 tmaster_pb2.ControlRequest(deactivate=True)).state


def restart_topology(statemgr: StateManager, name: str, container: int | None = None) -> str:
    """Restart every process of ``container`` (``heron restart``); return what the TMaster did.

    ``container`` None restarts every container. The containers restart in the background.
    """
    restart = tmaster_pb2.RestartRequest(all=container is None, container=container or 0)
    return _verb(statemgr, name, "restart it",
                 tmaster_pb2.ControlRequest(restart=restart)).detail


def update_topology(statemgr: StateManager, name: str, parallelism: dict[str, int]) -> str:
    """Rescale components (``{name: tasks}``); return what the TMaster did.

    This is ``heron update --component-parallelism``. The new generation starts in the
    background.
    """
    update = tmaster_pb2.UpdateRequest(parallelism={str(k): int(v)
                                                    for k, v in parallelism.items()})
    return _verb(statemgr, name, "update it", tmaster_pb2.ControlRequest(update=update)).detail


def _verb(statemgr: StateManager, name: str, action: str,
          request: tmaster_pb2.ControlRequest) -> tmaster_pb2.ControlResponse:
    if statemgr.get_topology(name) is None:
        raise TopologyNotFoundError(name, statemgr.location)
    response = _request(statemgr, name, request)
    if response is None:
        state = execution_state.state_of(statemgr.get_execution_state(name))
        raise TopologyStateError(name, f"not running (last state {state})", action,
                                 f"submit it again: heron-spark submit FILE {name}")
    if not response.ok:
        _raise_refusal(name, response)
    return response


def _raise_refusal(name: str, response: tmaster_pb2.ControlResponse) -> None:
    """Raise the TMaster's refusal again: its code's class, with its fields.

    The fields rebuild the TMaster's message; a refusal without fields (none is expected)
    is a ``TopologyStateError`` naming the state the TMaster reported.
    """
    fields = json.loads(response.error_fields_json or "{}")
    if not fields:
        fields = {"topology": name, "state": response.state, "action": "do that",
                  "fix": response.detail}
    raise errors.refusal(response.error_code, fields)


VIEW_MAX_BYTES = 16 << 20  # a view's JSON (a file slice of 256 KiB, escaped, fits)
VIEW_TIMEOUT_SECS = 15.0   # the TMaster may wait up to 10 s for a stmgr's file answer


def query_view(statemgr: StateManager, name: str, path: str,
               params: dict[str, list[str]]) -> tuple[int, object]:
    """Ask the TMaster of ``name`` for a live view; return (HTTP status, result or error message).

    ``path`` is a tracker path and ``params`` Heron's query parameters. The status is 503 if
    no TMaster answers.
    """
    request = tmaster_pb2.ControlRequest(query=tmaster_pb2.ViewQuery(
        path=path, params_json=json.dumps(params)))
    response = _request(statemgr, name, request, VIEW_MAX_BYTES, VIEW_TIMEOUT_SECS)
    if response is None:
        return 503, f"topology {name!r} has no live TMaster (it is not running)"
    if response.code == 200:
        return 200, json.loads(response.json)
    return response.code or 500, response.detail
