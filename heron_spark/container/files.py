"""The files a container writes for its children, and how each child reads them back.

One folder per container: the pickled logical plan, the packing plan, the system config, the
topology secret (owner-only), ready files the children write, and ``logs/``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from heron_spark import _pickling
from heron_spark.config import SystemConfig
from heron_spark.plan.logical import LogicalPlan
from heron_spark.plan.view import PlanView
from heron_spark.proto import packing_pb2


@dataclasses.dataclass
class ContainerFiles:
    """Paths inside one container's working folder."""

    root: Path

    @property
    def definition(self) -> Path:
        return self.root / "definition.pkl"

    @property
    def packing_plan(self) -> Path:
        return self.root / "packing_plan.pb"

    @property
    def system_config(self) -> Path:
        return self.root / "system_config.json"

    @property
    def secret(self) -> Path:
        return self.root / "secret"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def ready(self, role: str) -> Path:
        """Ready file of a child: ``stmgr``, ``metricsmgr``."""
        return self.root / f"{role}.ready.json"

    @property
    def stmgr_stopping(self) -> Path:
        """Written by a stmgr (its pid) before it shuts down for good: from then on, children
        that exit are part of the shutdown, not faults to restart."""
        return self.root / "stmgr.stopping"

    def heartbeat(self, child: str) -> Path:
        """Heartbeat file of ``container``, ``stmgr``, ``metricsmgr`` or ``task-<id>``."""
        return self.root / "heartbeats" / child

    def stall_note(self, child: str) -> Path:
        """Why the container killed ``child`` as stalled (read by the stmgr when it reports the
        lost instance to the TMaster)."""
        return self.root / "heartbeats" / f"{child}.stalled"

    def instance_log(self, component: str, task_id: int) -> Path:
        return self.logs / f"instance-{component}-{task_id}.log"

    def write(self, definition: bytes, packing: packing_pb2.PackingPlan,
              config: SystemConfig, secret: str) -> None:
        """Write everything the children need (called by the container)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.root / "heartbeats").mkdir(exist_ok=True)
        self.definition.write_bytes(definition)
        self.packing_plan.write_bytes(packing.SerializeToString())
        self.system_config.write_text(json.dumps(dataclasses.asdict(config)))
        fd = os.open(self.secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secret)

    def load_config(self) -> SystemConfig:
        return SystemConfig(**json.loads(self.system_config.read_text()))

    def load_secret(self) -> str:
        return self.secret.read_text().strip()

    def load_plan(self) -> PlanView:
        """Rebuild the logical + packing plan view (user classes are unpickled here)."""
        logical: LogicalPlan = _pickling.loads(self.definition.read_bytes())
        packing = packing_pb2.PackingPlan()
        packing.ParseFromString(self.packing_plan.read_bytes())
        return PlanView(logical, packing)
