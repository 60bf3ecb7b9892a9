"""The files a container writes for its children, and how each child reads them back.

Where each file is (the plan, the config, the secret, ready files, heartbeats, logs) is the
contract ``heron_spark.contract.layout``; this module writes and parses their contents.
"""

from __future__ import annotations

import dataclasses
import json
import os

from heron_spark import _pickling
from heron_spark.config import SystemConfig
from heron_spark.contract.layout import ContainerLayout
from heron_spark.plan.logical import LogicalPlan
from heron_spark.plan.view import PlanView
from heron_spark.proto import packing_pb2
from heron_spark.wire import tls as wire_tls


@dataclasses.dataclass
class ContainerFiles(ContainerLayout):
    """One container's working folder (paths: ``contract.layout``).

    It holds the writer and the readers of the files the container hands its children.
    """

    def write(self, definition: bytes, packing: packing_pb2.PackingPlan,
              config: SystemConfig, secret: str,
              tls: wire_tls.TlsMaterial | None = None) -> None:
        """Write everything the children need (called by the container).

        ``tls``: this container's TLS material (TLS on), written owner-only.
        """
        self.logs.mkdir(parents=True, exist_ok=True)
        self.heartbeats.mkdir(exist_ok=True)
        self.definition.write_bytes(definition)
        self.packing_plan.write_bytes(packing.SerializeToString())
        self.system_config.write_text(json.dumps(dataclasses.asdict(config)))
        fd = os.open(self.secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secret)
        if tls is not None:
            wire_tls.write_material(self.tls, tls)

    def load_config(self) -> SystemConfig:
        """Read the system config the container wrote for its children."""
        return SystemConfig(**json.loads(self.system_config.read_text()))

    def load_secret(self) -> str:
        """Read the topology secret (the file is owner-only)."""
        return self.secret.read_text().strip()

    def load_tls(self) -> wire_tls.TlsContexts | None:
        """Return the container's TLS contexts, or None when TLS is off."""
        if not wire_tls.has_material(self.tls):
            return None
        return wire_tls.contexts_from_files(self.tls)

    def load_tls_material(self) -> wire_tls.TlsMaterial | None:
        """Return the container's TLS material (its CA, certificate and key), None if TLS is off."""
        if not wire_tls.has_material(self.tls):
            return None
        return wire_tls.read_material(self.tls)

    def load_plan(self) -> PlanView:
        """Rebuild the logical + packing plan view (user classes are unpickled here)."""
        logical: LogicalPlan = _pickling.loads(self.definition.read_bytes())
        return PlanView(logical, self.load_packing())

    def load_packing(self) -> packing_pb2.PackingPlan:
        """Read the packing plan alone (no user code is unpickled: the metrics manager)."""
        packing = packing_pb2.PackingPlan()
        packing.ParseFromString(self.packing_plan.read_bytes())
        return packing
