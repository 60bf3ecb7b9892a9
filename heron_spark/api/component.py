"""Component specs (what ``Spout.spec`` / ``Bolt.spec`` return) and the component base class."""

from __future__ import annotations

import uuid
from typing import Any

from heron_spark.api.stream import Grouping, Stream
from heron_spark.errors import TopologyTypeError


class HeronComponentSpec:
    """Where a component sits in a topology: class, parallelism, inputs, outputs, config.

    ``name`` may be None until the ``Topology`` class body assigns the attribute name.
    """

    def __init__(self, name: str | None, component_class: type, is_spout: bool, par: int,
                 inputs=None, outputs=None, config: dict | None = None) -> None:
        self.name = name
        self.component_class = component_class
        self.python_class_path = f"{component_class.__module__}.{component_class.__qualname__}"
        self.is_spout = is_spout
        self.parallelism = par
        self.inputs = inputs
        self.outputs = outputs
        self.custom_config = config
        self.uuid = str(uuid.uuid4())

    def get_out_streamids(self) -> set[str]:
        """Return the ids of the streams this component declares."""
        return {Stream.DEFAULT_STREAM_ID if isinstance(o, str) else o.stream_id
                for o in (self.outputs or [])}

    def __getitem__(self, stream_id: str) -> "GlobalStreamId":
        """Return the ``GlobalStreamId`` of this component's stream ``stream_id``."""
        return GlobalStreamId(self.name or self, stream_id)

    def __repr__(self) -> str:
        return (f"HeronComponentSpec(name={self.name!r}, class={self.python_class_path}, "
                f"par={self.parallelism!r})")


class GlobalStreamId:
    """A (component, stream) pair: the key of a bolt's ``inputs`` for a non-default stream."""

    def __init__(self, componentId, streamId: str) -> None:  # noqa: N803 (heronpy's names)
        if not isinstance(componentId, (str, HeronComponentSpec)):  # Heron refuses it too
            msg = "GlobalStreamId: componentId must be a str or a spec"
            raise TopologyTypeError(msg, value=componentId, fix="use spec['stream'] on the upstream spec")
        if not isinstance(streamId, str):  # Heron refuses it too
            msg = "GlobalStreamId: streamId must be a str"
            raise TopologyTypeError(msg, value=streamId, fix="use spec['stream'] on the upstream spec")
        self._component_id = componentId
        self.stream_id = streamId

    @property
    def component_id(self) -> str:
        """The upstream component's name (a placeholder while its spec has no name yet)."""
        if isinstance(self._component_id, HeronComponentSpec):
            return self._component_id.name or f"<unnamed spec {self._component_id.uuid}>"
        return self._component_id

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, GlobalStreamId) and self.component_id == other.component_id
                and self.stream_id == other.stream_id)

    def __hash__(self) -> int:
        return hash((self.component_id, self.stream_id))

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
    def spec(cls, name: str | None = None, par: int = 1, inputs=None, config: dict | None = None,
             optional_outputs=None) -> HeronComponentSpec:
        """Return this component's spec; validation happens when the topology is submitted."""
        outputs = list(cls.outputs or [])
        if optional_outputs:
            outputs.extend(optional_outputs)
        if config is not None and not isinstance(config, dict):  # Heron refuses it too
            msg = "component config must be a dict"
            raise TopologyTypeError(msg, component=name, value=config, fix="pass config={'key': value}")
        return HeronComponentSpec(name, cls, cls._is_spout, par, inputs=inputs, outputs=outputs,
                                  config=config)


__all__ = ["BaseComponent", "GlobalStreamId", "Grouping", "HeronComponentSpec", "Stream"]
