"""Validate a topology class and turn it into a ``LogicalPlan``: the runtime's view of it.

Every check here runs on the driver before anything is launched, and every failure is a
``TopologyValueError`` naming the component, the value and the fix.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from typing import Any

from heron_spark.api import api_constants as keys
from heron_spark.api.bolt import Bolt
from heron_spark.api.component import GlobalStreamId, HeronComponentSpec
from heron_spark.api.context import StreamId
from heron_spark.api.spout import Spout
from heron_spark.api.stream import RESERVED_FIELD_PREFIX, Grouping, Stream, grouping_name
from heron_spark.errors import TopologyValueError
from heron_spark.proto.topology_pb2 import GroupingType

SYSTEM_COMPONENT = "__system"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
_MODES = (keys.TopologyReliabilityMode.ATMOST_ONCE, keys.TopologyReliabilityMode.ATLEAST_ONCE,
          keys.TopologyReliabilityMode.EFFECTIVELY_ONCE)
SUPPORTED_MODES = (keys.TopologyReliabilityMode.ATMOST_ONCE,
                   keys.TopologyReliabilityMode.ATLEAST_ONCE)


@dataclasses.dataclass(frozen=True)
class StreamDecl:
    """One declared output stream."""

    name: str
    fields: tuple[str, ...]
    direct: bool = False


@dataclasses.dataclass(frozen=True)
class InputDecl:
    """One subscription of a bolt: upstream (component, stream) and its grouping."""

    component: str
    stream: str
    grouping: int                      # GroupingType value
    fields: tuple[str, ...] = ()       # FIELDS only
    custom: bytes | None = None        # CUSTOM only: pickled ICustomGrouping


@dataclasses.dataclass
class ComponentDecl:
    """A validated component: its class, tasks, streams and merged configuration."""

    name: str
    component_class: type
    is_spout: bool
    parallelism: int
    outputs: dict[str, StreamDecl]
    inputs: list[InputDecl]
    config: dict[str, Any]


@dataclasses.dataclass
class LogicalPlan:
    """A validated topology. Picklable by value (cloudpickle) so containers can rebuild it."""

    name: str
    components: dict[str, ComponentDecl]
    config: dict[str, Any]
    source_path: str = ""  # the file that defined the topology, on the submitting machine

    def sources(self, component: str) -> dict[StreamId, int] | None:
        """Return ``{StreamId(stream, upstream): grouping type}`` of ``component``'s inputs, as
        Heron's ``context.get_sources`` answers: ``{}`` for a spout, None if unknown."""
        decl = self.components.get(component)
        if decl is None:
            return None
        return {StreamId(sub.stream, sub.component): sub.grouping for sub in decl.inputs}

    def subscribers(self, component: str, stream: str) -> list[tuple[str, InputDecl]]:
        """Return (bolt name, subscription) for every bolt reading ``component:stream``."""
        return [(c.name, i) for c in self.components.values() for i in c.inputs
                if i.component == component and i.stream == stream]

    def upstream_of(self, component: str) -> list[str]:
        """Return the names of the components ``component`` reads from."""
        return sorted({i.component for i in self.components[component].inputs})

    def downstream_of(self, component: str) -> list[str]:
        """Return the names of the components that read from ``component``."""
        return sorted({c.name for c in self.components.values()
                       for i in c.inputs if i.component == component})

    @property
    def reliability_mode(self) -> str:
        """Return ``topology.reliability.mode`` (``topology.enable.acking`` maps onto it)."""
        return reliability_mode(self.config)


def reliability_mode(config: dict) -> str:
    """Read the reliability mode from a topology config, accepting the legacy acking flag."""
    mode = config.get(keys.TOPOLOGY_RELIABILITY_MODE)
    if mode is None and str(config.get(keys.TOPOLOGY_ENABLE_ACKING, "")).lower() == "true":
        return keys.TopologyReliabilityMode.ATLEAST_ONCE
    return mode or keys.TopologyReliabilityMode.ATMOST_ONCE


DEFAULT_MESSAGE_TIMEOUT_SECS = 30.0


def message_timeout_secs(config: dict) -> float:
    """Read ``topology.message.timeout.secs`` (heronpy's default: 30 s)."""
    return float(config.get(keys.TOPOLOGY_MESSAGE_TIMEOUT_SECS) or DEFAULT_MESSAGE_TIMEOUT_SECS)


def build_logical_plan(topology: type, name: str | None = None) -> LogicalPlan:
    """Validate ``topology`` (a ``Topology`` subclass) and return its logical plan."""
    specs: list[HeronComponentSpec] = list(getattr(topology, "_heron_specs", None) or [])
    topo_name = name or getattr(topology, "topology_name", None) or topology.__name__
    if not isinstance(topo_name, str) or not _NAME.match(topo_name):
        raise TopologyValueError("invalid topology name", value=topo_name, kind="name",
                                 fix="use letters, digits, '_', '.' and '-' only")
    config = dict(getattr(topology, "_topo_config", {}))
    _check_topology_config(config)
    by_name: dict[str, HeronComponentSpec] = {}
    for spec in specs:
        _check_name(spec, by_name)
        by_name[spec.name] = spec
    if not any(s.is_spout for s in specs):
        raise TopologyValueError("a topology needs at least one spout", value=topo_name,
                                 kind="no_spout", fix="add a Spout.spec(...) to the topology")
    components: dict[str, ComponentDecl] = {}
    for spec in sorted(specs, key=lambda s: not s.is_spout):  # spouts first, then bolts
        components[spec.name] = _component(spec, config)
    for decl in components.values():
        for sub in decl.inputs:
            _check_input(decl.name, sub, components)
    _check_acyclic(components)
    _check_stmgrs(config, components)
    plan = LogicalPlan(topo_name, components, config, _source_path(topology))
    _check_picklable(plan)
    return plan


def _source_path(topology: type) -> str:
    """Return the absolute path of the file defining ``topology`` ("" if unknown).

    heron_spark ships the topology's code by value, so this plays the part of Heron's pex path
    (``context.get_topology_pex_path()``): the user's file the first non-heron_spark class of
    the topology came from, else the ``__main__`` script (builder-made topologies).
    """
    for cls in getattr(topology, "__mro__", ()):
        module = sys.modules.get(getattr(cls, "__module__", "") or "")
        if module is None or module.__name__.split(".")[0] in ("heron_spark", "heronpy",
                                                               "builtins"):
            continue
        path = getattr(module, "__file__", None)
        if path:
            return os.path.abspath(path)
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return os.path.abspath(path) if path else ""


def _check_topology_config(config: dict) -> None:
    mode = reliability_mode(config)
    if mode not in _MODES:
        raise TopologyValueError("unknown reliability mode", value=mode, kind="config",
                                 fix=f"set {keys.TOPOLOGY_RELIABILITY_MODE} to one of {_MODES}")
    if mode not in SUPPORTED_MODES:
        raise TopologyValueError(f"reliability mode {mode} is not available in this version",
                                 value=mode, kind="unsupported",
                                 fix=f"use one of {SUPPORTED_MODES}")


def _check_name(spec: HeronComponentSpec, seen: dict) -> None:
    if not isinstance(spec.name, str) or not _NAME.match(spec.name) or spec.name.startswith("__"):
        raise TopologyValueError("invalid component name", component=str(spec.name),
                                 value=spec.name, kind="name",
                                 fix="use letters, digits, '_', '.', '-'; no leading '__'")
    if spec.name in seen:
        raise TopologyValueError("two components share this name", component=spec.name,
                                 kind="duplicate_name", fix="give each component a unique name")


def _component(spec: HeronComponentSpec, topo_config: dict) -> ComponentDecl:
    name, cls = spec.name, spec.component_class
    par = spec.parallelism
    if not isinstance(par, int) or isinstance(par, bool) or par < 1:
        raise TopologyValueError("parallelism must be an integer >= 1", component=name,
                                 value=par, kind="parallelism", fix="pass par=1 or more")
    base = Spout if spec.is_spout else Bolt
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise TopologyValueError(f"class must subclass {base.__name__}", component=name,
                                 value=cls, kind="class", fix=f"derive it from {base.__name__}")
    required = "next_tuple" if spec.is_spout else "process"
    if getattr(cls, required) is getattr(base, required):
        raise TopologyValueError(f"{cls.__name__} does not implement {required}()",
                                 component=name, kind="class", fix=f"define {required}(self, ...)")
    outputs = _outputs(name, spec.outputs)
    inputs = _inputs(name, spec)
    if spec.is_spout and inputs:
        raise TopologyValueError("a spout cannot have inputs", component=name, kind="inputs",
                                 fix="make it a Bolt, or drop inputs=")
    if not spec.is_spout and not inputs:
        raise TopologyValueError("a bolt needs at least one input", component=name,
                                 kind="inputs", fix="pass inputs={upstream_spec: Grouping...}")
    config = {**topo_config, **(spec.custom_config or {}),
              keys.TOPOLOGY_COMPONENT_PARALLELISM: par}
    return ComponentDecl(name, cls, spec.is_spout, par, outputs, inputs, config)


def _outputs(component: str, declared) -> dict[str, StreamDecl]:
    streams: dict[str, list[str]] = {}
    direct: dict[str, bool] = {}
    for out in declared or []:
        if isinstance(out, str):
            streams.setdefault(Stream.DEFAULT_STREAM_ID, []).append(out)
        elif isinstance(out, Stream):
            if out.stream_id in streams and out.stream_id != Stream.DEFAULT_STREAM_ID:
                raise TopologyValueError("stream declared twice", component=component,
                                         value=out.stream_id, kind="stream",
                                         fix="declare each stream once")
            streams.setdefault(out.stream_id, []).extend(out.fields)
            direct[out.stream_id] = direct.get(out.stream_id, False) or out.direct
        else:
            raise TopologyValueError("outputs must be field names or Stream objects",
                                     component=component, value=out, kind="stream",
                                     fix="use outputs = ['field', Stream([...], name=...)]")
    for stream, fields in streams.items():
        if len(set(fields)) != len(fields):
            raise TopologyValueError(f"stream {stream!r} repeats a field name",
                                     component=component, value=fields, kind="fields",
                                     fix="give each field a unique name")
        bad = [f for f in fields if f.startswith(RESERVED_FIELD_PREFIX)]
        if bad:
            raise TopologyValueError(f"field names starting {RESERVED_FIELD_PREFIX!r} are reserved",
                                     component=component, value=bad, kind="fields",
                                     fix="rename the field")
    return {s: StreamDecl(s, tuple(f), direct.get(s, False)) for s, f in streams.items()}


def _inputs(component: str, spec: HeronComponentSpec) -> list[InputDecl]:
    raw = spec.inputs
    if raw is None:
        return []
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, (list, tuple)):
        pairs = [(item, Grouping.SHUFFLE) for item in raw]
    else:
        raise TopologyValueError("inputs must be a dict {input: Grouping} or a list",
                                 component=component, value=raw, kind="inputs",
                                 fix="pass inputs={upstream_spec: Grouping.SHUFFLE}")
    decls = []
    for key, grouping in pairs:
        if isinstance(key, HeronComponentSpec):
            upstream, stream = key.name, Stream.DEFAULT_STREAM_ID
        elif isinstance(key, GlobalStreamId):
            upstream, stream = key.component_id, key.stream_id
        elif isinstance(key, str):
            upstream, stream = key, Stream.DEFAULT_STREAM_ID
        else:
            raise TopologyValueError("an input must be a spec, a GlobalStreamId or a name",
                                     component=component, value=key, kind="inputs",
                                     fix="use the spec returned by add_spout/add_bolt")
        if not Grouping.is_grouping_sane(grouping):
            raise TopologyValueError(f"input {upstream}:{stream} has an unknown grouping",
                                     component=component, value=grouping, kind="grouping",
                                     fix="use a Grouping (SHUFFLE, fields(...), ALL, ...)")
        if isinstance(grouping, Grouping.FIELDS):
            decls.append(InputDecl(upstream, stream, GroupingType.FIELDS, tuple(grouping.fields)))
        elif isinstance(grouping, Grouping.CUSTOM):
            decls.append(InputDecl(upstream, stream, GroupingType.CUSTOM,
                                   custom=grouping.python_serialized))
        else:
            decls.append(InputDecl(upstream, stream, int(grouping)))
    return decls


def _check_input(component: str, sub: InputDecl, components: dict[str, ComponentDecl]) -> None:
    where = f"input {sub.component}:{sub.stream}"
    upstream = components.get(sub.component)
    if upstream is None:
        raise TopologyValueError(f"{where} names an unknown component", component=component,
                                 value=sub.component, kind="unknown_component",
                                 fix=f"use one of {sorted(components)}")
    stream = upstream.outputs.get(sub.stream)
    if stream is None:
        raise TopologyValueError(f"{where}: {sub.component!r} declares no such stream",
                                 component=component, value=sub.stream, kind="unknown_stream",
                                 fix=f"use one of {sorted(upstream.outputs)} or declare it in "
                                     f"{sub.component}'s outputs")
    missing = [f for f in sub.fields if f not in stream.fields]
    if missing:
        raise TopologyValueError(f"{where}: fields grouping on undeclared field(s)",
                                 component=component, value=missing, kind="unknown_field",
                                 fix=f"group on declared fields {list(stream.fields)}")
    is_direct = sub.grouping == GroupingType.DIRECT
    if is_direct != stream.direct:
        raise TopologyValueError(
            f"{where}: grouping {grouping_name(sub.grouping)} does not fit a "
            f"{'direct' if stream.direct else 'non-direct'} stream", component=component,
            value=grouping_name(sub.grouping), kind="grouping",
            fix="subscribe to a direct stream (Stream(..., direct=True)) with Grouping.DIRECT, "
                "and to other streams with other groupings")


def _check_acyclic(components: dict[str, ComponentDecl]) -> None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for up in {i.component for i in components[name].inputs}:
            if state.get(up) == 1:
                cycle = path[path.index(up):] + [up] if up in path else [up, name]
                raise TopologyValueError("the topology has a cycle", component=name,
                                         value=" -> ".join(reversed(cycle)), kind="cycle",
                                         fix="remove one of the inputs on the cycle")
            if state.get(up) is None:
                visit(up, path + [up])
        state[name] = 2

    for name in components:
        if state.get(name) is None:
            visit(name, [name])


def _check_stmgrs(config: dict, components: dict[str, ComponentDecl]) -> None:
    stmgrs = config.get(keys.TOPOLOGY_STMGRS, 1)
    try:
        count = int(stmgrs)
    except (TypeError, ValueError):
        count = 0
    total = sum(c.parallelism for c in components.values())
    if count < 1:
        raise TopologyValueError(f"{keys.TOPOLOGY_STMGRS} must be an integer >= 1", value=stmgrs,
                                 kind="config", fix="set it to the number of containers")
    if count > total:
        raise TopologyValueError(f"{keys.TOPOLOGY_STMGRS} exceeds the number of instances",
                                 value=count, kind="config",
                                 fix=f"use at most {total} containers (one per instance)")


def _check_picklable(plan: LogicalPlan) -> None:
    from heron_spark import _pickling

    for decl in plan.components.values():
        for what, obj in (("class", decl.component_class), ("config", decl.config)):
            try:
                _pickling.dumps(obj)
            except Exception as exc:  # noqa: BLE001 - any pickling failure is the user's to fix
                raise TopologyValueError(f"its {what} cannot be pickled ({exc})",
                                         component=decl.name, value=obj, kind="pickle",
                                         fix="keep sockets, locks and open files out of the "
                                             "class body and config; open them in initialize()"
                                         ) from exc
