"""Serializers of tuple values (heronpy's ``heronpy.api.serializer``).

Tuples travel as Arrow record batches: a column whose values are all ``str``, ``int``,
``float``, ``bool`` or ``bytes`` (or None) is native Arrow and never serialized. Any other
column (dicts, lists, mixed types, user objects) is a binary column of serialized values,
written by the topology's serializer: ``topology.serializer.classname`` names an
``IHeronSerializer`` class (its dotted path, or the class itself), instantiated once per task and
``initialize``-d with the task's config. Without that key values are pickled
(``PythonSerializer``, the default). Receivers find the serializer in the column's metadata.

Where it runs: every instance, on its loop thread (``serialize`` when a batch leaves,
``deserialize`` when one arrives, including the emitter's own fields-grouping hash).
"""

from __future__ import annotations

import pickle
from abc import ABC, abstractmethod
from typing import Any

from heron_spark.api import api_constants
from heron_spark.api._loading import load_class
from heron_spark.errors import ConfigError


class IHeronSerializer(ABC):
    """Turns one tuple value into bytes and back."""

    @abstractmethod
    def initialize(self, config: dict | None) -> None:
        """Prepare the serializer; ``config`` is the task's (auto-typed) config."""

    @abstractmethod
    def serialize(self, obj: Any) -> bytes:
        """Return ``obj`` as bytes."""

    @abstractmethod
    def deserialize(self, input_str: bytes) -> Any:
        """Return the object ``serialize`` turned into ``input_str``."""


class PythonSerializer(IHeronSerializer):
    """Serialize with ``pickle``: the default.

    ``pickle`` at its highest protocol (classes travel by reference, so the receiving instance
    must be able to import them).
    """

    def initialize(self, config: dict | None = None) -> None:
        """Nothing to prepare."""

    def serialize(self, obj: Any) -> bytes:
        """Return ``obj`` pickled at the highest protocol."""
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    def deserialize(self, input_str: bytes) -> Any:
        """Return the object ``input_str`` pickles."""
        return pickle.loads(input_str)


default_serializer = PythonSerializer()


def serializer_class(config: dict, component: str | None = None) -> type | None:
    """Return the serializer class ``config`` names, or None for the default.

    Return the class ``topology.serializer.classname`` names in ``config``, or None for the
    default (unset, or ``PythonSerializer``). Raise ``ConfigError`` when it names no class with
    ``serialize`` and ``deserialize``.
    """
    key = api_constants.TOPOLOGY_SERIALIZER_CLASSNAME
    value = config.get(key)
    if value is None or value == "":
        return None
    cls = load_class(value, key, component)
    if cls is PythonSerializer:
        return None
    if not all(callable(getattr(cls, name, None)) for name in ("serialize", "deserialize")):
        raise ConfigError(key, value, "name a subclass of heronpy.api.serializer.IHeronSerializer "
                                      "(with serialize and deserialize)")
    return cls


def load_serializer(config: dict, component: str | None = None) -> IHeronSerializer | None:
    """Return the task's serializer, or None for the default (pickle).

    Return the task's serializer, instantiated and initialized with ``config``; None means the
    default (pickle), which the wire applies without a serializer object.
    """
    cls = serializer_class(config, component)
    if cls is None:
        return None
    serializer = cls()
    serializer.initialize(config)
    return serializer


def load_serializer_named(class_name: str) -> IHeronSerializer | None:
    """Return a serializer of class ``class_name`` (dotted path), initialized with only that key.

    How a receiver reads a column another task's serializer wrote: readers above the wire
    pass it to ``wire.tuple_batch.rows`` (the wire never imports the user API).
    """
    return load_serializer({api_constants.TOPOLOGY_SERIALIZER_CLASSNAME: class_name})


__all__ = ["IHeronSerializer", "PythonSerializer", "default_serializer"]
