"""Topologies, declared as a ``Topology`` subclass or built with ``TopologyBuilder``.

Both produce the same thing: a ``Topology`` subclass whose ``_heron_specs`` and ``_topo_config``
the planner reads. Nothing here launches anything until ``submit`` (or ``build_and_submit``)
hands the topology to ``heron_spark.scheduler.submit``.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from heron_spark.api.component import HeronComponentSpec
from heron_spark.api.topology_config import default_topology_config
from heron_spark.errors import TopologyTypeError, TopologyValueError


class TopologyType(type):
    """Metaclass that collects the ``HeronComponentSpec`` attributes of a topology class."""

    DEFAULT_TOPOLOGY_CONFIG = default_topology_config()  # TopologyConfig's defaults

    def __new__(mcs, classname, bases, class_dict):
        """Collect the class's component specs and config, checking names and keys."""
        specs: dict[str, HeronComponentSpec] = {}
        for attr, spec in list(class_dict.items()):
            if isinstance(spec, HeronComponentSpec):
                if spec.name is None:
                    spec.name = attr
                if spec.name in specs:  # Heron refuses it too
                    msg = "two components share this name"
                    raise TopologyValueError(msg,
                                             component=spec.name, kind="duplicate_name",
                                             fix="give each spec a unique name")
                specs[spec.name] = spec
        config = dict(mcs.DEFAULT_TOPOLOGY_CONFIG)
        custom = class_dict.get("config")
        if isinstance(custom, dict):
            for key in custom:
                if not isinstance(key, str):  # Heron refuses it too
                    msg = "topology config keys must be str"
                    raise TopologyTypeError(msg, value=key, fix="use str keys such as 'topology.debug'")
            config.update(custom)
        if classname != "Topology":
            _check_class_keys(config, None)
            for spec in specs.values():
                _sanitize_spec(spec)
                if spec.custom_config:
                    _check_class_keys({**config, **spec.custom_config}, spec.name)
            class_dict["_heron_specs"] = list(specs.values())
            class_dict["_topo_config"] = config
            class_dict.setdefault("topology_name", classname)
        return super().__new__(mcs, classname, bases, class_dict)


def _sanitize_spec(spec: HeronComponentSpec) -> None:
    """Check a spec's config, outputs and inputs as heronpy's metaclass does.

    heronpy checks them while building the protobuf topology: a config with a non-str key, an
    output that is no field name or ``Stream`` and inputs of another type are ``TypeError``s
    (ours: ``TopologyTypeError``), a bad grouping or input key a ``ValueError``
    (``TopologyValueError``).
    """
    if spec.custom_config is not None:
        HeronComponentSpec._sanitize_config(spec.custom_config, spec.name)
    spec._sanitize_outputs()
    spec._sanitize_inputs()


def _check_class_keys(config: dict, component: str | None) -> None:
    """Load the classes the config names now, on the driver.

    Load the classes the config names (serializer, auto task hooks) now, on the driver: a bad
    name is a ``ConfigError`` before anything is launched.
    """
    from heron_spark.api.serializer import serializer_class
    from heron_spark.api.task_hook import auto_hook_classes

    serializer_class(config, component)
    auto_hook_classes(config, component)


class Topology(metaclass=TopologyType):
    """Subclass this and assign ``Spout.spec(...)`` / ``Bolt.spec(...)`` as class attributes.

    A ``config`` class attribute (dict) sets topology-wide configuration; component ``config``
    given to ``spec`` overrides it for that component.
    """

    @classmethod
    def submit(cls, spark=None, conf: dict | None = None, name: str | None = None):
        """Submit this topology to Spark and return its handle (driver only).

        The user API's one call into the runtime, imported here, where it runs (import-linter
        lists it by name in ``pyproject.toml``).
        """
        from heron_spark.scheduler.submit import submit

        return submit(cls, spark=spark, conf=conf, name=name)


def _caller_file() -> str | None:
    """Return the file of the nearest caller outside heron_spark (None if there is none)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.split(".")[0] not in ("heron_spark", "heronpy"):
            return frame.f_globals.get("__file__")
        frame = frame.f_back
    return None


class TopologyBuilder:
    """Build a topology step by step (heronpy's builder)."""

    def __init__(self, name: str) -> None:
        # Heron refuses these too (its builder asserts; its submitter needs a non-empty name).
        if not isinstance(name, str) or not name or name == "Topology":
            msg = "a topology needs a name"
            raise TopologyValueError(msg, value=name, fix="pass a non-empty name other than 'Topology'")
        self.topology_name = name
        self._specs: dict[str, HeronComponentSpec] = {}
        self._topology_config: dict = {}
        self._source_file = _caller_file()

    def add_spec(self, *specs: HeronComponentSpec) -> None:
        """Add already built specs. Every refusal below is one heronpy's builder makes too."""
        for spec in specs:
            if not isinstance(spec, HeronComponentSpec):
                msg = "add_spec takes HeronComponentSpec objects"
                raise TopologyTypeError(msg, value=spec, fix="pass what Spout.spec()/Bolt.spec() return")
            if spec.name is None:
                msg = "a spec added to a builder needs a name"
                raise TopologyValueError(msg, fix="pass name= to spec()")
            if spec.name == "config":
                msg = "'config' is a reserved name"
                raise TopologyValueError(msg, component=spec.name,
                                         kind="duplicate_name", fix="rename the component")
            if spec.name in self._specs:
                msg = "two components share this name"
                raise TopologyValueError(msg, component=spec.name,
                                         kind="duplicate_name",
                                         fix="give each component a unique name")
            self._specs[spec.name] = spec

    def add_spout(self, name: str, spout_cls, par: int, config: dict | None = None,
                  optional_outputs=None) -> HeronComponentSpec:
        """Add a spout with ``par`` tasks; returns its spec (use it as a bolt input).

        ``spout_cls`` is the class or (ours) its dotted path, see ``_path_spec``.
        """
        if isinstance(spout_cls, str):
            spec = _path_spec(name, spout_cls, True, par, None, config, optional_outputs)
        else:
            spec = spout_cls.spec(name=name, par=par, config=config,
                                  optional_outputs=optional_outputs)
        self.add_spec(spec)
        return spec

    def add_bolt(self, name: str, bolt_cls, par: int, inputs, config: dict | None = None,
                 optional_outputs=None) -> HeronComponentSpec:
        """Add a bolt with ``par`` tasks reading ``inputs`` ({spec or GlobalStreamId: Grouping}).

        ``bolt_cls`` is the class or (ours) its dotted path, see ``_path_spec``.
        """
        if isinstance(bolt_cls, str):
            spec = _path_spec(name, bolt_cls, False, par, inputs, config, optional_outputs)
        else:
            spec = bolt_cls.spec(name=name, par=par, inputs=inputs, config=config,
                                 optional_outputs=optional_outputs)
        self.add_spec(spec)
        return spec

    def set_config(self, config: dict) -> None:
        """Set topology-wide configuration."""
        if not isinstance(config, dict):  # Heron refuses it too
            msg = "set_config takes a dict"
            raise TopologyTypeError(msg, value=config, fix="pass {'key': value}")
        self._topology_config = config

    def build(self) -> type:
        """Return the topology as a ``Topology`` subclass."""
        class_dict: dict[str, Any] = dict(self._specs)
        class_dict["config"] = self._topology_config
        class_dict["topology_name"] = self.topology_name
        if self._source_file:
            class_dict["_source_file"] = self._source_file  # context.get_topology_pex_path()
        return TopologyType(self.topology_name, (Topology,), class_dict)

    def build_and_submit(self):
        """Build, submit and (under ``heron-spark submit``) hand over to the CLI (driver only).

        Calls into the runtime as ``Topology.submit`` does (listed in ``pyproject.toml``).
        """
        from heron_spark.scheduler.submit import submit_from_builder

        return submit_from_builder(self.build())


def _path_spec(name: str, path: str, is_spout: bool, par: int, inputs, config: dict | None,
               optional_outputs) -> HeronComponentSpec:
    """Return the spec of a component given by its class path (heronpy's builder takes classes).

    When the path imports here, the class's own ``spec()`` builds it (its ``outputs``, and
    whatever its ``spec`` adds); the spec keeps the path, which the tasks import. Otherwise
    (it imports only where the tasks run, or it is a placeholder) the component's outputs are
    ``optional_outputs``; a path that names no component is refused at submit, as for a
    ``HeronComponentSpec`` built by hand.
    """
    from heron_spark.api._loading import class_here

    HeronComponentSpec._sanitize_args(name, path, is_spout, par)
    try:
        found = class_here(name, path.strip())
    except TopologyValueError:  # refused at submit, where every spec's path is checked
        found = None
    if found is None or not hasattr(found, "spec"):
        return HeronComponentSpec(name, path, is_spout, par, inputs=inputs, outputs=[],
                                  config=config, optional_outputs=optional_outputs)
    if is_spout:
        spec = found.spec(name=name, par=par, config=config, optional_outputs=optional_outputs)
    else:
        spec = found.spec(name=name, par=par, inputs=inputs, config=config,
                          optional_outputs=optional_outputs)
    spec.component_class, spec.python_class_path = None, path.strip()
    return spec
