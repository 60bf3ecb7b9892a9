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

from heron_spark.config import (ROCKSDB_EXTRA, ROCKSDB_PACKAGE, SystemConfig, build_system_config,
                                own_state_config, read_conf_file, state_settings)
from heron_spark.errors import ExtrasError, TopologyTypeError
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
    check_state_backends(logical, system)
    packing = pack(logical, system.packing_algorithm)
    return Prepared(logical, system, packing, PlanView(logical, packing))


def check_state_backends(logical: LogicalPlan, system: SystemConfig) -> None:
    """Refuse a state setting no task could use, before anything starts.

    Every component's ``heron.state.backend`` / ``heron.state.ttl.secs`` (``ConfigError``);
    under effectively once, ``rocksdb`` without the ``rocksdict`` package in this Python
    (``ExtrasError`` naming the component).
    """
    import importlib.util

    from heron_spark.api.state import StatefulComponent

    for name, decl in logical.components.items():
        given = decl.given_class
        if given is not None and not issubclass(given, StatefulComponent):
            continue  # its state is never saved: any setting will do
        settings = state_settings(system, own_state_config(decl.config, logical.config), name)
        if settings.backend == "rocksdb" and logical.topology_config.effectively_once \
                and importlib.util.find_spec(ROCKSDB_PACKAGE) is None:
            raise ExtrasError(ROCKSDB_PACKAGE, ROCKSDB_EXTRA, component=name,
                              what="the rocksdb state backend")
