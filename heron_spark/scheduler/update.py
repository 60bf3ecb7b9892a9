"""``heron update`` on Spark: rescale a running topology as its next generation. Driver only.

``Rescaler`` is what ``submit`` installs as the TMaster's ``updater``. It checks the request
before touching anything (every component named exists, every parallelism is an integer
>= 1, something changes, the containers still fit, the Spark cluster has the slots), then
re-packs, tells the barrier stage to run the new containers as soon as the current ones end,
and asks the TMaster to stop the current generation. Once the old containers are gone the
stage (its own thread) switches the TMaster to the new plan, stores the new topology and
packing plan in the state manager, and launches the new generation.

At-least-once: tuples in flight when the old containers stop are never acked, so the spouts
of the new generation replay them (``FileSpout`` resumes from the offsets it committed in the
state manager, keyed by component and task index). Effectively-once topologies are refused:
their checkpoints hold per-task state that would need repartitioning.
"""

from __future__ import annotations

import dataclasses
import logging
import threading

from heron_spark import _pickling
from heron_spark.config import SystemConfig
from heron_spark.errors import TopologyValueError
from heron_spark.plan.logical import LogicalPlan, _check_stmgrs
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.scheduler.remote import RemoteTMaster
from heron_spark.scheduler.remote_statemgr import run_on
from heron_spark.scheduler.spark_scheduler import BarrierStage, check_slots
from heron_spark.statemgr.base import PACKING_PLAN, TOPOLOGY, StateManager
from heron_spark.tmaster.master import TMaster

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


class Rescaler:
    """The TMaster's ``updater`` for a topology submitted to Spark (see the module docstring).

    Called on the thread that asked (a control-port reader, or the handle's caller); one
    update runs at a time (a lock), and the TMaster refuses another until the new generation
    runs.
    """

    def __init__(self, spark, system: SystemConfig, statemgr: StateManager,
                 tmaster: TMaster | RemoteTMaster,
                 stage: BarrierStage, topology_id: str) -> None:
        self.spark, self.system, self.statemgr = spark, system, statemgr
        self.tmaster, self.stage, self.topology_id = tmaster, stage, topology_id
        self._lock = threading.Lock()

    def __call__(self, parallelism: dict[str, int]) -> int:
        """Start rescaling to ``parallelism``; return the generation that will run it."""
        with self._lock:
            current = self.tmaster.plan.logical
            if current.topology_config.effectively_once:
                msg = ("cannot update an effectively-once topology: its checkpointed state is "
                       "per task")
                raise TopologyValueError(
                    msg, value=dict(parallelism), kind="reliability",
                    fix="kill it and submit it again with the new parallelism")
            plan = with_parallelism(current, parallelism)
            packing = pack(plan, self.system.packing_algorithm)
            view = PlanView(plan, packing)
            check_slots(self.spark, view.container_count, self.system.spark_slots_wait_secs)
            definition = _pickling.dumps(plan)
            generation = self.tmaster.generation + 1
            task = dataclasses.replace(self.stage.task, definition=definition,
                                       packing_plan=packing.SerializeToString(),
                                       generation=generation)

            def switch() -> bool:
                """In the stage's thread, once the old containers are gone."""
                if self.tmaster.state.ended:
                    return False  # killed meanwhile
                from heron_spark.scheduler.submit import _topology_proto

                self.tmaster.begin_generation(generation, view)
                run_on(self.statemgr, store_plans, plan.name,
                       _topology_proto(plan, self.topology_id, definition).SerializeToString(),
                       packing.SerializeToString())
                return True

            self.stage.relaunch(task, view.container_count, switch)
            self.tmaster.stop_generation(f"updating to {dict(parallelism)}: generation "
                                         f"{generation} runs {view.container_count} containers")
            log.info("topology %s: updating to %s as generation %d", plan.name,
                     dict(parallelism), generation)
            return generation
