"""Rows waiting to be written by ``ParquetSink`` or ``DeltaSink``: columns, types, size. No I/O.

A column's type is fixed by its first non-null value (``bool``, ``int``, ``float``, ``str``,
``bytes``, ``datetime``, ``date``, ``Decimal``, lists and dicts Arrow can convert); later
values must have the same type (an ``int`` in a ``float`` column is widened), or ``add``
raises ``TopologyTypeError`` naming the component, the field, the value and the fix before
the row is taken, so nothing is half-written. A column that only ever held None is written as
strings. ``approx_bytes`` estimates the Arrow size (8 bytes per scalar, the length of strings
and bytes) for rolling by size.

``Identities`` is the at-least-once de-duplication's memory: the identities (the values of
``parquet.dedupe.fields``) of the rows committed lately, at most ``window`` of them, oldest
forgotten first, plus those of the open file.
"""

from __future__ import annotations

import collections
import collections.abc
import datetime
import decimal
from collections.abc import Iterable
from typing import Any

from heron_spark.errors import TopologyTypeError

_SCALARS: tuple[tuple[type, str], ...] = (
    (bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (bytes, "bytes"),
    (bytearray, "bytes"), (datetime.datetime, "timestamp"), (datetime.date, "date"),
    (decimal.Decimal, "decimal"), (list, "list"), (tuple, "list"), (dict, "struct"))


def kind_of(value: Any) -> str | None:
    """Return the column kind of ``value`` (None: Arrow has no plain type for it)."""
    for cls, kind in _SCALARS:  # bool before int, datetime before date: order matters
        if isinstance(value, cls):
            return kind
    return None


class Rows:
    """Buffered rows of one sink task, column by column (see the module docstring)."""

    def __init__(self, fields: list[str], component: str | None = None,
                 sink: str = "ParquetSink") -> None:
        self.fields = list(fields)
        self.component = component
        self.sink = sink  # the sink's class name, for error messages
        self.kinds: dict[str, str] = {}
        self.columns: dict[str, list] = {f: [] for f in self.fields}
        self.count = 0
        self.approx_bytes = 0

    def add(self, values) -> None:
        """Take one row (values in field order); raise TopologyTypeError before taking a bad one."""
        if len(values) != len(self.fields):
            msg = f"{self.sink} got a row of {len(values)} values for fields {self.fields}"
            raise TopologyTypeError(msg, component=self.component, value=tuple(values),
                                    fix="emit one value per declared field")
        size = 0
        new_kinds: dict[str, str] = {}
        for field, value in zip(self.fields, values):
            if value is None:
                continue
            kind = kind_of(value)
            if kind is None or kind in ("list", "struct"):
                _check_arrow(value, field, self.component, self.sink)
                kind = kind or "object"
            known = self.kinds.get(field)
            if known is None:
                new_kinds[field] = kind
            elif known != kind and not (known == "float" and kind == "int"):
                msg = (f"{self.sink}: field {field!r} changed type from {known} to {kind}; a "
                       f"column has one type")
                raise TopologyTypeError(msg, component=self.component, value=value,
                                        fix=f"emit {known} values in {field!r} (convert "
                                            f"upstream), or write this stream to another path")
            size += len(value) if isinstance(value, (str, bytes, bytearray)) else 8
        self.kinds.update(new_kinds)
        for field, value in zip(self.fields, values):
            self.columns[field].append(value)
        self.count += 1
        self.approx_bytes += size

    def take(self) -> dict[str, list]:
        """Return the buffered columns and start empty (column types stay fixed)."""
        columns = self.columns
        self.columns = {f: [] for f in self.fields}
        self.count = 0
        self.approx_bytes = 0
        return columns

    def to_table(self, columns: dict[str, list]):
        """Return ``columns`` as an Arrow table; raise TopologyTypeError if Arrow refuses them."""
        import pyarrow as pa

        arrays = {}
        for field in self.fields:
            values = columns[field]
            try:
                kind = self.kinds.get(field)
                if kind is None:
                    arrays[field] = pa.array(values, type=pa.string())
                elif kind == "float":
                    arrays[field] = pa.array(values, type=pa.float64())
                else:
                    arrays[field] = pa.array(values)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                msg = f"{self.sink} cannot write field {field!r} as Arrow: {exc}"
                raise TopologyTypeError(msg, component=self.component, value=values[:3],
                                        fix="emit values of one Arrow-convertible type per "
                                            "field (convert upstream)") from exc
        return pa.table(arrays)


class Identities:
    """The identities of recently committed rows and of the open file's rows. No I/O.

    An identity is the tuple of a row's ``key_fields`` values; a key field that is also a
    partition field (``as_text``) is kept as the text of its hive folder (``str`` of an int
    or a str, since that is all a committed file keeps of it). ``committed`` holds at most
    ``window`` identities, oldest forgotten first; ``pending`` those of rows buffered or
    written but not yet committed. Single-threaded (the sink's executor thread).
    """

    def __init__(self, fields: list[str], key_fields: tuple[str, ...], window: int,
                 as_text: Iterable[str] = (), component: str | None = None) -> None:
        self.key_fields = tuple(key_fields)
        self.positions = [list(fields).index(f) for f in self.key_fields]
        self.as_text = [f in set(as_text) for f in self.key_fields]
        self.window = window
        self.component = component
        self.committed: collections.OrderedDict = collections.OrderedDict()
        self.pending: dict = {}  # a dict: insertion-ordered, so commit keeps the rows' order

    def key(self, values) -> tuple:
        """Return the identity of a row (values in field order); TopologyTypeError if unusable."""
        if any(self.as_text):
            key = tuple(_text(values[i], f, self.component) if text else values[i]
                        for i, f, text in zip(self.positions, self.key_fields, self.as_text))
        else:
            key = tuple([values[i] for i in self.positions])
        try:
            hash(key)
        except TypeError as exc:
            bad = next(v for v in key if not isinstance(v, collections.abc.Hashable))
            msg = (f"ParquetSink: a parquet.dedupe.fields value is a {type(bad).__name__}, "
                   f"which cannot identify a row")
            raise TopologyTypeError(msg, component=self.component, value=bad,
                                    fix="name fields holding str, bytes, numbers or "
                                        "timestamps in parquet.dedupe.fields") from exc
        return key

    def seen(self, key: tuple) -> bool:
        """Return whether ``key`` is committed (lately) or in the open file."""
        return key in self.committed or key in self.pending

    def add(self, key: tuple) -> None:
        """Remember ``key`` as the identity of a row in the open file."""
        self.pending[key] = None

    def commit(self) -> None:
        """Remember the open file's identities as committed; forget beyond the window."""
        self.committed.update(self.pending)
        self.pending = {}
        self.forget()

    def drop(self) -> None:
        """Forget the open file's identities: it was not committed (its tuples are failed)."""
        self.pending = {}

    def load(self, keys: Iterable[tuple]) -> None:
        """Remember committed identities read back from files, oldest first."""
        for key in keys:
            self.committed[key] = None
        self.forget()

    def forget(self) -> None:
        """Forget the oldest committed identities beyond the window."""
        while len(self.committed) > self.window:
            self.committed.popitem(last=False)


def _text(value, field: str, component: str | None):
    """Return a partition field's value as its hive folder spells it (None stays None)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    msg = (f"ParquetSink: field {field!r} is both a partition and a de-duplication field, "
           f"and a {type(value).__name__} in a folder name cannot be read back exactly")
    raise TopologyTypeError(msg, component=component, value=value,
                            fix="emit str or int values in it, or drop it from "
                                "parquet.dedupe.fields or parquet.partition.by")


def _check_arrow(value, field: str, component: str | None, sink: str) -> None:
    import pyarrow as pa

    try:
        pa.array([value])
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        msg = (f"{sink} cannot write field {field!r}: a {type(value).__name__} has no "
               f"Arrow type ({exc})")
        raise TopologyTypeError(msg, component=component, value=value,
                                fix="convert it upstream to str, bytes, int, float, bool, "
                                    "datetime, or lists/dicts of those") from exc


__all__ = ["Identities", "Rows", "kind_of"]
