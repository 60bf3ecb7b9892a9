"""The state manager interface: where topology metadata lives outside any process.

Stored per topology: the topology definition, packing plan, physical plan, execution state,
TMaster location and the topology secret. Implementations: local filesystem (``localfs``),
ZooKeeper through kazoo (next). Safe to call from any thread.
"""

from __future__ import annotations

import abc
import json

from heron_spark.proto import packing_pb2, physical_plan_pb2, topology_pb2

TOPOLOGY = "topology"
PACKING_PLAN = "packing_plan"
PHYSICAL_PLAN = "physical_plan"
EXECUTION_STATE = "execution_state"
TMASTER_LOCATION = "tmaster"
SECRET = "secret"


class StateManager(abc.ABC):
    """Key/blob storage per topology, with typed helpers on top."""

    @abc.abstractmethod
    def put(self, topology: str, key: str, value: bytes, private: bool = False) -> None:
        """Store ``value`` under ``topology/key`` atomically (``private``: owner-only access)."""

    @abc.abstractmethod
    def get(self, topology: str, key: str) -> bytes | None:
        """Return the bytes under ``topology/key``, or None."""

    @abc.abstractmethod
    def delete_topology(self, topology: str) -> None:
        """Forget everything stored for ``topology``."""

    @abc.abstractmethod
    def topologies(self) -> list[str]:
        """Return the names of the stored topologies."""

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """A URL naming this store, for messages."""

    def close(self) -> None:
        """Release connections (idempotent)."""

    # typed helpers -------------------------------------------------------------------------
    def set_topology(self, topology: topology_pb2.Topology) -> None:
        self.put(topology.name, TOPOLOGY, topology.SerializeToString())

    def get_topology(self, name: str) -> topology_pb2.Topology | None:
        return _parse(topology_pb2.Topology, self.get(name, TOPOLOGY))

    def set_packing_plan(self, name: str, plan: packing_pb2.PackingPlan) -> None:
        self.put(name, PACKING_PLAN, plan.SerializeToString())

    def get_packing_plan(self, name: str) -> packing_pb2.PackingPlan | None:
        return _parse(packing_pb2.PackingPlan, self.get(name, PACKING_PLAN))

    def set_physical_plan(self, name: str, plan: physical_plan_pb2.PhysicalPlan) -> None:
        self.put(name, PHYSICAL_PLAN, plan.SerializeToString())

    def get_physical_plan(self, name: str) -> physical_plan_pb2.PhysicalPlan | None:
        return _parse(physical_plan_pb2.PhysicalPlan, self.get(name, PHYSICAL_PLAN))

    def set_execution_state(self, name: str, state: dict) -> None:
        self.put(name, EXECUTION_STATE, json.dumps(state, sort_keys=True).encode())

    def get_execution_state(self, name: str) -> dict | None:
        raw = self.get(name, EXECUTION_STATE)
        return None if raw is None else json.loads(raw)

    def set_tmaster_location(self, name: str, host: str, port: int, tracker_port: int,
                             pid: int, secret: str) -> None:
        location = {"host": host, "port": port, "tracker_port": tracker_port, "pid": pid}
        self.put(name, TMASTER_LOCATION, json.dumps(location).encode())
        self.put(name, SECRET, secret.encode(), private=True)

    def get_tmaster_location(self, name: str) -> dict | None:
        raw = self.get(name, TMASTER_LOCATION)
        if raw is None:
            return None
        location = json.loads(raw)
        secret = self.get(name, SECRET)
        location["secret"] = secret.decode() if secret else ""
        return location


def _parse(message_type, raw: bytes | None):
    if raw is None:
        return None
    message = message_type()
    message.ParseFromString(raw)
    return message
