"""The state manager interface: where topology metadata lives outside any process.

Stored per topology: the topology definition, packing plan, physical plan, execution state,
TMaster location, the topology secret and the checkpoints of replayable spouts.
Implementations: local filesystem (``localfs``) and ZooKeeper through kazoo (``zookeeper``).
Every method may run on the driver or an executor, from any thread.

Names: a topology name and a key are flat names (no ``/``, not ``.`` or ``..``); keys may
contain dots (``spout_state.<key>``).

The TMaster claim: ``claim_tmaster`` records the TMaster location so that at most one live
TMaster per topology holds it (an ephemeral ZooKeeper node, or an ``flock`` on a local file);
``set_tmaster_location`` writes the same key without any exclusion.
"""

from __future__ import annotations

import abc
import json

from heron_spark.contract import execution_state
from heron_spark.errors import TopologyStateError, TopologyValueError
from heron_spark.proto import packing_pb2, physical_plan_pb2, topology_pb2

TOPOLOGY = "topology"
PACKING_PLAN = "packing_plan"
PHYSICAL_PLAN = "physical_plan"
EXECUTION_STATE = "execution_state"
TMASTER_LOCATION = "tmaster"
SECRET = "secret"
# TLS on: a control client's CA, certificate and key (``wire.tls.TlsMaterial`` JSON), private.
CONTROL_TLS = "control_tls"
PRIVATE_LOCATION_KEYS = (SECRET, CONTROL_TLS)
COMMITTED_CHECKPOINT = "committed_checkpoint"
SPOUT_STATE_PREFIX = "spout_state."


class StateManager(abc.ABC):
    """Key/blob storage per topology, with typed helpers on top; usable as a context manager."""

    @abc.abstractmethod
    def put(self, topology: str, key: str, value: bytes, private: bool = False) -> None:
        """Store ``value`` under ``topology/key`` atomically (``private``: owner-only access)."""

    @abc.abstractmethod
    def get(self, topology: str, key: str) -> bytes | None:
        """Return the bytes under ``topology/key``, or None."""

    @abc.abstractmethod
    def keys(self, topology: str) -> list[str]:
        """Return the keys stored for ``topology``, sorted (the TMaster claim's lock excluded)."""

    @abc.abstractmethod
    def delete(self, topology: str, key: str) -> None:
        """Forget ``topology/key`` (nothing happens if it is absent)."""

    @abc.abstractmethod
    def delete_topology(self, topology: str) -> None:
        """Forget everything stored for ``topology``, its TMaster claim included."""

    @abc.abstractmethod
    def topologies(self) -> list[str]:
        """Return the names of the stored topologies (those with a ``topology`` key), sorted."""

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """A URL naming this store, for messages (never shows a password)."""

    @abc.abstractmethod
    def claim_tmaster(self, topology: str, location: dict) -> None:
        """Record ``location`` as the TMaster of ``topology``, exclusively.

        At most one live holder per topology: while another holder (another process, another
        StateManager object, or this one) has the claim, raise ``TopologyStateError``. The claim
        ends with ``release_tmaster``, ``close``, or the holder's death (process exit for
        ``localfs``; ZooKeeper session expiry for ``zookeeper``). A ``"secret"`` entry of
        ``location`` is stored apart, as the private ``secret`` key, after the claim succeeded;
        ``get_tmaster_location`` merges it back. Without one, the stored secret is left as is.
        A ``"control_tls"`` entry (TLS on) is stored apart and merged back the same way.
        """

    @abc.abstractmethod
    def release_tmaster(self, topology: str) -> None:
        """End this object's TMaster claim on ``topology``; do nothing if it holds none."""

    def close(self) -> None:
        """Release connections and TMaster claims (idempotent)."""

    def __enter__(self) -> "StateManager":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # typed helpers -------------------------------------------------------------------------
    def set_topology(self, topology: topology_pb2.Topology) -> None:
        """Store the topology definition under its own name."""
        self.put(topology.name, TOPOLOGY, topology.SerializeToString())

    def get_topology(self, name: str) -> topology_pb2.Topology | None:
        """Return the stored topology definition, or None."""
        return _parse(topology_pb2.Topology, self.get(name, TOPOLOGY))

    def set_packing_plan(self, name: str, plan: packing_pb2.PackingPlan) -> None:
        """Store the packing plan of topology ``name``."""
        self.put(name, PACKING_PLAN, plan.SerializeToString())

    def get_packing_plan(self, name: str) -> packing_pb2.PackingPlan | None:
        """Return the packing plan of topology ``name``, or None."""
        return _parse(packing_pb2.PackingPlan, self.get(name, PACKING_PLAN))

    def set_physical_plan(self, name: str, plan: physical_plan_pb2.PhysicalPlan) -> None:
        """Store the physical plan of topology ``name``."""
        self.put(name, PHYSICAL_PLAN, plan.SerializeToString())

    def get_physical_plan(self, name: str) -> physical_plan_pb2.PhysicalPlan | None:
        """Return the physical plan of topology ``name``, or None."""
        return _parse(physical_plan_pb2.PhysicalPlan, self.get(name, PHYSICAL_PLAN))

    def set_execution_state(self, name: str, state: execution_state.ExecutionState) -> None:
        """Store the execution state of topology ``name``."""
        self.put(name, EXECUTION_STATE, execution_state.encode(state))

    def get_execution_state(self, name: str) -> execution_state.ExecutionState | None:
        """Return the execution state of topology ``name``, or None."""
        raw = self.get(name, EXECUTION_STATE)
        return None if raw is None else execution_state.decode(raw)

    def set_tmaster_location(self, name: str, host: str, port: int, tracker_port: int,
                             pid: int, secret: str) -> None:
        """Record the TMaster location and the (private) secret, without exclusion.

        A plain overwrite: any number of writers may call it. ``claim_tmaster`` is the
        exclusive variant (one live TMaster per topology); it replaces a record written here.
        """
        location = {"host": host, "port": port, "tracker_port": tracker_port, "pid": pid}
        self.put(name, TMASTER_LOCATION, json.dumps(location).encode())
        self.put(name, SECRET, secret.encode(), private=True)

    def get_tmaster_location(self, name: str) -> dict | None:
        """Return the TMaster location with its ``secret`` (``""`` if none), or None.

        With TLS on, its ``control_tls`` too (absent otherwise).
        """
        raw = self.get(name, TMASTER_LOCATION)
        if raw is None:
            return None
        location = json.loads(raw)
        secret = self.get(name, SECRET)
        location["secret"] = secret.decode() if secret else ""
        control_tls = self.get(name, CONTROL_TLS)
        if control_tls:
            location["control_tls"] = control_tls.decode()
        return location

    def set_spout_state(self, topology: str, key: str, state: dict) -> None:
        """Store a replayable spout's checkpoint ``state`` (JSON-able) under ``key``.

        ``key`` names the spout instance (say ``"<component>.<task id>"``); it is stored as
        the key ``spout_state.<key>``.
        """
        self.put(topology, SPOUT_STATE_PREFIX + key, json.dumps(state, sort_keys=True).encode())

    def clear_spout_states(self, topology: str) -> None:
        """Forget every spout checkpoint of ``topology`` (a new run starts its sources over)."""
        for key in self.keys(topology):
            if key.startswith(SPOUT_STATE_PREFIX):
                self.delete(topology, key)

    def get_spout_state(self, topology: str, key: str) -> dict | None:
        """Return the checkpoint stored by ``set_spout_state``, or None."""
        raw = self.get(topology, SPOUT_STATE_PREFIX + key)
        return None if raw is None else json.loads(raw)


    def set_committed_checkpoint(self, topology: str, checkpoint: dict) -> None:
        """Record the last checkpoint every task saved (effectively once).

        The record holds its id, epoch and store URL. A resumed TMaster restores from it.
        """
        self.put(topology, COMMITTED_CHECKPOINT, json.dumps(checkpoint, sort_keys=True).encode())

    def get_committed_checkpoint(self, topology: str) -> dict | None:
        """Return what ``set_committed_checkpoint`` recorded, or None."""
        raw = self.get(topology, COMMITTED_CHECKPOINT)
        return None if raw is None else json.loads(raw)

    def clear_committed_checkpoint(self, topology: str) -> None:
        """Forget the committed checkpoint (a new run starts from empty state)."""
        if self.get(topology, COMMITTED_CHECKPOINT) is not None:
            self.delete(topology, COMMITTED_CHECKPOINT)


def check_name(kind: str, name: str) -> str:
    """Return ``name`` if it is usable as one path element; raise TopologyValueError if not."""
    if not isinstance(name, str) or not name or "/" in name or "\0" in name \
            or name in (".", ".."):
        msg = f"invalid state manager {kind}"
        raise TopologyValueError(msg, value=name, kind="name",
                                 fix="use a non-empty name without '/' (dots are fine)")
    return name


def split_secret(location: dict) -> tuple[bytes, dict[str, str]]:
    """Return (the JSON of ``location`` without its private entries, those entries).

    The private entries (``PRIVATE_LOCATION_KEYS``: the secret, the control TLS material)
    are stored apart, each under its own private key.
    """
    public = {k: v for k, v in location.items() if k not in PRIVATE_LOCATION_KEYS}
    private = {k: location[k] for k in PRIVATE_LOCATION_KEYS if location.get(k) is not None}
    return json.dumps(public, sort_keys=True).encode(), private


def claimed_error(topology: str, where: str) -> TopologyStateError:
    """Return the error of a second ``claim_tmaster`` while the first holder lives."""
    return TopologyStateError(
        topology, "RUNNING", "start a second TMaster",
        f"a TMaster already holds the claim in {where}; kill it with "
        f"`heron-spark kill {topology}`, or wait for it to exit (ZooKeeper: for its session "
        f"to expire)")


def _parse(message_type, raw: bytes | None):
    if raw is None:
        return None
    message = message_type()
    message.ParseFromString(raw)
    return message


def wait_tmaster(statemgr: StateManager, topology: str, generation: int,
                 timeout_secs: float, poll_secs: float = 0.2) -> tuple[str, int]:
    """Return the ``(host, port)`` of ``topology``'s TMaster of ``generation``, once claimed.

    For a TMaster in container 0 (``heron.tmaster.placement`` container): the stmgrs and
    metrics managers wait here until it has claimed its location (an earlier generation's
    record does not count). Raise TimeoutError after ``timeout_secs``.
    """
    import time

    deadline = time.monotonic() + timeout_secs
    while True:
        location = statemgr.get_tmaster_location(topology) or {}
        if location.get("port") and location.get("generation") == generation:
            return str(location["host"]), int(location["port"])
        if time.monotonic() >= deadline:
            msg = (f"topology {topology!r}: no TMaster of generation {generation} in "
                   f"{statemgr.location} after {timeout_secs:g} s (container 0 starts it)")
            raise TimeoutError(msg)
        time.sleep(poll_secs)
