"""The stored execution state of a topology (``proto/execution_state.proto``), typed.

Its TMaster builds it from its status (``from_status``) and stores it through the state
manager, which encodes it (``encode``) and gives every reader the typed message back
(``decode``): the next driver (to resume a topology whose driver died), the CLI and the
tracker.
"""

from __future__ import annotations

from heron_spark.proto.execution_state_pb2 import ExecutionState, Submission

__all__ = ["ExecutionState", "Submission", "LIVE_STATES", "UNKNOWN", "is_live", "state_of",
           "from_status", "encode", "decode", "as_dict"]

# The TMaster's states in which a driver runs the topology (not ended).
LIVE_STATES = frozenset({"STARTING", "RUNNING", "PAUSED"})
UNKNOWN = "UNKNOWN"  # no execution state stored
_SUBMISSION_KEYS = ("cluster", "environ", "role", "submission_user", "submission_time",
                    "release_version")


def state_of(state: ExecutionState | None) -> str:
    """Return the lifecycle state stored (``RUNNING``, ...), ``UNKNOWN`` if none is."""
    return state.state if state is not None and state.state else UNKNOWN


def is_live(state: ExecutionState | None) -> bool:
    """Tell whether ``state`` says a driver runs the topology (it may have died since)."""
    return state_of(state) in LIVE_STATES


def from_status(status: dict) -> ExecutionState:
    """Build the execution state from a status dict (``TopologyStatus.as_dict()``)."""
    state = ExecutionState(
        name=str(status.get("name") or ""), id=str(status.get("id") or ""),
        state=str(status.get("state") or ""), detail=str(status.get("detail") or ""),
        generation=int(status.get("generation") or 0), paused=bool(status.get("paused")),
        updating=bool(status.get("updating")), containers=int(status.get("containers") or 0))
    for key in ("started_at", "ended_at"):
        if status.get(key) is not None:
            setattr(state, key, float(status[key]))
    for task, failures in (status.get("instance_failures") or {}).items():
        state.instance_failures[int(task)] = int(failures)
    submission = status.get("submission") or {}
    for key in _SUBMISSION_KEYS:
        if submission.get(key) is not None:
            field_type = type(getattr(state.submission, key))
            setattr(state.submission, key, field_type(submission[key]))
    return state


def encode(state: ExecutionState) -> bytes:
    """Return the stored form of ``state``."""
    return state.SerializeToString(deterministic=True)


def decode(raw: bytes) -> ExecutionState:
    """Read a stored execution state (what ``encode`` returned)."""
    state = ExecutionState()
    state.ParseFromString(raw)
    return state


def as_dict(state: ExecutionState) -> dict:
    """Return ``state`` with the keys and value types of the TMaster's status dict.

    For JSON answers: times are None while unset; ``instance_failures`` keys are strings.
    """
    return {"name": state.name, "id": state.id, "state": state_of(state),
            "detail": state.detail,
            "started_at": state.started_at if state.HasField("started_at") else None,
            "ended_at": state.ended_at if state.HasField("ended_at") else None,
            "generation": state.generation, "paused": state.paused,
            "updating": state.updating, "containers": state.containers,
            "instance_failures": {str(k): v for k, v in sorted(state.instance_failures.items())},
            "submission": {key: getattr(state.submission, key) for key in _SUBMISSION_KEYS}}
