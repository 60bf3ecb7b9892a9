"""Validate a topology class and turn it into a ``LogicalPlan``: the runtime's view of it.

Every check here runs on the driver before anything is launched, and every failure is a
``TopologyValueError`` naming the component, the value and the fix.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, TypeGuard, cast

from heron_spark.api import api_constants as keys
from heron_spark.api._loading import class_here, load_component_class
from heron_spark.api.bolt import Bolt
from heron_spark.api.component import GlobalStreamId, HeronComponentSpec
from heron_spark.api.context import StreamId
from heron_spark.api.spout import Spout
from heron_spark.api.stream import RESERVED_FIELD_PREFIX, Grouping, Stream, grouping_name
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.api.tuple import TupleHelper
from heron_spark.errors import TopologyValueError
from heron_spark.proto.topology_pb2 import GroupingType

SYSTEM_COMPONENT = TupleHelper.TICK_SOURCE_COMPONENT  # "__system", as in Heron
TICK_STREAM = TupleHelper.TICK_TUPLE_ID                # "__tick", as in Heron
# Heron refuses no character in component names and only "." and "/" in topology names; these
# we refuse because names become file names, state-manager keys and quoted metric labels
# (instance-<component>-<task>.log, <statemgr>/<topology>/..., component="<name>").
_FORBIDDEN_CHARS = frozenset('/\\"\0\n\r')


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
    """A validated component: its class, tasks, streams and merged configuration.

    The merged configuration is the topology's keys overridden by the component's own, read
    once into ``topology_config``. ``class_path`` is the class's dotted path; ``given_class``
    the class itself when the plan carries it (given as a class, or a path into the driver's
    ``__main__``), else None: the tasks import ``class_path`` (``component_class``).
    """

    name: str
    class_path: str
    is_spout: bool
    parallelism: int
    outputs: dict[str, StreamDecl]
    inputs: list[InputDecl]
    config: dict[str, Any]
    topology_config: TopologyConfig  # the component's view (tick freq, auto ack, max pending)
    given_class: type | None = None

    @property
    def component_class(self) -> type:
        """The component's class: ``given_class``, else ``class_path`` imported here.

        Raise ``ComponentClassError`` naming the component, the path, this Python and its
        ``sys.path`` when it does not import. Either side; imports on first use in a process.
        """
        if self.given_class is not None:
            return self.given_class
        return load_component_class(self.name, self.class_path)


@dataclasses.dataclass
class LogicalPlan:
    """A validated topology. Picklable by value (cloudpickle) so containers can rebuild it.

    ``config`` is the topology's config as user code sees it; the runtime reads the typed
    ``topology_config`` built from it once, at validation.
    """

    name: str
    components: dict[str, ComponentDecl]
    config: dict[str, Any]
    topology_config: TopologyConfig
    source_path: str = ""  # the file that defined the topology, on the submitting machine

    def sources(self, component: str) -> dict[StreamId, int] | None:
        """Return the grouping type of each input of ``component``.

        Return ``{StreamId(stream, upstream): grouping type}`` of ``component``'s inputs, as
        Heron's ``context.get_sources`` answers: ``{}`` for a spout, None if unknown.
        """
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

    def resolve_classes(self) -> None:
        """Import every component's class here; raise ``ComponentClassError`` for the first that fails.

        Where the tasks will run: the in-process runner calls it before starting, Spark's
        preflight probe on the executors.
        """
        for decl in self.components.values():
            cls = decl.component_class
            _check_class(decl.name, cls, decl.is_spout)


def build_logical_plan(topology: type, name: str | None = None) -> LogicalPlan:
    """Validate ``topology`` (a ``Topology`` subclass) and return its logical plan."""
    specs: list[HeronComponentSpec] = list(getattr(topology, "_heron_specs", None) or [])
    topo_name = name or getattr(topology, "topology_name", None) or topology.__name__
    if not _usable_name(topo_name) or topo_name in (".", ".."):
        # Heron: a name is required. Ours: it names folders and keys of the state manager.
        msg = "invalid topology name"
        raise TopologyValueError(msg, value=topo_name, kind="name",
                                 fix=f"use a non-empty name other than '.' and '..', without "
                                     f"{_forbidden_text()}")
    config = dict(getattr(topology, "_topo_config", {}))
    topology_config = _check_topology_config(config)
    by_name: dict[str, HeronComponentSpec] = {}
    for spec in specs:
        by_name[_check_name(spec, by_name)] = spec
    if not any(s.is_spout for s in specs):  # Heron refuses it too
        msg = "a topology needs at least one spout"
        raise TopologyValueError(msg, value=topo_name,
                                 kind="no_spout", fix="add a Spout.spec(...) to the topology")
    components: dict[str, ComponentDecl] = {}
    for spec in sorted(specs, key=lambda s: not s.is_spout):  # spouts first, then bolts
        decl = _component(spec, config)
        components[decl.name] = decl
    for decl in components.values():
        for sub in decl.inputs:
            _check_input(decl.name, sub, components)
    _check_acyclic(components)
    _check_stmgrs(topology_config, components)
    plan = LogicalPlan(topo_name, components, config, topology_config, _source_path(topology))
    _check_picklable(plan)
    return plan


def _source_path(topology: type) -> str:
    """Return the absolute path of the file defining ``topology`` ("" if unknown).

    heron_spark ships the topology's code by value, so this plays the part of Heron's pex path
    (``context.get_topology_pex_path()``): the user's file the first non-heron_spark class of
    the topology came from (for a builder: the file that created the builder), else the
    ``__main__`` script.
    """
    recorded = getattr(topology, "_source_file", None)
    if recorded:
        return os.path.abspath(recorded)
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


def _check_topology_config(config: dict) -> TopologyConfig:
    """Read ``config`` once (unknown reliability mode, bad timeouts, ...: TopologyValueError)."""
    # Heron refuses an unknown mode too (TopologyReliabilityMode.valueOf); ours: every key the
    # runtime acts on is checked here, on the driver, not when a task first reads it.
    return TopologyConfig.from_config(config)


def _usable_name(name: object) -> TypeGuard[str]:
    return isinstance(name, str) and bool(name) and not _FORBIDDEN_CHARS.intersection(name)


def _forbidden_text() -> str:
    return " ".join(repr(c) for c in sorted(_FORBIDDEN_CHARS))


def _check_name(spec: HeronComponentSpec, seen: dict) -> str:
    """Return ``spec``'s name once it is usable, not reserved and not in ``seen``."""
    # Names starting "__" are legal, as in Heron (its tests name a bolt
    # "__integration_test_aggregator_bolt"); see _FORBIDDEN_CHARS for the characters refused.
    if not _usable_name(spec.name):
        msg = "invalid component name"
        raise TopologyValueError(msg, component=str(spec.name),
                                 value=spec.name, kind="name",
                                 fix=f"use a non-empty name without {_forbidden_text()}")
    if spec.name == SYSTEM_COMPONENT:
        # Heron does not check, but "__system" is the source of tick tuples: a bolt could not
        # tell this component's tuples from ticks (tup.component == "__system").
        msg = f"{SYSTEM_COMPONENT!r} is the system component (tick tuples come from it)"
        raise TopologyValueError(msg, component=spec.name, value=spec.name,
                                 kind="reserved_name", fix="rename the component")
    if spec.name in seen:  # Heron refuses it too
        msg = "two components share this name"
        raise TopologyValueError(msg, component=spec.name,
                                 kind="duplicate_name", fix="give each component a unique name")
    return spec.name


def _component_class(name: str, spec: HeronComponentSpec) -> tuple[type | None, type | None]:
    """Return (the class to check here, the class the plan carries) of ``spec``.

    A class given as such is both. A class path is checked when it imports on the driver
    (else the tasks' side checks it: Spark's preflight, the in-process runner); the plan
    carries only the path, which the tasks import, unless it names the driver's ``__main__``
    (a script's class travels by value, as a class given as such does).
    """
    given = spec.component_class
    if given is not None:
        return given, given
    found = class_here(name, spec.python_class_path)
    if found is not None and spec.python_class_path.split(".")[0] == "__main__":
        return found, found
    return found, None


def _check_class(name: str, cls: object, is_spout: bool) -> None:
    base = Spout if is_spout else Bolt
    # heronpy's spec() is a Spout/Bolt classmethod; only a hand-made spec can miss this.
    if not (isinstance(cls, type) and issubclass(cls, base)):
        msg = f"class must subclass {base.__name__}"
        raise TopologyValueError(msg, component=name,
                                 value=cls, kind="class", fix=f"derive it from {base.__name__}")
    # Heron accepts it, then raises NotImplementedError in every task: we say so up front.
    required = "next_tuple" if is_spout else "process"
    if getattr(cls, required) is getattr(base, required):
        msg = f"{cls.__name__} does not implement {required}()"
        raise TopologyValueError(msg, component=name, kind="class", fix=f"define {required}(self, ...)")


def _component(spec: HeronComponentSpec, topo_config: dict) -> ComponentDecl:
    name = spec.name
    assert name is not None  # build_logical_plan ran _check_name on every spec
    par = spec.parallelism
    # Heron asserts an int > 0; a bool slips past its assert but then fails in its packer.
    if not isinstance(par, int) or isinstance(par, bool) or par < 1:
        msg = "parallelism must be an integer >= 1"
        raise TopologyValueError(msg, component=name, value=par, kind="parallelism", fix="pass par=1 or more")
    checked, carried = _component_class(name, spec)
    if checked is not None:
        _check_class(name, checked, spec.is_spout)
    outputs = _outputs(name, spec.outputs)
    inputs = _inputs(name, spec)
    # heronpy's Spout.spec() takes no inputs; ours would silently ignore them.
    if spec.is_spout and inputs:
        msg = "a spout cannot have inputs"
        raise TopologyValueError(msg, component=name, kind="inputs", fix="make it a Bolt, or drop inputs=")
    if not spec.is_spout and not inputs:  # Heron refuses it too
        msg = "a bolt needs at least one input"
        raise TopologyValueError(msg, component=name,
                                 kind="inputs", fix="pass inputs={upstream_spec: Grouping...}")
    config = {**topo_config, **(spec.custom_config or {}),
              keys.TOPOLOGY_COMPONENT_PARALLELISM: par}
    settings = TopologyConfig.from_config(config, name)
    if checked is not None and issubclass(checked, (Spout, Bolt)):  # (_check_class ran)
        checked._check_in_topology(name, config, settings)
    field = (spec.custom_config or {}).get(keys.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME)
    if spec.is_spout and field is not None and \
            not any(field in stream.fields for stream in outputs.values()):
        msg = (f"{keys.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME} names a field no output "
               f"stream of the spout declares")
        raise TopologyValueError(msg, component=name, value=field, kind="config",
                                 fix=f"name one of its fields "
                                     f"{sorted({f for s in outputs.values() for f in s.fields})}")
    return ComponentDecl(name, spec.python_class_path, spec.is_spout, par, outputs, inputs,
                         config, settings, carried)


def _outputs(component: str, declared) -> dict[str, StreamDecl]:
    streams: dict[str, list[str]] = {}
    direct: dict[str, bool] = {}
    for out in declared or []:
        if isinstance(out, str):
            streams.setdefault(Stream.DEFAULT_STREAM_ID, []).append(out)
        elif isinstance(out, Stream):
            if out.stream_id == TICK_STREAM:
                # Heron does not check, but Bolt.is_tick() would take these tuples for ticks.
                msg = f"{TICK_STREAM!r} is the tick tuples' stream"
                raise TopologyValueError(msg,
                                         component=component, value=out.stream_id,
                                         kind="reserved_name", fix="rename the stream")
            if out.stream_id == Stream.DEFAULT_STREAM_ID:
                streams.setdefault(out.stream_id, []).extend(out.fields)
                direct[out.stream_id] = direct.get(out.stream_id, False) or out.direct
            else:  # declared again: the last declaration wins, as in Heron
                streams[out.stream_id] = list(out.fields)
                direct[out.stream_id] = out.direct
        else:  # Heron refuses it too
            msg = "outputs must be field names or Stream objects"
            raise TopologyValueError(msg,
                                     component=component, value=out, kind="stream",
                                     fix="use outputs = ['field', Stream([...], name=...)]")
    for stream, fields in streams.items():
        # Not refused by Heron; ours: field names are Arrow column names and tuple keys, and
        # fields grouping looks them up by name, so a repeated name would be ambiguous.
        if len(set(fields)) != len(fields):
            msg = f"stream {stream!r} repeats a field name"
            raise TopologyValueError(msg,
                                     component=component, value=fields, kind="fields",
                                     fix="give each field a unique name")
        # Ours only: "__hs_" columns carry acking and routing data in every tuple batch.
        bad = [f for f in fields if f.startswith(RESERVED_FIELD_PREFIX)]
        if bad:
            msg = f"field names starting {RESERVED_FIELD_PREFIX!r} are reserved"
            raise TopologyValueError(msg,
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
    else:  # Heron refuses it too
        msg = "inputs must be a dict {input: Grouping} or a list"
        raise TopologyValueError(msg,
                                 component=component, value=raw, kind="inputs",
                                 fix="pass inputs={upstream_spec: Grouping.SHUFFLE}")
    decls = []
    for key, grouping in pairs:
        if isinstance(key, HeronComponentSpec):
            # An unnamed spec (not in the topology) stays None: _check_input refuses it as an
            # unknown component, naming it as the user gave it.
            upstream, stream = cast(str, key.name), Stream.DEFAULT_STREAM_ID
        elif isinstance(key, GlobalStreamId):
            upstream, stream = key.component_id, key.stream_id
        elif isinstance(key, str):
            upstream, stream = key, Stream.DEFAULT_STREAM_ID
        else:  # Heron refuses it too (and takes no plain names)
            msg = "an input must be a spec, a GlobalStreamId or a name"
            raise TopologyValueError(msg,
                                     component=component, value=key, kind="inputs",
                                     fix="use the spec returned by add_spout/add_bolt")
        if not Grouping.is_grouping_sane(grouping):  # Heron refuses it too
            msg = f"input {upstream}:{stream} has an unknown grouping"
            raise TopologyValueError(msg,
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
    if upstream is None:  # Heron refuses it too (verifyTopology: unknown input stream)
        msg = f"{where} names an unknown component"
        raise TopologyValueError(msg, component=component,
                                 value=sub.component, kind="unknown_component",
                                 fix=f"use one of {sorted(components)}")
    stream = upstream.outputs.get(sub.stream)
    if stream is None:  # Heron refuses it too (verifyTopology: unknown input stream)
        msg = f"{where}: {sub.component!r} declares no such stream"
        raise TopologyValueError(msg,
                                 component=component, value=sub.stream, kind="unknown_stream",
                                 fix=f"use one of {sorted(upstream.outputs)} or declare it in "
                                     f"{sub.component}'s outputs")
    missing = [f for f in sub.fields if f not in stream.fields]
    # Heron's stmgr skips unknown grouping fields (with none left, every tuple goes to one
    # task); we refuse: such a grouping cannot do what it says (silent skew). A judgment call.
    if missing:
        msg = f"{where}: fields grouping on undeclared field(s)"
        raise TopologyValueError(msg,
                                 component=component, value=missing, kind="unknown_field",
                                 fix=f"group on declared fields {list(stream.fields)}")
    is_direct = sub.grouping == GroupingType.DIRECT
    if is_direct != stream.direct:  # ours: direct streams are an extra (heronpy refuses them)
        msg = (
            f"{where}: grouping {grouping_name(sub.grouping)} does not fit a "
            f"{'direct' if stream.direct else 'non-direct'} stream"
        )
        raise TopologyValueError(
            msg, component=component,
            value=grouping_name(sub.grouping), kind="grouping",
            fix="subscribe to a direct stream (Stream(..., direct=True)) with Grouping.DIRECT, "
                "and to other streams with other groupings")


def _check_acyclic(components: dict[str, ComponentDecl]) -> None:
    """Refuse cycles.

    Heron does not; ours: a task ends once every upstream task has ended (end of input,
    draining), which never happens on a cycle.
    """
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for up in {i.component for i in components[name].inputs}:
            if state.get(up) == 1:
                cycle = path[path.index(up):] + [up] if up in path else [up, name]
                msg = "the topology has a cycle"
                raise TopologyValueError(msg, component=name,
                                         value=" -> ".join(reversed(cycle)), kind="cycle",
                                         fix="remove one of the inputs on the cycle")
            if state.get(up) is None:
                visit(up, path + [up])
        state[name] = 2

    for name in components:
        if state.get(name) is None:
            visit(name, [name])


def _check_stmgrs(topology_config: TopologyConfig, components: dict[str, ComponentDecl]) -> None:
    check_max_parallelism(topology_config, components)
    count = topology_config.stmgrs  # >= 1: TopologyConfig checked it
    total = sum(c.parallelism for c in components.values())
    if count > total:  # Heron's packing refuses more containers than instances too
        msg = f"{keys.TOPOLOGY_STMGRS} exceeds the number of instances"
        raise TopologyValueError(msg,
                                 value=count, kind="config",
                                 fix=f"use at most {total} containers (one per instance)")


def check_max_parallelism(topology_config: TopologyConfig,
                          components: dict[str, ComponentDecl]) -> None:
    """Refuse a component with more tasks than the topology has key groups.

    Its tasks past ``topology.max.parallelism`` would own no key group (no fields-grouped
    tuple, no keyed state).
    """
    limit = topology_config.max_parallelism
    for decl in components.values():
        if decl.parallelism > limit:
            msg = f"parallelism {decl.parallelism} exceeds {keys.TOPOLOGY_MAX_PARALLELISM} {limit}"
            raise TopologyValueError(msg, component=decl.name, value=decl.parallelism,
                                     kind="parallelism",
                                     fix=f"set {keys.TOPOLOGY_MAX_PARALLELISM} to "
                                         f"{decl.parallelism} or more in the topology config "
                                         f"(once, at first submit: it is fixed for the "
                                         f"topology's life), or use a parallelism <= {limit}")


def _check_picklable(plan: LogicalPlan) -> None:
    """Refuse what cannot be pickled.

    The plan reaches the containers pickled (ours; Heron serializes config values the same way
    and fails on them too).
    """
    from heron_spark import _pickling

    for decl in plan.components.values():
        for what, obj in (("class", decl.given_class), ("config", decl.config)):
            try:
                _pickling.dumps(obj)
            except Exception as exc:  # noqa: BLE001 - any pickling failure is the user's to fix
                msg = f"its {what} cannot be pickled ({exc})"
                raise TopologyValueError(msg,
                                         component=decl.name, value=obj, kind="pickle",
                                         fix="keep sockets, locks and open files out of the "
                                             "class body and config; open them in initialize()"
                                         ) from exc
