"""From what a user submits to the plans every runner starts from: one place for both runners.

``prepare`` takes a ``Topology`` subclass or a ``TopologyBuilder`` and the submit-time
``conf``, and returns the validated logical plan, the effective ``SystemConfig``, the packing
plan and their ``PlanView``. ``topology.*`` keys of ``conf`` override the topology's own
config; ``heron.*`` keys are runtime settings. Spark's runner (``scheduler.submit``) and the
in-process runner (``inprocess``) both start here, so a topology is checked the same way
whichever runs it. Runs on the driver; starts nothing.
"""

from __future__ import annotations

import dataclasses

from heron_spark.config import SystemConfig, build_system_config, read_conf_file
from heron_spark.errors import TopologyTypeError
from heron_spark.plan.logical import LogicalPlan, build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.proto import packing_pb2


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A validated topology, its runtime settings and where its tasks run."""

    logical: LogicalPlan
    system: SystemConfig
    packing: packing_pb2.PackingPlan
    view: PlanView


def prepare(topology, conf: dict | None = None, name: str | None = None) -> Prepared:
    """Validate and pack ``topology``.

    Raise a ``TopologyValueError``/``ConfigError`` naming the component, the value and the fix
    when it cannot run.
    """
    from heron_spark.api.topology import TopologyBuilder

    if isinstance(topology, TopologyBuilder):
        topology = topology.build()
    if not isinstance(topology, type) or not hasattr(topology, "_heron_specs"):
        msg = "submit() takes a Topology subclass or a TopologyBuilder"
        raise TopologyTypeError(msg, value=topology)
    conf = dict(conf or {})
    overrides = {k: v for k, v in conf.items() if not k.startswith("heron.")}
    if overrides:
        topology = type(topology.__name__, (topology,), {
            # _topo_config: set by TopologyType on every class with _heron_specs (checked above).
            "config": {**topology._topo_config, **overrides},  # type: ignore[attr-defined]
            **{s.name: s for s in topology._heron_specs},
            "topology_name": getattr(topology, "topology_name", topology.__name__)})
    logical = build_logical_plan(topology, name)
    system = build_system_config(read_conf_file(), logical.config, conf)
    packing = pack(logical, system.packing_algorithm)
    return Prepared(logical, system, packing, PlanView(logical, packing))
