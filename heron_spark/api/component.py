"""Component specs (what ``Spout.spec`` / ``Bolt.spec`` return) and the component base class."""

from __future__ import annotations

import uuid
from typing import Any

from heron_spark.api.stream import Grouping, Stream
from heron_spark.errors import ComponentSpecError, TopologyTypeError, TopologyValueError


class HeronComponentSpec:
    """Where a component sits in a topology: class, parallelism, inputs, outputs, config.

    heronpy's class, with its signature and attributes (``name``, ``python_class_path``,
    ``is_spout``, ``parallelism``, ``inputs``, ``outputs``, ``custom_config``, ``uuid``).
    ``python_class_path`` may be given as the class's dotted path
    (``"my_pkg.spouts.WordSpout"``, as heronpy takes it) or, as ``Spout.spec()`` passes it,
    the class itself; then ``component_class`` is that class (else None) and
    ``python_class_path`` its path. As in heronpy, any str is accepted here (programs and
    tests build specs with placeholder paths); a path is checked at submit, before anything
    is launched (on the driver when it imports there, else where the tasks run), and imported
    where the tasks run. ``name`` may be None until the ``Topology`` class body
    assigns the attribute name. Inputs, outputs and config are checked when the topology is
    defined (``TopologyType``), as in heronpy. ``optional_outputs`` (ours; heronpy's spec()
    takes it) are appended to ``outputs``.
    """

    def __init__(self, name: str | None, python_class_path: str | type, is_spout: bool, par: int,
                 inputs=None, outputs=None, config: dict | None = None,
                 optional_outputs=None) -> None:
        self._sanitize_args(name, python_class_path, is_spout, par)
        self.name = name
        if isinstance(python_class_path, type):
            self.component_class: type | None = python_class_path
            self.python_class_path = (f"{python_class_path.__module__}."
                                      f"{python_class_path.__qualname__}")
        else:
            self.component_class = None
            self.python_class_path = python_class_path.strip()
        self.is_spout = is_spout
        self.parallelism = par
        self.inputs = inputs
        if optional_outputs is not None:
            self._check_optional_outputs(name, optional_outputs)
            if outputs is None or isinstance(outputs, (list, tuple)):
                outputs = [*(outputs or []), *optional_outputs]
        self.outputs = outputs
        self.custom_config = config
        self.uuid = str(uuid.uuid4())  # tells specs apart before they have a name

    @staticmethod
    def _sanitize_args(name, python_class_path, is_spout, par) -> None:
        """Refuse what heronpy's asserts refuse (``ComponentSpecError``, an ``AssertionError``)."""
        component = name if isinstance(name, str) else None
        if name is not None and not isinstance(name, str):
            msg = "a component name must be a str (or None inside a Topology class)"
            raise ComponentSpecError(msg, value=name, kind="name", fix="pass name='my-component'")
        if not isinstance(python_class_path, (str, type)):
            msg = "python_class_path must be a class path (str) or a class"
            raise ComponentSpecError(msg, component=component, value=python_class_path,
                                     kind="class", fix="pass 'my_pkg.spouts.WordSpout'")
        if not isinstance(is_spout, bool):
            msg = "is_spout must be True or False"
            raise ComponentSpecError(msg, component=component, value=is_spout,
                                     kind="is_spout", fix="pass is_spout=True for a spout")
        # As heronpy's assert: an int > 0 (True passes here; the planner refuses it).
        if not isinstance(par, int) or par <= 0:
            msg = "parallelism must be an integer >= 1"
            raise ComponentSpecError(msg, component=component, value=par,
                                     kind="parallelism", fix="pass par=1 or more")

    @staticmethod
    def _check_optional_outputs(name, optional_outputs) -> None:
        """Refuse what heronpy's ``spec()`` asserts: a list or tuple of str or ``Stream``."""
        if not isinstance(optional_outputs, (list, tuple)) or not all(
                isinstance(out, (str, Stream)) for out in optional_outputs):
            msg = "optional_outputs must be a list of str field names or Streams"
            raise ComponentSpecError(msg, component=name if isinstance(name, str) else None,
                                     value=optional_outputs, kind="outputs",
                                     fix="pass optional_outputs=['field', Stream([...], name=...)]")

    @staticmethod
    def _sanitize_config(custom_config, component: str | None = None) -> dict:
        """Check a component's config; return it as heronpy does (values as str, else as is).

        Raise ``TopologyTypeError`` (a ``TypeError``, as heronpy) when it is no dict or has a
        non-str key. Booleans become ``"true"``/``"false"``, numbers ``str()``; the runtime
        keeps the typed values, this is the view heronpy's protobuf has.
        """
        if not isinstance(custom_config, dict):
            msg = "component-specific configuration must be given as a dict"
            raise TopologyTypeError(msg, component=component, value=custom_config,
                                    fix="pass config={'key': value}")
        sanitized: dict = {}
        for key, value in custom_config.items():
            if not isinstance(key, str):
                msg = "key for component-specific configuration must be a str"
                raise TopologyTypeError(msg, component=component, value=key,
                                        fix="use str keys such as 'my.key'")
            if isinstance(value, bool):
                sanitized[key] = "true" if value else "false"
            elif isinstance(value, (str, int, float)):
                sanitized[key] = str(value)
            else:
                sanitized[key] = value
        return sanitized

    def _sanitize_inputs(self) -> dict | None:
        """Return the inputs as ``{GlobalStreamId: grouping}`` (None without inputs).

        As heronpy: a dict of ``{spec or GlobalStreamId: Grouping}`` or a list of specs or
        ``GlobalStreamId`` (shuffle grouping); a bad grouping or key is a
        ``TopologyValueError``, inputs of another type a ``TopologyTypeError``. Ours: a
        component name (str) also names its default stream, and ``Grouping.DIRECT`` is
        accepted (heronpy has no direct streams). An unnamed spec is kept by identity: the
        planner refuses it as an unknown component.
        """
        if self.inputs is None:
            return None
        if isinstance(self.inputs, dict):
            pairs = list(self.inputs.items())
        elif isinstance(self.inputs, (list, tuple)):
            pairs = [(item, Grouping.SHUFFLE) for item in self.inputs]
        else:
            msg = "inputs must be a list, dict, or None"
            raise TopologyTypeError(msg, component=self.name, value=self.inputs,
                                    fix="pass inputs={upstream_spec: Grouping.SHUFFLE}")
        sanitized: dict = {}
        for key, grouping in pairs:
            if not Grouping.is_grouping_sane(grouping):
                msg = "a given grouping is not supported"
                raise TopologyValueError(msg, component=self.name, value=grouping,
                                         kind="grouping",
                                         fix="use a Grouping (SHUFFLE, fields(...), ALL, ...)")
            if isinstance(key, HeronComponentSpec):
                key = GlobalStreamId(key, Stream.DEFAULT_STREAM_ID)
            elif isinstance(key, str):
                key = GlobalStreamId(key, Stream.DEFAULT_STREAM_ID)
            elif not isinstance(key, GlobalStreamId):
                msg = "an input must be a spec, a GlobalStreamId or a component name"
                raise TopologyValueError(msg, component=self.name, value=key, kind="inputs",
                                         fix="use the spec returned by add_spout/add_bolt, "
                                             "or spec['stream']")
            sanitized[key] = grouping
        return sanitized

    def _sanitize_outputs(self) -> dict | None:
        """Return the outputs as ``{stream id: [field, ...]}`` (None without outputs).

        As heronpy: a list or tuple of field names (the default stream) and ``Stream``
        objects; default-stream fields add up, another stream declared again is replaced.
        Anything else is a ``TopologyTypeError`` (heronpy: ``TypeError``).
        """
        if self.outputs is None:
            return None
        streams: dict[str, list[str]] = {}
        for output in self._output_items():
            if isinstance(output, str):
                streams.setdefault(Stream.DEFAULT_STREAM_ID, []).append(output)
            elif output.stream_id == Stream.DEFAULT_STREAM_ID:
                streams.setdefault(output.stream_id, []).extend(output.fields)
            else:
                streams[output.stream_id] = list(output.fields)
        return streams

    def _output_items(self) -> list:
        if not isinstance(self.outputs, (list, tuple)):
            msg = "outputs must be a list or tuple"
            raise TopologyTypeError(msg, component=self.name, value=self.outputs,
                                    fix="use outputs = ['field', Stream([...], name=...)]")
        for output in self.outputs:
            if not isinstance(output, (str, Stream)):
                msg = "outputs must be a list of str field names or Streams"
                raise TopologyTypeError(msg, component=self.name, value=output,
                                        fix="use outputs = ['field', Stream([...], name=...)]")
        return list(self.outputs)

    def get_out_streamids(self) -> set[str]:
        """Return the ids of the streams this component declares (heronpy's checks)."""
        if self.outputs is None:
            return set()
        return {Stream.DEFAULT_STREAM_ID if isinstance(o, str) else o.stream_id
                for o in self._output_items()}

    def __getitem__(self, stream_id: str) -> "GlobalStreamId":
        """Return the ``GlobalStreamId`` of this component's declared stream ``stream_id``.

        Raise ``TopologyValueError`` (heronpy: ``ValueError``) for a stream it does not declare.
        """
        if stream_id not in self.get_out_streamids():
            msg = "a given stream id does not exist on this component"
            raise TopologyValueError(msg, component=self.name, value=stream_id,
                                     kind="unknown_stream",
                                     fix=f"use one of {sorted(self.get_out_streamids())} or "
                                         f"declare it in the component's outputs")
        return GlobalStreamId(componentId=self.name or self, streamId=stream_id)

    def __repr__(self) -> str:
        return (f"HeronComponentSpec(name={self.name!r}, class={self.python_class_path}, "
                f"par={self.parallelism!r})")


class GlobalStreamId:
    """A (component, stream) pair: the key of a bolt's ``inputs`` for a non-default stream.

    ``componentId`` is a component name or its spec (whose name the ``Topology`` class gives
    it later); ``component_id`` resolves it. Two ids are equal when their component ids and
    stream ids are, so an id made from a spec equals one made from its name once it has one.
    """

    def __init__(self, componentId, streamId: str) -> None:  # noqa: N803 (heronpy's names)
        if not isinstance(componentId, (str, HeronComponentSpec)):  # Heron refuses it too
            msg = "GlobalStreamId: componentId must be either a str or a HeronComponentSpec"
            raise TopologyTypeError(msg, value=componentId, fix="use spec['stream'] on the upstream spec")
        if not isinstance(streamId, str):  # Heron refuses it too
            msg = "GlobalStreamId: streamId must be a str"
            raise TopologyTypeError(msg, value=streamId, fix="use spec['stream'] on the upstream spec")
        self._component_id = componentId
        self.stream_id = streamId

    @property
    def component_id(self) -> str:
        """The upstream component's name.

        While its spec has no name yet, a placeholder naming the spec's uuid (as heronpy's,
        so that ``==``, ``hash`` and ``str`` work before the ``Topology`` class names it).
        """
        if isinstance(self._component_id, HeronComponentSpec):
            if self._component_id.name is None:
                return f"<No name available for HeronComponentSpec yet, uuid: {self._component_id.uuid}>"
            return self._component_id.name
        if isinstance(self._component_id, str):
            return self._component_id
        # Only if someone replaced _component_id; heronpy raises ValueError too.
        msg = "component id of this GlobalStreamId is not properly set"
        raise TopologyValueError(msg, value=self._component_id,
                                 fix="build it as GlobalStreamId(name_or_spec, stream)")

    def __eq__(self, other: object) -> bool:
        theirs: Any = other  # heronpy compares any object with these two attributes
        return (hasattr(theirs, "component_id") and hasattr(theirs, "stream_id")
                and self.component_id == theirs.component_id
                and self.stream_id == theirs.stream_id)

    def __hash__(self) -> int:
        return hash(str(self))

    def __str__(self) -> str:
        return f"{self.component_id}:{self.stream_id}"

    __repr__ = __str__


class BaseComponent:
    """What spouts and bolts share: the runtime delegate, logging and ``spec``.

    Instances are created by the runtime (``cls(delegate)``) inside a Heron Instance process;
    do initialisation in ``initialize``, not ``__init__``.
    """

    outputs: list = []
    _is_spout = False

    def __init__(self, delegate: Any) -> None:
        self.delegate = delegate
        self.logger = delegate.logger

    def initialize(self, config: dict, context: Any) -> None:
        """Prepare the task; ``config`` is the merged, auto-typed topology+component config."""

    def log(self, message: str, level: str | None = None) -> None:
        """Write ``message`` to this instance's log (trace, debug, info, warn or error)."""
        self.delegate.log(message, level)

    @classmethod
    def _check_in_topology(cls, name: str, config: dict, settings: Any) -> None:
        """Refuse a component config the topology's settings rule out (driver; no I/O).

        Called when a topology is validated (submit, the in-process runner) with ``config``,
        the component's config over the topology's, and ``settings``, their
        ``TopologyConfig``. Raise ``TopologyValueError`` naming the component, the value and
        the fix. Nothing is refused by default.
        """

    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, inputs=None, config: dict | None = None,
             optional_outputs=None) -> HeronComponentSpec:
        """Return this component's spec.

        heronpy's argument checks run here (``ComponentSpecError``), its config, input and
        output checks when the ``Topology`` class is defined, ours when it is submitted.
        """
        outputs = list(cls.outputs or [])  # a copy: the class's list stays as it is
        if optional_outputs is not None:
            HeronComponentSpec._check_optional_outputs(name, optional_outputs)
            outputs.extend(optional_outputs)
        if config is not None and not isinstance(config, dict):  # Heron refuses it too
            msg = "component config must be a dict"
            raise TopologyTypeError(msg, component=name, value=config, fix="pass config={'key': value}")
        return HeronComponentSpec(name, cls, cls._is_spout, par, inputs=inputs, outputs=outputs,
                                  config=config)


__all__ = ["BaseComponent", "GlobalStreamId", "Grouping", "HeronComponentSpec", "Stream"]
