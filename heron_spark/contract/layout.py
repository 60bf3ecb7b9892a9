"""The files of one container's working folder: where each one is.

For every process that reads or writes one: the container, its children, the stmgr answering
the tracker's file requests.

``<work dir>/<topology>/gen-<generation>/container-<index>/`` holds the pickled logical plan,
the packing plan, the system config, the topology secret (owner-only), the ready files the
children write (``<child>.ready.json``), ``heartbeats/<child>`` (and ``<child>.stalled``, why
the container killed it) and ``logs/``. A child is named ``container``, ``stmgr``,
``metricsmgr``, ``tmaster`` (container 0, placement container) or ``task-<task id>``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

CONTAINER = "container"
STMGR = "stmgr"
METRICSMGR = "metricsmgr"
TMASTER = "tmaster"  # container 0's TMaster child (placement container)
LOGS = "logs"  # the logs folder, relative to the container's folder
_TASK = "task-"


def container_root(work_dir: str | Path, topology: str, generation: int, index: int) -> Path:
    """Return the working folder of container ``index`` of a topology's generation."""
    return Path(work_dir) / topology / f"gen-{generation}" / f"container-{index}"


def task_child(task_id: int) -> str:
    """Return the child name of task ``task_id``'s instance process (``task-<id>``)."""
    return f"{_TASK}{task_id}"


def child_task(child: str) -> int | None:
    """Return the task id of an instance child's name, or None for another child."""
    return int(child[len(_TASK):]) if child.startswith(_TASK) else None


def instance_log_path(component: str, task_id: int) -> str:
    """Return an instance's log file, relative to its container's folder."""
    return f"{LOGS}/instance-{component}-{task_id}.log"


@dataclasses.dataclass
class ContainerLayout:
    """Paths inside one container's working folder."""

    root: Path

    @property
    def definition(self) -> Path:
        """The pickled logical plan."""
        return self.root / "definition.pkl"

    @property
    def packing_plan(self) -> Path:
        """The serialized ``PackingPlan``."""
        return self.root / "packing_plan.pb"

    @property
    def system_config(self) -> Path:
        """The ``SystemConfig`` as JSON."""
        return self.root / "system_config.json"

    @property
    def secret(self) -> Path:
        """The topology secret (owner-only)."""
        return self.root / "secret"

    @property
    def tls(self) -> Path:
        """The container's TLS CA, certificate and key, when TLS is on (an owner-only folder)."""
        return self.root / "tls"

    @property
    def logs(self) -> Path:
        """The folder of every process's log."""
        return self.root / LOGS

    @property
    def heartbeats(self) -> Path:
        """The folder of heartbeat files."""
        return self.root / "heartbeats"

    def ready(self, child: str) -> Path:
        """Ready file of a child: ``stmgr``, ``metricsmgr``."""
        return self.root / f"{child}.ready.json"

    @property
    def tmaster_final(self) -> Path:
        """Container 0's TMaster's last status, written as it stops (placement container)."""
        return self.root / "tmaster.final.json"

    @property
    def stmgr_stopping(self) -> Path:
        """Return the file a stmgr writes (its pid) before it shuts down for good.

        From then on, children that exit are part of the shutdown, not faults to restart.
        """
        return self.root / "stmgr.stopping"

    def heartbeat(self, child: str) -> Path:
        """Heartbeat file of ``container``, ``stmgr``, ``metricsmgr`` or ``task-<id>``."""
        return self.heartbeats / child

    def stall_note(self, child: str) -> Path:
        """Return the file saying why the container killed ``child`` as stalled.

        The stmgr reads it when it reports the lost instance to the TMaster.
        """
        return self.heartbeats / f"{child}.stalled"

    def log(self, child: str) -> Path:
        """Log file of ``stmgr`` or ``metricsmgr`` (an instance's: ``instance_log``)."""
        return self.logs / f"{child}.log"

    def instance_log(self, component: str, task_id: int) -> Path:
        """Log file of task ``task_id`` of ``component``."""
        return self.root / instance_log_path(component, task_id)
