"""What a TMaster tells about its topology, typed: status, handle view, location, checkpoint.

One definition per message, with the one codec each uses across processes:

- ``TopologyStatus``: the TMaster's live status (state, times, stmgrs, heartbeats, failures,
  checkpoints); ``as_dict`` is its JSON form (the tracker's ``/topologies/status``, a
  handle's ``status_detail``), ``from_dict`` reads it back, ``record`` is the stored
  ``ExecutionState``.
- ``HandleView``: everything a topology handle shows at once (status, metrics per component,
  physical plan, last failure, tracker URL), what a TMaster in container 0 answers its
  submitter (``to_json`` / ``from_json``: one JSON document, protobufs inside base64).
- ``TMasterLocation``: where a topology's TMaster listens, as the state manager stores it.
- ``CommittedCheckpoint``: the last checkpoint every task saved (effectively once).
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any, Mapping

from heron_spark.contract import execution_state
from heron_spark.proto import physical_plan_pb2, tmaster_pb2

__all__ = ["TopologyStatus", "HandleView", "TMasterLocation", "CommittedCheckpoint"]


def _int_keys(raw: Mapping | None, value=float) -> dict:
    return {int(k): value(v) for k, v in (raw or {}).items()}


@dataclasses.dataclass(frozen=True)
class TopologyStatus:
    """A TMaster's live status of its topology (see the module docstring).

    Times are epoch seconds; ``heartbeats`` are the last heartbeat times and
    ``heartbeat_ages_secs`` their ages, by container index; ``instance_failures`` counts
    failures by task id; ``received`` counts frames and payload bytes per peer role
    (``stmgr.frames``, ``stmgr.bytes``, ``metricsmgr.*``).
    """

    name: str
    id: str
    state: str
    detail: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    containers: int = 0
    registered: tuple[int, ...] = ()
    heartbeats: Mapping[int, float] = dataclasses.field(default_factory=dict)
    heartbeat_ages_secs: Mapping[int, float] = dataclasses.field(default_factory=dict)
    dead_stmgrs: tuple[int, ...] = ()
    dead_stmgr_hosts: Mapping[int, str] = dataclasses.field(default_factory=dict)
    executor_losses: tuple[Mapping[str, Any], ...] = ()
    drained_tasks: int = 0
    tasks: int = 0
    generation: int = 0
    paused: bool = False
    updating: bool = False
    instance_failures: Mapping[int, int] = dataclasses.field(default_factory=dict)
    checkpoint: Mapping[str, Any] | None = None
    submission: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    received: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict:
        """Return the JSON form: every field, map keys as strings."""
        return {"name": self.name, "id": self.id, "state": self.state, "detail": self.detail,
                "started_at": self.started_at, "ended_at": self.ended_at,
                "containers": self.containers, "registered": list(self.registered),
                "heartbeats": {str(k): v for k, v in self.heartbeats.items()},
                "heartbeat_ages_secs": {str(k): v for k, v in self.heartbeat_ages_secs.items()},
                "dead_stmgrs": list(self.dead_stmgrs),
                "dead_stmgr_hosts": {str(k): v for k, v in self.dead_stmgr_hosts.items()},
                "executor_losses": [dict(loss) for loss in self.executor_losses],
                "drained_tasks": self.drained_tasks, "tasks": self.tasks,
                "generation": self.generation, "paused": self.paused, "updating": self.updating,
                "instance_failures": {str(k): v for k, v in self.instance_failures.items()},
                "checkpoint": None if self.checkpoint is None else dict(self.checkpoint),
                "submission": dict(self.submission), "received": dict(self.received)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "TopologyStatus":
        """Read the JSON form back (missing keys take their defaults)."""
        def opt_float(key: str) -> float | None:
            value = raw.get(key)
            return None if value is None else float(value)

        checkpoint = raw.get("checkpoint")
        return cls(
            name=str(raw.get("name") or ""), id=str(raw.get("id") or ""),
            state=str(raw.get("state") or execution_state.UNKNOWN),
            detail=str(raw.get("detail") or ""), started_at=opt_float("started_at"),
            ended_at=opt_float("ended_at"), containers=int(raw.get("containers") or 0),
            registered=tuple(int(i) for i in raw.get("registered") or ()),
            heartbeats=_int_keys(raw.get("heartbeats")),
            heartbeat_ages_secs=_int_keys(raw.get("heartbeat_ages_secs")),
            dead_stmgrs=tuple(int(i) for i in raw.get("dead_stmgrs") or ()),
            dead_stmgr_hosts=_int_keys(raw.get("dead_stmgr_hosts"), str),
            executor_losses=tuple(dict(loss) for loss in raw.get("executor_losses") or ()),
            drained_tasks=int(raw.get("drained_tasks") or 0), tasks=int(raw.get("tasks") or 0),
            generation=int(raw.get("generation") or 0), paused=bool(raw.get("paused")),
            updating=bool(raw.get("updating")),
            instance_failures=_int_keys(raw.get("instance_failures"), int),
            checkpoint=None if checkpoint is None else dict(checkpoint),
            submission=dict(raw.get("submission") or {}),
            received={str(k): int(v) for k, v in (raw.get("received") or {}).items()})

    @classmethod
    def from_record(cls, record: execution_state.ExecutionState,
                    **overrides: Any) -> "TopologyStatus":
        """Return the status a stored execution state says (no live diagnostics)."""
        return dataclasses.replace(cls.from_dict(execution_state.as_dict(record)), **overrides)

    def record(self) -> execution_state.ExecutionState:
        """Return the execution state to store for this status."""
        return execution_state.from_status(self.as_dict())

    def replace(self, **changes: Any) -> "TopologyStatus":
        """Return a copy with ``changes``."""
        return dataclasses.replace(self, **changes)


def _encoded(message: Any) -> str | None:
    return None if message is None else base64.b64encode(message.SerializeToString()).decode()


def _decoded(text: str | None, cls: Any) -> Any:
    if not text:
        return None
    message = cls()
    message.ParseFromString(base64.b64decode(text))
    return message


@dataclasses.dataclass(frozen=True)
class HandleView:
    """Everything a topology handle shows, read at one moment (see the module docstring).

    ``metrics`` are folded per component (``metrics.aggregate``); ``physical_plan`` is None
    until every stmgr registered; ``tracker_url`` is the tracker beside a TMaster in container 0
    (None: none).
    """

    status: TopologyStatus
    metrics: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    physical_plan: physical_plan_pb2.PhysicalPlan | None = None
    failure: tmaster_pb2.InstanceFailed | None = None
    tracker_url: str | None = None

    def to_json(self) -> str:
        """Return the one JSON document this view crosses processes as."""
        return json.dumps(self.as_dict())

    def as_dict(self) -> dict:
        """Return the JSON-ready form (protobufs as base64 of their serialized bytes)."""
        return {"status": self.status.as_dict(),
                "metrics": {c: dict(v) for c, v in self.metrics.items()},
                "physical_plan": _encoded(self.physical_plan),
                "failure": _encoded(self.failure), "tracker_url": self.tracker_url}

    @classmethod
    def from_json(cls, text: str | bytes) -> "HandleView":
        """Read what ``to_json`` wrote."""
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> "HandleView":
        """Read what ``as_dict`` returned."""
        return cls(status=TopologyStatus.from_dict(raw.get("status") or {}),
                   metrics={str(c): {str(k): float(v) for k, v in values.items()}
                            for c, values in (raw.get("metrics") or {}).items()},
                   physical_plan=_decoded(raw.get("physical_plan"),
                                          physical_plan_pb2.PhysicalPlan),
                   failure=_decoded(raw.get("failure"), tmaster_pb2.InstanceFailed),
                   tracker_url=raw.get("tracker_url"))


@dataclasses.dataclass(frozen=True)
class TMasterLocation:
    """Where a topology's TMaster listens, as its claim in the state manager records it.

    ``secret`` is the topology's (stored apart by the state manager); ``tracker_port`` -1
    means no tracker beside it; ``generation`` is set for a TMaster in container 0, whose
    stmgrs look it up by generation. ``control_tls``: with TLS on, a control client's CA,
    certificate and key (``wire.tls.TlsMaterial`` JSON; private like the secret), else "".
    """

    host: str
    port: int
    pid: int = 0
    secret: str = ""
    tracker_port: int = -1
    tracker_url: str | None = None
    generation: int | None = None
    control_tls: str = ""

    @property
    def reachable(self) -> bool:
        """Whether a client can dial it: a port and the secret are known."""
        return bool(self.port) and bool(self.secret)

    def as_dict(self) -> dict:
        """Return the stored form (``claim_tmaster``'s argument)."""
        stored: dict[str, Any] = {"host": self.host, "port": self.port, "pid": self.pid,
                                  "tracker_port": self.tracker_port}
        if self.secret:  # a new claim: the TLS entry too, "" overwriting a past run's
            stored["secret"] = self.secret
            stored["control_tls"] = self.control_tls
        if self.tracker_url is not None:
            stored["tracker_url"] = self.tracker_url
        if self.generation is not None:
            stored["generation"] = self.generation
        return stored

    @classmethod
    def from_stored(cls, raw: Mapping[str, Any] | None) -> "TMasterLocation | None":
        """Read ``get_tmaster_location``'s answer; None if nothing is stored."""
        if not raw:
            return None
        generation = raw.get("generation")
        return cls(host=str(raw.get("host") or ""), port=int(raw.get("port") or 0),
                   pid=int(raw.get("pid") or 0), secret=str(raw.get("secret") or ""),
                   tracker_port=int(raw.get("tracker_port", -1)),
                   tracker_url=raw.get("tracker_url"),
                   generation=None if generation is None else int(generation),
                   control_tls=str(raw.get("control_tls") or ""))


@dataclasses.dataclass(frozen=True)
class CommittedCheckpoint:
    """The last checkpoint every task saved: its id, epoch, store root and time (epoch s)."""

    id: int
    epoch: int
    root: str
    time: float

    def as_dict(self) -> dict:
        """Return the stored form (``set_committed_checkpoint``'s argument)."""
        return {"id": self.id, "epoch": self.epoch, "root": self.root, "time": self.time}

    @classmethod
    def from_stored(cls, raw: Mapping[str, Any] | None) -> "CommittedCheckpoint | None":
        """Read ``get_committed_checkpoint``'s answer; None if nothing is stored."""
        if not raw:
            return None
        return cls(id=int(raw.get("id", 0)), epoch=int(raw.get("epoch", 0)),
                   root=str(raw.get("root") or ""), time=float(raw.get("time", 0.0)))
