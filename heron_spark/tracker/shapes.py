"""Heron's tracker response shapes, built from what the state manager holds. No I/O.

Each function takes protos / dicts read from the state manager and returns the JSON-ready
value of one tracker path, with the fields of Heron's tracker (``heron/tools/tracker``:
``TopologyInfo*`` models) plus a few of ours (marked below). Where Heron has no equivalent
the field is empty (``scheduler_location``, ``release_*``, ``shell_port``).

Our cluster / environ / role (``submission`` in the execution state, set by ``submit``): the
cluster is ``"local"`` for a local Spark master, else the master URL; the environ is
``"default"``; the role is the submitting user.
"""

from __future__ import annotations

from urllib.parse import urlencode

from heron_spark.plan.view import instance_id
from heron_spark.proto import packing_pb2, physical_plan_pb2, topology_pb2
from heron_spark.tmaster.views import stmgr_id

DEFAULT_CLUSTER = "local"
DEFAULT_ENVIRON = "default"
_LIVE = ("STARTING", "RUNNING", "PAUSED")


def identity(name: str, execution: dict | None) -> dict:
    """Return the cluster, environ and role of a stored topology."""
    submission = (execution or {}).get("submission") or {}
    return {"cluster": submission.get("cluster") or DEFAULT_CLUSTER,
            "environ": submission.get("environ") or DEFAULT_ENVIRON,
            "role": submission.get("role") or "", "name": name}


def instance_log_path(component: str, task: int) -> str:
    """The log of an instance, relative to its container's work dir (``ContainerFiles``)."""
    return f"logs/instance-{component}-{task}.log"


def logical_plan(topology: topology_pb2.Topology | None) -> dict:
    """``/topologies/logicalplan``: spouts and bolts with streams, inputs and config."""
    spouts, bolts = {}, {}
    if topology is not None:
        for comp in topology.components:
            outputs = [{"stream_name": o.stream, "fields": list(o.fields)} for o in comp.outputs]
            extra = {"parallelism": comp.parallelism, "class_name": comp.class_name}  # ours
            if comp.is_spout:
                spouts[comp.name] = {"config": dict(comp.config), "outputs": outputs,
                                     "spout_type": "default", "spout_source": "NA",
                                     "version": "NA", "extra_links": [], **extra}
            else:
                inputs = [{"stream_name": i.stream, "component_name": i.component,
                           "grouping": topology_pb2.GroupingType.Name(i.grouping)}
                          for i in comp.inputs]
                bolts[comp.name] = {"config": dict(comp.config), "outputs": outputs,
                                    "inputs": inputs,
                                    "inputComponents": [i.component for i in comp.inputs],
                                    **extra}
    return {"stages": _stages(spouts, bolts), "spouts": spouts, "bolts": bolts}


def _stages(spouts: dict, bolts: dict) -> int:
    """Components on the longest path from a spout (Heron counts edges: a spout alone is 0)."""
    depth: dict[str, int] = {name: 0 for name in spouts}
    for _ in range(len(bolts) + 1):  # relax; a DAG settles within its size
        for name, bolt in bolts.items():
            ups = [depth[c] for c in bolt["inputComponents"] if c in depth]
            if ups:
                depth[name] = max(depth.get(name, 0), max(ups) + 1)
    return max(depth.values(), default=0)


def packing_plan(packing: packing_pb2.PackingPlan | None, topology_id: str) -> dict:
    """``/topologies/packingplan``: containers and their instances, with resources."""
    if packing is None:
        return {"id": "", "container_plans": []}
    containers = []
    for container in packing.containers:
        containers.append({
            "id": container.index,
            "instances": [{"component_name": i.component, "task_id": i.task_id,
                           "component_index": i.component_index,
                           "instance_resources": {"cpu": i.cpu, "ram": i.ram_bytes, "disk": 0}}
                          for i in container.instances],
            "required_resources": {"cpu": container.cpu, "ram": container.ram_bytes, "disk": 0},
            "scheduled_resources": {"cpu": None, "ram": None, "disk": None}})
    return {"id": topology_id, "container_plans": containers}


def physical_plan(name: str, plan: physical_plan_pb2.PhysicalPlan | None,
                  topology: topology_pb2.Topology | None) -> dict:
    """``/topologies/physicalplan``: instances, stmgrs, spouts/bolts -> instance ids, config.

    Ours: each instance's ``task_id``, ``component_index``, ``container``, ``pid`` and
    ``logfile_path`` (relative to the container's work dir); ``logfile`` is the tracker URL
    of its first page (``/topologies/container/filedata``).
    """
    spouts: dict[str, list[str]] = {}
    bolts: dict[str, list[str]] = {}
    components = {}
    config = dict(topology.config) if topology is not None else {}
    if topology is not None:
        for comp in topology.components:
            (spouts if comp.is_spout else bolts)[comp.name] = []
            components[comp.name] = {"config": dict(comp.config)}
    stmgrs, instances, groups = {}, {}, {}
    if plan is not None:
        for stmgr in plan.stmgrs:
            sid = stmgr_id(stmgr.container_index)
            stmgrs[sid] = {"id": sid, "host": stmgr.host, "port": stmgr.data_port,
                           "shell_port": None, "cwd": "", "pid": stmgr.pid, "joburl": "",
                           "logfiles": _file_url("filestats", name, stmgr.container_index,
                                                 "logs"),
                           "instance_ids": [], "container": stmgr.container_index}
        for info in sorted(plan.instances, key=lambda i: i.task_id):
            ident = instance_id(info.container_index, info.component, info.task_id)
            sid = stmgr_id(info.container_index)
            log_path = instance_log_path(info.component, info.task_id)
            (spouts if info.component in spouts else bolts).setdefault(info.component,
                                                                       []).append(ident)
            if sid in stmgrs:
                stmgrs[sid]["instance_ids"].append(ident)
            instances[ident] = {"id": ident, "name": info.component, "stmgr_id": sid,
                                "logfile": _file_url("filedata", name, info.container_index,
                                                     log_path),
                                "logfile_path": log_path, "task_id": info.task_id,
                                "component_index": info.component_index,
                                "container": info.container_index, "pid": info.pid}
            groups.setdefault(f"container_{info.container_index}", []).append(ident)
    return {"instances": instances, "instance_groups": groups, "stmgrs": stmgrs,
            "spouts": spouts, "bolts": bolts, "config": config, "components": components}


def _file_url(kind: str, name: str, container: int, path: str) -> str:
    query = {"topology": name, "container": container, "path": path}
    if kind == "filedata":
        query.update(offset=0, length=-1)
    return f"/topologies/container/{kind}?{urlencode(query)}"


def execution_state(name: str, execution: dict | None, topology: topology_pb2.Topology | None,
                    packing: packing_pb2.PackingPlan | None,
                    plan: physical_plan_pb2.PhysicalPlan | None, location: dict | None,
                    live: dict | None) -> dict:
    """``/topologies/executionstate``: Heron's metadata and ``status``.

    ``status`` is our state (STARTING, RUNNING, PAUSED, FINISHED, KILLED, FAILED), from the
    live TMaster (``live``: its status) when one answers, else the last stored one; a stored
    live state with no TMaster answering becomes ``NOT_RUNNING`` (its driver is gone).
    Ours: ``live``, ``state_detail``, ``id``, ``generation``, ``started_at``, ``ended_at``,
    ``instance_failures``.
    """
    stored = execution or {}
    current = live or stored
    state = current.get("state", "UNKNOWN")
    if live is None and state in _LIVE:
        state = "NOT_RUNNING"
    who = identity(name, stored)
    submission = stored.get("submission") or {}
    return {"cluster": who["cluster"], "environ": who["environ"], "role": who["role"],
            "jobname": name, "submission_time": int(submission.get("submission_time") or 0),
            "submission_user": submission.get("submission_user") or who["role"],
            "release_username": "", "release_tag": "",
            "release_version": submission.get("release_version") or "",
            "instances": len(plan.instances) if plan is not None else 0, "extra_links": [],
            "has_physical_plan": plan is not None, "has_packing_plan": packing is not None,
            "has_tmanager_location": bool(location and location.get("port")),
            "has_scheduler_location": False, "status": state, "live": live is not None,
            "state_detail": current.get("detail", ""),
            "id": current.get("id") or (topology.id if topology is not None else ""),
            "generation": current.get("generation", 0), "started_at": current.get("started_at"),
            "ended_at": current.get("ended_at"),
            "instance_failures": current.get("instance_failures", {})}


def tmanager_location(name: str, topology_id: str, location: dict | None) -> dict:
    """Heron's ``tmanager_location`` (the TMaster's control port; no stats port)."""
    location = location or {}
    return {"name": name if location else None, "id": topology_id if location else None,
            "host": location.get("host"), "controller_port": location.get("port"),
            "server_port": location.get("port"), "stats_port": None}


def runtime_state(execution: dict, stmgrs: dict | None = None) -> dict:
    """Heron's ``runtime_state`` (``stmgrs`` only from the live ``/topologies/runtimestate``)."""
    return {"has_physical_plan": execution["has_physical_plan"],
            "has_packing_plan": execution["has_packing_plan"],
            "has_tmanager_location": execution["has_tmanager_location"],
            "has_scheduler_location": False, "stmgrs": stmgrs or {}}


def metadata(execution: dict) -> dict:
    """Heron's ``metadata``: the execution state's identity fields."""
    keys = ("cluster", "environ", "role", "jobname", "submission_time", "submission_user",
            "release_username", "release_tag", "release_version", "instances", "extra_links")
    return {k: execution[k] for k in keys}
