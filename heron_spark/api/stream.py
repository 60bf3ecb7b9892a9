"""Output streams and input groupings, as heronpy declares them."""

from __future__ import annotations

import collections

from heron_spark.errors import TopologyTypeError, TopologyValueError
from heron_spark.proto.topology_pb2 import GroupingType

RESERVED_FIELD_PREFIX = "__hs_"


class Stream:
    """A declared output stream: its field names, its id and whether it is direct."""

    DEFAULT_STREAM_ID = "default"

    def __init__(self, fields=None, name: str = DEFAULT_STREAM_ID, direct: bool = False) -> None:
        if fields is None:
            fields = []
        elif not isinstance(fields, (list, tuple)):  # Heron refuses it too
            msg = "stream fields must be a list or tuple of str"
            raise TopologyTypeError(msg, value=fields, fix="pass fields=['word', 'count']")
        fields = list(fields)
        for field in fields:
            if not isinstance(field, str):  # Heron refuses it too
                msg = f"stream {name!r}: field names must be str"
                raise TopologyTypeError(msg, value=field, fix="name each field with a str")
        # As in heronpy: the name must be a str (any str, "" and "__"-prefixed ones included;
        # the planner refuses only "__tick", the tick tuples' stream).
        if not isinstance(name, str):
            msg = "stream name must be a str"
            raise TopologyTypeError(msg, value=name, fix="pass name='my-stream'")
        # heronpy refuses direct=True ("not supported yet"); heron_spark supports direct streams.
        if not isinstance(direct, bool):
            msg = f"stream {name!r}: 'direct' must be True or False"
            raise TopologyTypeError(msg, value=direct, fix="pass direct=True or direct=False")
        self.fields = fields
        self.stream_id = name
        self.direct = direct

    def __repr__(self) -> str:
        return f"Stream(fields={self.fields!r}, name={self.stream_id!r}, direct={self.direct})"


class Grouping:
    """How a bolt's input stream is partitioned over the bolt's tasks."""

    SHUFFLE = GroupingType.SHUFFLE
    ALL = GroupingType.ALL
    LOWEST = GroupingType.LOWEST
    NONE = GroupingType.NONE
    DIRECT = GroupingType.DIRECT
    # heronpy's type names (they show in reprs), not the attribute names mypy expects.
    FIELDS = collections.namedtuple("FieldGrouping", "gtype, fields")  # type: ignore[name-match]
    CUSTOM = collections.namedtuple("CustomGrouping", "gtype, python_serialized")  # type: ignore[name-match]

    # StreamParse / heronpy aliases
    GLOBAL = LOWEST
    LOCAL_OR_SHUFFLE = SHUFFLE

    @classmethod
    def is_grouping_sane(cls, gtype) -> bool:
        """Return True when ``gtype`` is one of the groupings above, well formed."""
        if isinstance(gtype, cls.FIELDS):
            return gtype.gtype == GroupingType.FIELDS and bool(gtype.fields)
        if isinstance(gtype, cls.CUSTOM):
            return gtype.gtype == GroupingType.CUSTOM and gtype.python_serialized is not None
        return gtype in (cls.SHUFFLE, cls.ALL, cls.LOWEST, cls.NONE, cls.DIRECT)

    @classmethod
    def fields(cls, *fields) -> "Grouping.FIELDS":
        """Send all tuples with equal values of ``fields`` to the same task."""
        names = list(fields[0] if len(fields) == 1 and isinstance(fields[0], (list, tuple))
                     else fields)
        if not names:  # Heron refuses it too
            msg = "fields grouping needs at least one field name"
            raise TopologyValueError(msg, fix="name the key fields: Grouping.fields('word')")
        for field in names:
            if not isinstance(field, str):  # Heron refuses it too
                msg = "fields grouping takes field names (str)"
                raise TopologyTypeError(msg, value=field, fix="Grouping.fields('word')")
        return cls.FIELDS(gtype=GroupingType.FIELDS, fields=names)

    @classmethod
    def custom(cls, customgrouper) -> "Grouping.CUSTOM":
        """Let an ``ICustomGrouping`` choose the target tasks of each tuple.

        ``customgrouper`` is an instance or, as heronpy also accepts, the dotted path of an
        ``ICustomGrouping`` class (``"my_pkg.groupings.ByHost"``), created here with no
        arguments (Heron creates it in each emitting task; we ship one pickled instance).
        """
        from heron_spark import _pickling
        from heron_spark.api.custom_grouping import ICustomGrouping

        if isinstance(customgrouper, str):
            customgrouper = _grouping_from_path(customgrouper)
        if not isinstance(customgrouper, ICustomGrouping):  # Heron refuses it too
            msg = "Grouping.custom() takes an ICustomGrouping instance or class path"
            raise TopologyTypeError(msg, value=customgrouper,
                                    fix="pass an instance of your ICustomGrouping subclass")
        return cls.custom_serialized(_pickling.dumps(customgrouper), is_java=False)

    @classmethod
    def custom_serialized(cls, serialized: bytes, is_java: bool = False) -> "Grouping.CUSTOM":
        """Use an already pickled ``ICustomGrouping``."""
        if not isinstance(serialized, bytes):  # Heron refuses it too
            msg = "custom_serialized() takes pickled bytes"
            raise TopologyTypeError(msg, value=serialized, fix="use Grouping.custom(grouping_instance)")
        if is_java:  # Heron refuses it too (NotImplementedError)
            msg = "Java custom groupings cannot run in a Python topology"
            raise TopologyValueError(msg, fix="implement ICustomGrouping in Python")
        return cls.CUSTOM(gtype=GroupingType.CUSTOM, python_serialized=serialized)


def _grouping_from_path(path: str):
    """Import ``package.module.Class`` and return ``Class()``."""
    import importlib

    module_name, _, class_name = path.rpartition(".")
    try:
        grouping_cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as exc:
        msg = f"Grouping.custom(): cannot import {path!r} ({exc})"
        raise TopologyValueError(msg,
                                 value=path, fix="pass 'package.module.ClassName' of a class "
                                                 "importable here, or an instance") from exc
    return grouping_cls()


def grouping_name(gtype) -> str:
    """Return a readable name of a grouping, for messages."""
    if isinstance(gtype, Grouping.FIELDS):
        return f"fields{tuple(gtype.fields)}"
    if isinstance(gtype, Grouping.CUSTOM):
        return "custom"
    try:
        return GroupingType.Name(gtype).lower()
    except (ValueError, TypeError):
        return repr(gtype)
