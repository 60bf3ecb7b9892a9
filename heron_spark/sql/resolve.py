"""Find the folder a topology's stream is committed to, from the data source's options.

``path``: that folder, as given. Otherwise ``topology`` + ``component`` (+ ``stream``, default
``default``) name a stream; the stored topology (state manager ``heron.statemgr``, defaulting
as ``submit`` does: ``conf/heron_spark.yaml``, else ``SystemConfig``'s) says which component
writes it to Parquet: ``component`` itself when its component config has ``parquet.path`` (a
``ParquetSink``: then ``stream`` may only be ``default``), else the one ``ParquetSink``
subscribed to that component's stream and to nothing else.

``sink_path_in`` is the I/O-free core over a ``topology_pb2.Topology``; ``resolve_path`` adds
the state manager. Driver only.
"""

from __future__ import annotations

from typing import Mapping

from heron_spark.errors import DataSourceOptionError
from heron_spark.io.parquet_sink import PATH as PARQUET_PATH

PATH = "path"
TOPOLOGY = "topology"
COMPONENT = "component"
STREAM = "stream"
STATEMGR = "heron.statemgr"
DEFAULT_STREAM = "default"

_ADD_SINK = ("add one: builder.add_bolt('out', ParquetSink, inputs={stream: Grouping.SHUFFLE}, "
             "config={'parquet.path': FOLDER}), or read a folder with option('path', FOLDER)")


def _option(options: Mapping[str, str], key: str) -> str | None:
    value = options.get(key)
    return None if value is None or str(value) == "" else str(value)


def sink_path_in(topology, component: str, stream: str | None) -> str:
    """Return the ``parquet.path`` holding ``component``'s ``stream`` in ``topology`` (a proto).

    ``stream`` None means ``default``. Raise ``DataSourceOptionError`` naming the option when
    the component, the stream or a sink downstream of it is missing, or when two sinks qualify.
    """
    components = {comp.name: comp for comp in topology.components}
    comp = components.get(component)
    if comp is None:
        raise DataSourceOptionError(COMPONENT, component,
                                    f"topology {topology.name!r} has no such component",
                                    f"use one of {sorted(components)}")
    if PARQUET_PATH in comp.config:
        if stream not in (None, DEFAULT_STREAM):
            raise DataSourceOptionError(STREAM, stream, f"component {component!r} is a "
                                        f"ParquetSink: its rows are what it writes, not a "
                                        f"stream", "drop the stream option, or name the "
                                        "component that emits the stream")
        return str(comp.config[PARQUET_PATH])
    stream = stream or DEFAULT_STREAM
    declared = [out.stream for out in comp.outputs]
    if stream not in declared:
        raise DataSourceOptionError(STREAM, stream,
                                    f"component {component!r} of topology {topology.name!r} "
                                    f"declares no such stream",
                                    f"use one of {sorted(declared)}" if declared else
                                    "name a component that emits (or a ParquetSink itself)")
    sinks = [sub for sub in topology.components if PARQUET_PATH in sub.config
             and any(inp.component == component and inp.stream == stream for inp in sub.inputs)]
    if not sinks:
        raise DataSourceOptionError(COMPONENT, component,
                                    f"no ParquetSink of topology {topology.name!r} subscribes "
                                    f"to its stream {stream!r}", _ADD_SINK)
    paths = {str(sink.config[PARQUET_PATH]) for sink in sinks}
    if len(paths) > 1:
        names = sorted(sink.name for sink in sinks)
        raise DataSourceOptionError(COMPONENT, component,
                                    f"ParquetSinks {names} all subscribe to its stream "
                                    f"{stream!r}", "name one of them with option('component', "
                                    "NAME)")
    sink = sinks[0]
    others = sorted({(inp.component, inp.stream) for inp in sink.inputs}
                    - {(component, stream)})
    if others:
        raise DataSourceOptionError(COMPONENT, component,
                                    f"ParquetSink {sink.name!r} also writes the streams "
                                    f"{others}, so its rows are not only {stream!r}",
                                    f"read all of them with option('component', "
                                    f"{sink.name!r}), or give the stream a sink of its own")
    return paths.pop()


def statemgr_url(options: Mapping[str, str]) -> str:
    """Return the state manager URL: the ``heron.statemgr`` option, else what submit uses."""
    from heron_spark.config import build_system_config, read_conf_file

    given = _option(options, STATEMGR)
    return build_system_config(read_conf_file(), {STATEMGR: given} if given else {}).statemgr


def resolve_path(options: Mapping[str, str]) -> str:
    """Return the sink folder the options name (see the module docstring)."""
    path = _option(options, PATH)
    topology_name = _option(options, TOPOLOGY)
    component = _option(options, COMPONENT)
    if path is not None:
        if topology_name is not None:
            raise DataSourceOptionError(PATH, path, f"given together with topology "
                                        f"{topology_name!r}", "give one of the two")
        return path
    if topology_name is None:
        raise DataSourceOptionError(TOPOLOGY, None, "neither a topology nor a path is given",
                                    "add .option('topology', NAME).option('component', C), or "
                                    ".option('path', FOLDER)")
    if component is None:
        raise DataSourceOptionError(COMPONENT, None, f"topology {topology_name!r} is given "
                                    f"without a component", "add .option('component', C)")
    from heron_spark.statemgr import open_state_manager

    with open_state_manager(statemgr_url(options)) as statemgr:
        topology = stored_topology(statemgr, topology_name)
    return sink_path_in(topology, component, _option(options, STREAM))


def stored_topology(statemgr, name: str):
    """Return the topology proto ``statemgr`` stores as ``name``; else raise naming the option."""
    topology = statemgr.get_topology(name)
    if topology is None:
        raise DataSourceOptionError(TOPOLOGY, name,
                                    f"no such topology in state manager {statemgr.location} "
                                    f"(it holds {statemgr.topologies()})", "check the name with "
                                    "`heron-spark list`, or set option('heron.statemgr', URL) "
                                    "to the state manager it was submitted to")
    return topology
