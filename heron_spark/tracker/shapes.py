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

from heron_spark.contract.execution_state import (LIVE_STATES, UNKNOWN, ExecutionState,
                                                  Submission)
from heron_spark.contract.topology_view import TMasterLocation, TopologyStatus
from heron_spark.contract.ids import instance_id, stmgr_id
from heron_spark.contract.layout import LOGS, instance_log_path
from heron_spark.proto import packing_pb2, physical_plan_pb2, topology_pb2

DEFAULT_CLUSTER = "local"
DEFAULT_ENVIRON = "default"


def identity(name: str, execution: ExecutionState | None) -> dict:
    """Return the cluster, environ and role of a stored topology."""
    submission = execution.submission if execution is not None else Submission()
    return {"cluster": submission.cluster or DEFAULT_CLUSTER,
            "environ": submission.environ or DEFAULT_ENVIRON,
            "role": submission.role, "name": name}


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
    stmgrs: dict = {}
    instances: dict = {}
    groups: dict = {}
    if plan is not None:
        for stmgr in plan.stmgrs:
            sid = stmgr_id(stmgr.container_index)
            stmgrs[sid] = {"id": sid, "host": stmgr.host, "port": stmgr.data_port,
                           "shell_port": None, "cwd": "", "pid": stmgr.pid, "joburl": "",
                           "logfiles": _file_url("filestats", name, stmgr.container_index,
                                                 LOGS),
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


def execution_state(name: str, execution: ExecutionState | None,
                    topology: topology_pb2.Topology | None,
                    packing: packing_pb2.PackingPlan | None,
                    plan: physical_plan_pb2.PhysicalPlan | None,
                    location: TMasterLocation | None, live: TopologyStatus | None) -> dict:
    """``/topologies/executionstate``: Heron's metadata and ``status``.

    ``status`` is our state (STARTING, RUNNING, PAUSED, FINISHED, KILLED, FAILED), from the
    live TMaster (``live``: its status) when one answers, else the last stored one; a stored
    live state with no TMaster answering becomes ``NOT_RUNNING`` (its driver is gone).
    Ours: ``live``, ``state_detail``, ``id``, ``generation``, ``started_at``, ``ended_at``,
    ``instance_failures``.
    """
    stored = TopologyStatus.from_record(execution) if execution is not None else None
    current = live or stored or TopologyStatus(name, "", UNKNOWN)
    state = current.state
    if live is None and state in LIVE_STATES:
        state = "NOT_RUNNING"
    who = identity(name, execution)
    submission = stored.submission if stored is not None else {}
    return {"cluster": who["cluster"], "environ": who["environ"], "role": who["role"],
            "jobname": name, "submission_time": int(submission.get("submission_time") or 0),
            "submission_user": submission.get("submission_user") or who["role"],
            "release_username": "", "release_tag": "",
            "release_version": submission.get("release_version") or "",
            "instances": len(plan.instances) if plan is not None else 0, "extra_links": [],
            "has_physical_plan": plan is not None, "has_packing_plan": packing is not None,
            "has_tmanager_location": location is not None and bool(location.port),
            "has_scheduler_location": False, "status": state, "live": live is not None,
            "state_detail": current.detail,
            "id": current.id or (topology.id if topology is not None else ""),
            "generation": current.generation, "started_at": current.started_at,
            "ended_at": current.ended_at,
            "instance_failures": {str(k): v for k, v in current.instance_failures.items()}}


def tmanager_location(name: str, topology_id: str, location: TMasterLocation | None) -> dict:
    """Heron's ``tmanager_location`` (the TMaster's control port; no stats port)."""
    if location is None:
        return {"name": None, "id": None, "host": None, "controller_port": None,
                "server_port": None, "stats_port": None}
    return {"name": name, "id": topology_id, "host": location.host,
            "controller_port": location.port, "server_port": location.port, "stats_port": None}


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
