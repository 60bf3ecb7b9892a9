"""Fast lookups over a packing plan and physical plan, shared by the TMaster, stmgr and instances."""

from __future__ import annotations

from heron_spark.plan.logical import LogicalPlan
from heron_spark.proto import packing_pb2, physical_plan_pb2


def instance_id(container_index: int, component: str, task_id: int) -> str:
    """Return Heron's instance id, ``container_<container index>_<component>_<task id>``.

    Our container indices start at 0. The one place this format is written.
    """
    return f"container_{container_index}_{component}_{task_id}"


class PlanView:
    """Who runs where: task -> component / container, component -> tasks, container -> stmgr.

    Built once per plan; read-only afterwards, so threads may share it.
    """

    def __init__(self, logical: LogicalPlan, packing: packing_pb2.PackingPlan,
                 physical: physical_plan_pb2.PhysicalPlan | None = None) -> None:
        self.logical = logical
        self.packing = packing
        self.physical = physical
        self.task_component: dict[int, str] = {}
        self.task_index: dict[int, int] = {}
        self.task_container: dict[int, int] = {}
        self.component_tasks: dict[str, list[int]] = {name: [] for name in logical.components}
        for container in packing.containers:
            for inst in container.instances:
                self.task_component[inst.task_id] = inst.component
                self.task_index[inst.task_id] = inst.component_index
                self.task_container[inst.task_id] = container.index
                self.component_tasks[inst.component].append(inst.task_id)
        for tasks in self.component_tasks.values():
            tasks.sort()
        self.stmgr_address: dict[int, tuple[str, int]] = {}
        if physical is not None:
            self.stmgr_address = {s.container_index: (s.host, s.data_port) for s in physical.stmgrs}

    @property
    def container_count(self) -> int:
        """Number of containers (stmgrs)."""
        return len(self.packing.containers)

    def instance_id(self, task_id: int) -> str:
        """Return Heron's id of ``task_id``'s instance: ``container_<index>_<component>_<task>``."""
        return instance_id(self.task_container[task_id], self.task_component[task_id], task_id)

    def tasks_in(self, container_index: int) -> list[int]:
        """Return the task ids packed into ``container_index``."""
        return [i.task_id for i in self.packing.containers[container_index].instances]

    def upstream_tasks(self, task_id: int) -> list[int]:
        """Return every task that may send tuples to ``task_id``."""
        component = self.task_component[task_id]
        return sorted(t for up in self.logical.upstream_of(component)
                      for t in self.component_tasks[up])

    def downstream_tasks(self, task_id: int) -> list[int]:
        """Return every task that ``task_id`` may send tuples to."""
        component = self.task_component[task_id]
        return sorted(t for down in self.logical.downstream_of(component)
                      for t in self.component_tasks[down])
