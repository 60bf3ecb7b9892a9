"""Packing: assign every component instance (task) to a container.

Task ids are given in logical-plan order (spouts first), from 1. Two algorithms, as in Heron:
round-robin over ``topology.stmgrs`` containers (default), and first-fit-decreasing by
instance RAM (then CPU) into containers of at most ``topology.container.max.{ram,cpu}.hint``.
"""

from __future__ import annotations

import dataclasses

from heron_spark.api import api_constants as keys
from heron_spark.errors import TopologyValueError
from heron_spark.plan.logical import LogicalPlan
from heron_spark.proto import packing_pb2

GiB = 1024 ** 3
COMPONENT_RAM = "topology.component.ram"      # bytes, in a component's config
COMPONENT_CPU = "topology.component.cpu"      # cores, in a component's config
DEFAULT_INSTANCE_RAM_BYTES = 512 * 1024 ** 2
DEFAULT_INSTANCE_CPU = 1.0
DEFAULT_CONTAINER_MAX_RAM_BYTES = 4 * GiB
DEFAULT_CONTAINER_MAX_CPU = 4.0


@dataclasses.dataclass(frozen=True)
class InstanceRequest:
    """One task to place, with the resources it asks for."""

    task_id: int
    component: str
    component_index: int
    cpu: float
    ram_bytes: int


def instance_requests(plan: LogicalPlan) -> list[InstanceRequest]:
    """Return every task of ``plan`` with its resources, task ids from 1 in plan order."""
    rammap = _parse_map(plan.config.get(keys.TOPOLOGY_COMPONENT_RAMMAP), keys.TOPOLOGY_COMPONENT_RAMMAP)
    cpumap = _parse_map(plan.config.get(keys.TOPOLOGY_COMPONENT_CPUMAP), keys.TOPOLOGY_COMPONENT_CPUMAP)
    out, task_id = [], 1
    for comp in plan.components.values():
        ram = _number(comp.config.get(COMPONENT_RAM, rammap.get(comp.name, DEFAULT_INSTANCE_RAM_BYTES)),
                      comp.name, COMPONENT_RAM)
        cpu = _number(comp.config.get(COMPONENT_CPU, cpumap.get(comp.name, DEFAULT_INSTANCE_CPU)),
                      comp.name, COMPONENT_CPU)
        for index in range(comp.parallelism):
            out.append(InstanceRequest(task_id, comp.name, index, float(cpu), int(ram)))
            task_id += 1
    return out


def pack(plan: LogicalPlan, algorithm: str = "round_robin") -> packing_pb2.PackingPlan:
    """Return the packing plan of ``plan`` with ``algorithm``."""
    requests = instance_requests(plan)
    if algorithm == "round_robin":
        groups = _round_robin(requests, plan.topology_config.stmgrs)
    elif algorithm == "first_fit_decreasing":
        groups = _first_fit_decreasing(requests, plan.config)
    else:
        msg = "unknown packing algorithm"
        raise TopologyValueError(msg, value=algorithm, kind="config",
                                 fix="use round_robin or first_fit_decreasing")
    packing = packing_pb2.PackingPlan(topology_name=plan.name, algorithm=algorithm)
    for index, group in enumerate(groups):
        container = packing.containers.add(index=index)
        for req in sorted(group, key=lambda r: r.task_id):
            container.instances.add(task_id=req.task_id, component=req.component,
                                    component_index=req.component_index, cpu=req.cpu,
                                    ram_bytes=req.ram_bytes)
        container.cpu = sum(r.cpu for r in group)
        container.ram_bytes = sum(r.ram_bytes for r in group)
    return packing


def _round_robin(requests: list[InstanceRequest], containers: int) -> list[list[InstanceRequest]]:
    groups: list[list[InstanceRequest]] = [[] for _ in range(containers)]
    for i, req in enumerate(requests):
        groups[i % containers].append(req)
    return groups


def _first_fit_decreasing(requests: list[InstanceRequest], config: dict) -> list[list[InstanceRequest]]:
    max_ram = int(_number(config.get(keys.TOPOLOGY_CONTAINER_MAX_RAM_HINT,
                                     config.get(keys.TOPOLOGY_CONTAINER_RAM_REQUESTED,
                                                DEFAULT_CONTAINER_MAX_RAM_BYTES)),
                          None, keys.TOPOLOGY_CONTAINER_MAX_RAM_HINT))
    max_cpu = float(_number(config.get(keys.TOPOLOGY_CONTAINER_MAX_CPU_HINT,
                                       config.get(keys.TOPOLOGY_CONTAINER_CPU_REQUESTED,
                                                  DEFAULT_CONTAINER_MAX_CPU)),
                            None, keys.TOPOLOGY_CONTAINER_MAX_CPU_HINT))
    groups: list[list[InstanceRequest]] = []
    free: list[list[float]] = []  # [ram, cpu] left per container
    for req in sorted(requests, key=lambda r: (-r.ram_bytes, -r.cpu, r.task_id)):
        if req.ram_bytes > max_ram or req.cpu > max_cpu:
            msg = (
                f"an instance needs {req.ram_bytes} bytes / {req.cpu} cpu, more than a container "
                f"holds ({max_ram} bytes / {max_cpu} cpu)"
            )
            raise TopologyValueError(
                msg, component=req.component,
                value=(req.ram_bytes, req.cpu), kind="resources",
                fix=f"raise {keys.TOPOLOGY_CONTAINER_MAX_RAM_HINT} / "
                    f"{keys.TOPOLOGY_CONTAINER_MAX_CPU_HINT} or lower the component's request")
        for group, room in zip(groups, free):
            if req.ram_bytes <= room[0] and req.cpu <= room[1] + 1e-9:
                group.append(req)
                room[0] -= req.ram_bytes
                room[1] -= req.cpu
                break
        else:
            groups.append([req])
            free.append([max_ram - req.ram_bytes, max_cpu - req.cpu])
    return groups


def _parse_map(raw, key: str) -> dict[str, float]:
    if not raw:
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    out = {}
    for part in str(raw).split(","):
        name, sep, value = part.partition(":")
        if not sep:
            msg = f"{key} entries must be component:value"
            raise TopologyValueError(msg, value=part,
                                     kind="config", fix="write e.g. 'split:1073741824,count:536870912'")
        out[name.strip()] = _number(value, name.strip(), key)
    return out


def _number(value, component: str | None, key: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if number <= 0:
        msg = f"{key} must be a positive number"
        raise TopologyValueError(msg, component=component,
                                 value=value, kind="resources", fix="give bytes for RAM, cores for CPU")
    return number
