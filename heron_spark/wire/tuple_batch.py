"""The one Arrow schema of a tuple batch, and its encoding.

A batch holds tuples of one stream from one source task. Column ``i`` is declared field ``i``;
a column whose values are all ``str``/``int``/``float``/``bool``/``bytes`` (or None) is native
Arrow, any other column is ``binary`` of pickled values, flagged in the field metadata. Routing
columns follow the fields, named with the reserved prefix:

- ``__hs_dests`` (list<int32>): task ids chosen by the emitter (direct and custom groupings,
  or every destination when ``__hs_routed`` is true for that row).
- ``__hs_routed`` (bool): the emitter already chose every destination of the row.

At-least-once adds two acking columns (absent otherwise):

- ``__hs_roots`` (list<uint64>): the root ids of the tuple trees the row belongs to; set by the
  emitter (a spout's new root, or the union of a bolt's anchors' roots).
- ``__hs_key`` (uint64): the row's edge id, drawn by the stmgr for each destination copy.
"""

from __future__ import annotations

import pickle
from typing import Sequence

import numpy as np
import pyarrow as pa
from pandas.util import hash_array  # imported at start-up, not on the first routed batch

PICKLED_KEY = b"heron_spark.pickled"
_PICKLED_META = {PICKLED_KEY: b"1"}
DESTS_COLUMN = "__hs_dests"
ROUTED_COLUMN = "__hs_routed"
ROOTS_COLUMN = "__hs_roots"
KEY_COLUMN = "__hs_key"
ROUTING_COLUMNS = (DESTS_COLUMN, ROUTED_COLUMN)
EMPTY_COLUMN = "__hs_rows"  # placeholder so a stream with no fields still has a row count
_NATIVE = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(),
           bytes: pa.binary()}
_NONE = type(None)
_DESTS_TYPE = pa.list_(pa.int32())
_ROOTS_TYPE = pa.list_(pa.uint64())


def column_array(values: Sequence) -> tuple[pa.Array, bool]:
    """Return ``values`` as an Arrow array and whether it had to be pickled."""
    kinds = set(map(type, values))
    kinds.discard(_NONE)
    if len(kinds) == 1:
        arrow_type = _NATIVE.get(next(iter(kinds)))
        if arrow_type is not None:
            try:
                return pa.array(values, type=arrow_type), False
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                pass  # e.g. an int beyond int64, or a str with lone surrogates
    elif not kinds:
        return pa.nulls(len(values)), False
    return pa.array([pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL) for v in values],
                    type=pa.binary()), True


def encode(fields: Sequence[str], rows: Sequence[Sequence], dests: list | None = None,
           routed: list | None = None, roots: tuple[list, list] | None = None) -> bytes:
    """Encode ``rows`` (each a sequence of values in field order) as one Arrow IPC stream.

    ``roots`` is ``(flat root ids, root count per row)`` when rows belong to tuple trees.
    """
    count = len(rows)
    arrays, schema = [], []
    columns = list(zip(*rows)) if count else [()] * len(fields)
    for name, values in zip(fields, columns):
        array, pickled = column_array(values)
        arrays.append(array)
        schema.append(pa.field(name, array.type, metadata=_PICKLED_META if pickled else None))
    if not fields:
        arrays.append(pa.nulls(count))
        schema.append(pa.field(EMPTY_COLUMN, pa.null()))
    if dests is not None:
        arrays.append(pa.array(dests, type=_DESTS_TYPE))
        schema.append(pa.field(DESTS_COLUMN, _DESTS_TYPE))
    if routed is not None:
        arrays.append(pa.array(routed, type=pa.bool_()))
        schema.append(pa.field(ROUTED_COLUMN, pa.bool_()))
    if roots is not None:
        flat, counts = roots
        offsets = np.zeros(len(counts) + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        arrays.append(pa.ListArray.from_arrays(pa.array(offsets),
                                               pa.array(np.asarray(flat, dtype=np.uint64))))
        schema.append(pa.field(ROOTS_COLUMN, _ROOTS_TYPE))
    return encode_batch(pa.RecordBatch.from_arrays(arrays, schema=pa.schema(schema)))


def encode_batch(batch: pa.RecordBatch) -> bytes:
    """Return ``batch`` as Arrow IPC stream bytes."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def decode(payload) -> pa.RecordBatch:
    """Return the record batch in Arrow IPC stream bytes."""
    return pa.ipc.open_stream(payload).read_next_batch()


def with_keys(batch: pa.RecordBatch, keys: np.ndarray) -> pa.RecordBatch:
    """Return ``batch`` with its edge-id column set to ``keys`` (uint64, one per row)."""
    if KEY_COLUMN in batch.schema.names:
        batch = batch.drop_columns([KEY_COLUMN])
    return batch.append_column(pa.field(KEY_COLUMN, pa.uint64()), pa.array(keys, pa.uint64()))


def root_lists(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Return a roots column as (flat uint64 root ids, root count per row)."""
    offsets = column.offsets.to_numpy()
    flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
    return flat, np.diff(offsets)


def row_roots(batch: pa.RecordBatch) -> list[tuple[int, ...]] | None:
    """Return each row's root ids as a tuple of ints, or None when the batch has no trees."""
    if ROOTS_COLUMN not in batch.schema.names:
        return None
    flat, counts = root_lists(batch.column(ROOTS_COLUMN))
    values = flat.tolist()
    if counts.size and (counts == 1).all():
        return [(v,) for v in values]
    out, start = [], 0
    for count in counts.tolist():
        out.append(tuple(values[start:start + count]))
        start += count
    return out


def is_pickled(field: pa.Field) -> bool:
    """True when ``field`` holds pickled values."""
    return bool(field.metadata) and PICKLED_KEY in field.metadata


def column_values(batch: pa.RecordBatch, index: int) -> list:
    """Return column ``index`` as Python values (unpickled when needed)."""
    values = batch.column(index).to_pylist()
    if is_pickled(batch.schema.field(index)):
        return [None if v is None else pickle.loads(v) for v in values]
    return values


def rows(batch: pa.RecordBatch, field_count: int) -> list[tuple]:
    """Return the tuples of ``batch`` as Python tuples of their ``field_count`` field values."""
    if field_count == 0:
        return [()] * batch.num_rows
    return list(zip(*(column_values(batch, i) for i in range(field_count))))


def key_hash(columns: Sequence[np.ndarray]) -> np.ndarray:
    """Hash fields-grouping key columns (from ``key_columns``/``canonical_keys``) to uint64.

    Every key value is hashed through its ``str`` form (``str`` values as they are), so equal
    values hash equal whatever batch, column type or process they travel in.
    """
    combined = None
    for values in columns:
        hashed = hash_array(values)
        combined = hashed if combined is None else (combined * np.uint64(1000003)) ^ hashed
    return combined


def canonical_keys(values: Sequence) -> np.ndarray:
    """Return Python key values as the object array of ``str`` that ``key_hash`` takes."""
    return object_array([v if type(v) is str else str(v) for v in values])


def key_columns(batch: pa.RecordBatch, indices: Sequence[int]) -> list[np.ndarray]:
    """Return the key columns of ``batch`` as the object arrays of ``str`` ``key_hash`` takes."""
    out = []
    for index in indices:
        column = batch.column(index)
        if pa.types.is_string(column.type) and column.null_count == 0:
            out.append(column.to_numpy(zero_copy_only=False))
        else:
            out.append(canonical_keys(column_values(batch, index)))
    return out


def object_array(values: Sequence) -> np.ndarray:
    """Return a 1-D object array of ``values`` (lists and tuples stay single elements)."""
    array = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        array[i] = value
    return array
