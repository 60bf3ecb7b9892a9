"""Rows waiting to be written by ``ParquetSink``: columns, their types, their size. No I/O.

A column's type is fixed by its first non-null value (``bool``, ``int``, ``float``, ``str``,
``bytes``, ``datetime``, ``date``, ``Decimal``, lists and dicts Arrow can convert); later
values must have the same type (an ``int`` in a ``float`` column is widened), or ``add``
raises ``TopologyTypeError`` naming the component, the field, the value and the fix before
the row is taken, so nothing is half-written. A column that only ever held None is written as
strings. ``approx_bytes`` estimates the Arrow size (8 bytes per scalar, the length of strings
and bytes) for rolling by size.
"""

from __future__ import annotations

import datetime
import decimal
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

    def __init__(self, fields: list[str], component: str | None = None) -> None:
        self.fields = list(fields)
        self.component = component
        self.kinds: dict[str, str] = {}
        self.columns: dict[str, list] = {f: [] for f in self.fields}
        self.count = 0
        self.approx_bytes = 0

    def add(self, values) -> None:
        """Take one row (values in field order); raise TopologyTypeError before taking a bad one."""
        if len(values) != len(self.fields):
            msg = f"ParquetSink got a row of {len(values)} values for fields {self.fields}"
            raise TopologyTypeError(msg, component=self.component, value=tuple(values),
                                    fix="emit one value per declared field")
        size = 0
        new_kinds: dict[str, str] = {}
        for field, value in zip(self.fields, values):
            if value is None:
                continue
            kind = kind_of(value)
            if kind is None or kind in ("list", "struct"):
                _check_arrow(value, field, self.component)
                kind = kind or "object"
            known = self.kinds.get(field)
            if known is None:
                new_kinds[field] = kind
            elif known != kind and not (known == "float" and kind == "int"):
                msg = (f"ParquetSink: field {field!r} changed type from {known} to {kind}; a "
                       f"Parquet column has one type")
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
                msg = f"ParquetSink cannot write field {field!r} as Parquet: {exc}"
                raise TopologyTypeError(msg, component=self.component, value=values[:3],
                                        fix="emit values of one Arrow-convertible type per "
                                            "field (convert upstream)") from exc
        return pa.table(arrays)


def _check_arrow(value, field: str, component: str | None) -> None:
    import pyarrow as pa

    try:
        pa.array([value])
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        msg = (f"ParquetSink cannot write field {field!r}: a {type(value).__name__} has no "
               f"Arrow type ({exc})")
        raise TopologyTypeError(msg, component=component, value=value,
                                fix="convert it upstream to str, bytes, int, float, bool, "
                                    "datetime, or lists/dicts of those") from exc


__all__ = ["Rows", "kind_of"]
