"""``heron update`` on Spark: what a rescaled topology runs as its next generation. Driver only.

``plan_update`` checks the request before anything changes (every component named exists,
every parallelism is an integer >= 1, something changes, the containers still fit, the Spark
cluster has the slots) and re-packs. ``scheduler.run.TopologyRun.update`` then tells the
barrier stage to run the new containers as soon as the current ones end and asks the TMaster
to stop the current generation; once the old containers are gone the stage (its own thread)
switches the TMaster to the new plan, stores the new topology and packing plan in the state
manager (``store_plans``, ``topology_proto``), and launches the new generation.

At-least-once: tuples in flight when the old containers stop are never acked, so the spouts
of the new generation replay them (``FileSpout`` resumes from the offsets it committed in the
state manager, keyed by component and task index).

Effectively once: the new generation restores the last committed checkpoint, each stateful
bolt's keyed state split by key group over its new tasks (``instance.stateful``; the fields
grouping routes by the same key groups). A stateful spout's state (its read offsets) is per
task and cannot be split: changing a stateful spout's parallelism is refused
(``check_stateful_rescale``), as is a stateful bolt with an input that is not fields-grouped
(its state is not keyed by what routes its tuples). ``topology.max.parallelism`` cannot change:
an update never changes the config, and a restore refuses a checkpoint written with another.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from heron_spark import _pickling
from heron_spark.config import SystemConfig
from heron_spark.api.api_constants import TOPOLOGY_MAX_PARALLELISM
from heron_spark.errors import TopologyValueError
from heron_spark.plan.logical import LogicalPlan, _check_stmgrs
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.proto import topology_pb2
from heron_spark.scheduler.spark_scheduler import check_slots
from heron_spark.statemgr.base import PACKING_PLAN, TOPOLOGY, StateManager

log = logging.getLogger(__name__)


def with_parallelism(plan: LogicalPlan, parallelism: dict[str, int]) -> LogicalPlan:
    """Return ``plan`` with components rescaled to ``parallelism``.

    Raise TopologyValueError naming the component when a name or a count is wrong, or nothing
    changes.
    """
    if not parallelism:
        msg = "no component to update"
        raise TopologyValueError(msg, kind="parallelism",
                                 fix="name at least one: --component-parallelism NAME:N")
    for name, count in parallelism.items():
        if name not in plan.components:
            msg = "no such component"
            raise TopologyValueError(msg, component=name, kind="component",
                                     fix=f"use one of {sorted(plan.components)}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            msg = "parallelism must be an integer >= 1"
            raise TopologyValueError(msg, component=name,
                                     value=count, kind="parallelism", fix="pass 1 or more")
    if all(plan.components[name].parallelism == count for name, count in parallelism.items()):
        msg = "the parallelism is unchanged"
        raise TopologyValueError(msg, value=dict(parallelism),
                                 kind="parallelism",
                                 fix="pass a count that differs from the running one")
    components = {name: dataclasses.replace(decl, parallelism=parallelism.get(name,
                                                                              decl.parallelism))
                  for name, decl in plan.components.items()}
    _check_stmgrs(plan.topology_config, components)
    return dataclasses.replace(plan, components=components)


def stored_parallelism(statemgr: StateManager, plan: LogicalPlan) -> LogicalPlan | None:
    """Return the submitted ``plan`` rescaled to its stored parallelism, or None if it matches.

    Used when resuming a topology whose driver died: the stored parallelism is what
    ``heron update`` last set. Components the stored topology does not name keep theirs.
    """
    return rescaled_to_stored(statemgr.get_topology(plan.name), plan)


def rescaled_to_stored(stored, plan: LogicalPlan) -> LogicalPlan | None:
    """Return ``plan`` rescaled to the ``stored`` topology's parallelism, or None if it matches.

    ``stored`` is the ``topology_pb2.Topology`` in the state manager (None: nothing stored).
    """
    if stored is None:
        return None
    changed = {c.name: c.parallelism for c in stored.components if c.name in plan.components
               and c.parallelism != plan.components[c.name].parallelism}
    if not changed:
        return None
    log.warning("resuming topology %s with the parallelism it was updated to: %s", plan.name,
                changed)
    return with_parallelism(plan, changed)


def store_plans(statemgr: StateManager, name: str, topology: bytes, packing: bytes) -> None:
    """Store a new generation's serialized topology and packing plan (one job when remote)."""
    statemgr.put(name, TOPOLOGY, topology)
    statemgr.put(name, PACKING_PLAN, packing)


@dataclasses.dataclass(frozen=True)
class Rescale:
    """A checked update: the new logical plan, its packing, view and pickled definition."""

    plan: LogicalPlan
    packing: Any
    view: PlanView
    definition: bytes


def plan_update(spark, system: SystemConfig, current: LogicalPlan,
                parallelism: dict[str, int]) -> Rescale:
    """Check an update of ``current`` to ``parallelism`` and pack it (see the module docstring).

    Raise TopologyValueError (an effectively-once topology, a bad name or count, nothing
    changes) or ClusterCapacityError (the cluster lacks the slots); nothing has changed then.
    """
    plan = with_parallelism(current, parallelism)
    if current.topology_config.effectively_once:
        check_stateful_rescale(current, plan)
    packing = pack(plan, system.packing_algorithm)
    view = PlanView(plan, packing)
    check_slots(spark, view.container_count, system.spark_slots_wait_secs)
    return Rescale(plan, packing, view, _pickling.dumps(plan))


def check_stateful_rescale(current: LogicalPlan, plan: LogicalPlan) -> None:
    """Refuse rescaling a stateful component whose state cannot be split by key group.

    Effectively once only: a stateful spout (its offsets are per task), and a stateful bolt
    (or one with timers, ``Bolt.on_timer``) with an input that is not fields-grouped.
    Stateless components rescale freely.
    """
    from heron_spark.api.state import StatefulComponent
    from heron_spark.instance.timers import uses_timers

    for name, decl in plan.components.items():
        old = current.components[name].parallelism
        keyed = issubclass(decl.component_class, StatefulComponent) \
            or uses_timers(decl.component_class)  # timers are split by key group too
        if decl.parallelism == old or not keyed:
            continue
        fix = (f"keep {name}'s parallelism {old} (the state of each of its tasks is restored "
               f"as it is), or kill the topology and submit it again to start from empty state")
        if decl.is_spout:
            msg = ("cannot change the parallelism of a stateful spout of an effectively-once "
                   "topology: its state (what it read) is per task and cannot be split by key")
            raise TopologyValueError(msg, component=name, value=decl.parallelism,
                                     kind="parallelism", fix=fix)
        unkeyed = [f"{sub.component}/{sub.stream}" for sub in decl.inputs
                   if sub.grouping != topology_pb2.GroupingType.FIELDS]
        if unkeyed:
            msg = (f"cannot change the parallelism of a stateful bolt of an effectively-once "
                   f"topology whose input {', '.join(unkeyed)} is not fields-grouped: its "
                   f"state is split by the key groups of {TOPOLOGY_MAX_PARALLELISM}, which only "
                   f"a fields grouping routes by")
            raise TopologyValueError(msg, component=name, value=decl.parallelism,
                                     kind="parallelism", fix=fix)


def topology_proto(plan: LogicalPlan, topology_id: str,
                   definition: bytes) -> topology_pb2.Topology:
    """Return the ``Topology`` message the state manager stores for ``plan``."""
    proto = topology_pb2.Topology(name=plan.name, id=topology_id, python_definition=definition)
    proto.config.update({k: str(v) for k, v in plan.config.items()})
    for decl in plan.components.values():
        comp = proto.components.add(name=decl.name, is_spout=decl.is_spout,
                                    parallelism=decl.parallelism,
                                    class_name=decl.class_path)
        comp.config.update({k: str(v) for k, v in decl.config.items()})
        for stream in decl.outputs.values():
            comp.outputs.add(stream=stream.name, fields=list(stream.fields), direct=stream.direct)
        for sub in decl.inputs:
            comp.inputs.add(component=sub.component, stream=sub.stream, grouping=sub.grouping,
                            fields=list(sub.fields), custom_grouping=sub.custom or b"")
    return proto
