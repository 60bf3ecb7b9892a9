"""The one Arrow schema of a tuple batch, and its encoding.

A batch holds tuples of one stream from one source task, for one destination task (the
emitter partitions; see ``plan.grouping``). Column ``i`` is declared field ``i``; a column whose
values are all ``str``/``int``/``float``/``bool``/``bytes`` (or None) is native Arrow, any
other column is ``binary`` of serialized values, flagged in the field metadata: pickled
(``heron_spark.pickled``), or written by the topology's ``topology.serializer.classname``
(``heron_spark.serializer``: the class's dotted name, which receivers look up among the
serializers ``register_serializer`` made known in their process, else load with the
``load_serializer`` their caller passes: the wire never imports the user API that loads user
classes).

At-least-once adds two acking columns after the fields (absent otherwise), named with the
reserved prefix:

- the root ids of the tuple trees each row belongs to (a spout's new root, or the union of a
  bolt's anchors' roots): ``__hs_root`` (uint64) when every row of the batch has exactly one,
  as is usual, else ``__hs_roots`` (list<uint64>);
- ``__hs_key`` (uint64): the row's edge id, drawn by the emitter for this destination's copy.

Event time adds ``__hs_ts`` (int64, nullable) right after the fields, before any acking
column: each row's timestamp in milliseconds since the epoch (``api.event_time``), present only
when some row of the batch has one.
"""

from __future__ import annotations

import pickle
import struct
from array import array as _typed_array
from itertools import accumulate, chain, repeat
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

from heron_spark.contract import key_groups
from heron_spark.errors import ConfigError
from heron_spark.wire import arrow_numpy, hashing

PICKLED_KEY = b"heron_spark.pickled"
_PICKLED_META = {PICKLED_KEY: b"1"}
SERIALIZER_KEY = b"heron_spark.serializer"
_SERIALIZERS: dict[bytes, object] = {}  # dotted class name -> a serializer of that class
ROOT_COLUMN = "__hs_root"
ROOTS_COLUMN = "__hs_roots"
KEY_COLUMN = "__hs_key"
TS_COLUMN = "__hs_ts"
_TS_FIELD = pa.field(TS_COLUMN, pa.int64())
_U64_TYPE = pa.uint64()
_ROOT_FIELD = pa.field(ROOT_COLUMN, _U64_TYPE)
_KEY_FIELD = pa.field(KEY_COLUMN, _U64_TYPE)
EMPTY_COLUMN = "__hs_rows"  # placeholder so a stream with no fields still has a row count
_NATIVE = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(),
           bytes: pa.binary()}
_NONE = type(None)
_SMALL_STRINGS = 32  # up to this many str values, _small_strings beats pa.array
_STRING_TYPE = _NATIVE[str]
_ZERO_OFFSET = [0]
# float and int columns without nulls: the array typecode of their Arrow type's values buffer
_FIXED_WIDTH = {float: ("d", _NATIVE[float]), int: ("q", _NATIVE[int])}
_ROOTS_TYPE = pa.list_(pa.uint64())
_U32 = struct.Struct(">I")
_SCHEMA_CACHE_MAX = 256
_SCHEMAS: dict[bytes, pa.Schema] = {}  # schema message -> schema (decoding side)
_BUILT_SCHEMAS: dict[tuple, pa.Schema] = {}  # (fields, column kinds) -> schema (building side)
# (id(schema), roots) of a layout (``encode_parts``) -> (that schema, the framed IPC message of
# its batches' schema)
_SCHEMA_BYTES: dict[tuple[int, bool | None], tuple] = {}
_EMPTY_SCHEMA = pa.schema([pa.field(EMPTY_COLUMN, pa.null())])


def register_serializer(serializer) -> bytes:
    """Make ``serializer`` the one that reads columns its class wrote, in this process.

    ``serializer`` is an ``IHeronSerializer``. Return the name columns carry (its class's
    dotted name).
    """
    cls = type(serializer)
    name = f"{cls.__module__}.{cls.__qualname__}".encode()
    _SERIALIZERS[name] = serializer
    return name


# dotted class name -> an initialized serializer of that class (``api.serializer``'s
# ``load_serializer_named``, passed by readers above the wire)
SerializerLoader = Callable[[str], Any]
_SERIALIZER_KEY_NAME = "topology.serializer.classname"


def _serializer_named(name: bytes, load_serializer: SerializerLoader | None):
    """Return the registered serializer ``name``, else one ``load_serializer`` loads.

    Raise ``ConfigError`` when neither has it: this reader was given no loader.
    """
    serializer = _SERIALIZERS.get(name)
    if serializer is None:
        if load_serializer is None:
            msg = ("read columns written by a topology serializer where its class is loaded: "
                   "pass load_serializer (api.serializer.load_serializer_named)")
            raise ConfigError(_SERIALIZER_KEY_NAME, name.decode(), msg)
        serializer = load_serializer(name.decode())
        _SERIALIZERS[name] = serializer
    return serializer


def column_array(values: Sequence, serializer=None) -> tuple[pa.Array, bool | bytes]:
    """Return ``values`` as an Arrow array and whether it had to be serialized.

    The second is False, True (pickled) or the name of ``serializer`` (a registered
    ``IHeronSerializer``, None: pickle), which leaves None values null.
    """
    kinds = set(map(type, values))
    if len(kinds) == 1:  # one type, no None: the small and fixed-width shortcuts
        kind = next(iter(kinds))
        try:
            fixed = _FIXED_WIDTH.get(kind)
            if fixed is not None:  # one C-level copy, without pa.array's probes
                return pa.Array.from_buffers(fixed[1], len(values), [
                    None, pa.py_buffer(_typed_array(fixed[0], values))]), False
            if kind is str and len(values) <= _SMALL_STRINGS:
                return _small_strings(values), False
        except (OverflowError, UnicodeEncodeError):
            pass  # an int beyond int64, a lone surrogate: pa.array fails too, and it is pickled
    kinds.discard(_NONE)
    if len(kinds) == 1:
        arrow_type = _NATIVE.get(next(iter(kinds)))
        if arrow_type is not None:
            try:
                return pa.array(values, type=arrow_type), False
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, UnicodeEncodeError):
                pass  # e.g. an int beyond int64, or a str with lone surrogates
    elif not kinds:
        return pa.nulls(len(values)), False
    if serializer is not None:
        dump = serializer.serialize
        return pa.array([None if v is None else dump(v) for v in values], type=pa.binary()), \
            register_serializer(serializer)
    return pa.array([pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL) for v in values],
                    type=pa.binary()), True


def _small_strings(values: Sequence[str]) -> pa.Array:
    """Return a few ``str`` values (no None) as an Arrow string array, built from two buffers.

    For a handful of values this is cheaper than ``pa.array``, whose fixed part (probes for
    pandas, array protocols and an environment variable) dominates a small frame.
    """
    joined = "".join(values)
    data = joined.encode()
    lengths = map(len, values) if len(data) == len(joined) else \
        (len(value.encode()) for value in values)  # not ASCII: lengths in UTF-8 bytes
    offsets = _typed_array("i", _ZERO_OFFSET)
    offsets.extend(accumulate(lengths))
    return pa.Array.from_buffers(_STRING_TYPE, len(values),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def build(fields: Sequence[str], rows: Sequence[Sequence]) -> pa.RecordBatch:
    """Return ``rows`` (each a sequence of values in field order) as one record batch."""
    return build_rows(fields, rows)[0]


def build_rows(fields: Sequence[str], rows: Sequence[Sequence],
               serializer=None) -> tuple[pa.RecordBatch, pa.Schema]:
    """Return what ``build`` returns, and its schema as one object per layout.

    ``batch.schema`` is a new object at every access; the second is the same object for every
    batch of these fields and column types, which ``encode_parts`` caches its bytes by.
    ``serializer``: the topology's ``IHeronSerializer`` for values Arrow cannot type (None:
    pickle).
    """
    if not fields:
        return pa.RecordBatch.from_arrays([pa.nulls(len(rows))], schema=_EMPTY_SCHEMA), \
            _EMPTY_SCHEMA
    arrays, kinds = [], []
    for i in range(len(fields)):
        array, pickled = column_array([row[i] for row in rows], serializer)
        arrays.append(array)
        kinds.append((array.type, pickled))
    key = (tuple(fields), tuple(kinds))
    schema = _BUILT_SCHEMAS.get(key)
    if schema is None:
        if len(_BUILT_SCHEMAS) >= _SCHEMA_CACHE_MAX:
            _BUILT_SCHEMAS.clear()
        schema = _BUILT_SCHEMAS[key] = pa.schema(
            [pa.field(name, arrow_type, metadata=_field_meta(pickled))
             for name, (arrow_type, pickled) in zip(fields, kinds)])
    return pa.RecordBatch.from_arrays(arrays, schema=schema), schema


def _field_meta(pickled: bool | bytes) -> dict | None:
    """Return the metadata of a column ``column_array`` built: None when native."""
    if not pickled:
        return None
    return _PICKLED_META if pickled is True else {SERIALIZER_KEY: pickled}


def one_root_each(flat: np.ndarray, counts: np.ndarray) -> bool:
    """Return whether every row belongs to exactly one tree (``with_roots``'s arguments)."""
    return counts.size == flat.size and (counts.size == 0 or bool(counts.min() == 1))


def with_roots(batch: pa.RecordBatch, flat: np.ndarray, counts: np.ndarray,
               one_each: bool | None = None) -> pa.RecordBatch:
    """Return ``batch`` with its roots column.

    Row i belongs to ``counts[i]`` trees, whose root ids follow each other in ``flat``
    (uint64). ``one_each``: ``one_root_each(flat, counts)`` when the caller knows it.
    """
    if one_each is None:
        one_each = one_root_each(flat, counts)
    if one_each:
        return batch.append_column(_ROOT_FIELD, _u64_array(flat))
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    roots = pa.ListArray.from_arrays(pa.array(offsets), _u64_array(flat))
    return batch.append_column(pa.field(ROOTS_COLUMN, _ROOTS_TYPE), roots)


def with_timestamps(batch: pa.RecordBatch, stamps: Sequence[int | None]) -> pa.RecordBatch:
    """Return ``batch`` with its event-time column: ``stamps``, one int ms (or None) per row."""
    return batch.append_column(_TS_FIELD, pa.array(stamps, type=pa.int64()))


def timestamps(batch: pa.RecordBatch) -> list | None:
    """Return each row's event time (int ms, or None), None when the batch carries none."""
    index = batch.schema.get_field_index(TS_COLUMN)
    return None if index < 0 else batch.column(index).to_pylist()


def with_keys(batch: pa.RecordBatch, keys: np.ndarray) -> pa.RecordBatch:
    """Return ``batch`` with its edge-id column ``keys`` (uint64, one per row)."""
    return batch.append_column(_KEY_FIELD, _u64_array(keys))


def _u64_array(values: np.ndarray) -> pa.Array:
    """Return uint64 ``values`` as an Arrow array over the same memory.

    ``pa.array`` would give the same array, after asking pyarrow's pandas shim (and the
    environment) what ``values`` is: that is half its cost for a small frame's ids.
    """
    values = np.ascontiguousarray(values, dtype=np.uint64)
    return pa.Array.from_buffers(_U64_TYPE, values.size, [None, pa.py_buffer(values)])


def encode(fields: Sequence[str], rows: Sequence[Sequence]) -> bytes:
    """Return ``rows`` encoded as ``encode_batch`` does (see ``build``)."""
    return encode_batch(build(fields, rows))


def encode_batch(batch: pa.RecordBatch) -> bytes:
    """Return ``batch`` as the two messages an Arrow IPC stream would hold, without its framing.

    The layout is ``u32 schema length | Arrow IPC schema message | Arrow IPC record batch
    message``: without the stream's framing, both ends skip the stream writer and reader (the
    reader caches schemas by their bytes).
    """
    return b"".join(encode_parts(batch))


def encode_parts(batch: pa.RecordBatch, layout: tuple[pa.Schema, bool | None] | None = None
                 ) -> tuple[bytes, pa.Buffer]:
    """Return ``encode_batch`` as two buffers: the framed schema, the record batch message.

    They serve scatter-gather writes that copy neither. ``layout``: ``(schema, roots)`` when
    ``schema`` (the one object ``build_rows`` gives) is ``batch``'s fields, and ``roots`` says
    which acking columns follow them: None (none), else ``with_roots``'s ``one_each`` (then
    ``with_keys``). The framed schema is then made once per layout, not once per frame:
    ``batch.schema`` is a new object each time, so without a layout it is serialized again.
    """
    if layout is None:
        message = batch.schema.serialize().to_pybytes()
        return _U32.pack(len(message)) + message, batch.serialize()
    schema = layout[0]
    key = (id(schema), layout[1])
    cached = _SCHEMA_BYTES.get(key)
    if cached is None or cached[0] is not schema:
        if len(_SCHEMA_BYTES) >= _SCHEMA_CACHE_MAX:
            _SCHEMA_BYTES.clear()
        message = batch.schema.serialize().to_pybytes()
        cached = _SCHEMA_BYTES[key] = (schema, _U32.pack(len(message)) + message)
    return cached[1], batch.serialize()


def decode(payload) -> pa.RecordBatch:
    """Return the record batch ``encode_batch`` wrote (``payload``: bytes or memoryview)."""
    (size,) = _U32.unpack_from(payload, 0)
    key = bytes(payload[_U32.size:_U32.size + size])
    schema = _SCHEMAS.get(key)
    if schema is None:
        if len(_SCHEMAS) >= _SCHEMA_CACHE_MAX:
            _SCHEMAS.clear()
        schema = _SCHEMAS[key] = pa.ipc.read_schema(pa.py_buffer(key))
    return pa.ipc.read_record_batch(pa.py_buffer(payload[_U32.size + size:]), schema)


def root_lists(batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray | None]:
    """Return the roots of ``batch`` as (flat uint64 root ids, root count per row).

    The root count per row is None when every row has exactly one.
    """
    index = batch.schema.get_field_index(ROOT_COLUMN)
    if index >= 0:
        return arrow_numpy.numbers(batch.column(index)), None
    column = batch.column(ROOTS_COLUMN)
    flat = arrow_numpy.numbers(column.flatten(), zero_copy_only=False).astype(np.uint64,
                                                                             copy=False)
    return flat, np.diff(arrow_numpy.numbers(column.offsets))


def single_roots(column: pa.Array) -> list[tuple[int]]:
    """Return each row's one root id as a 1-tuple, from a batch's uint64 root column.

    Rows of one tree usually come in runs (a sentence's words, routed to one task together):
    each run's rows share one tuple object, so a run costs one tuple and one int, not one per
    row. Rows of distinct trees (a spout's tuples) get one tuple each, as before.
    """
    ids = arrow_numpy.numbers(column)
    if ids.size < 4:
        return list(zip(ids.tolist()))
    starts = np.flatnonzero(ids[1:] != ids[:-1])
    if starts.size * 2 > ids.size:  # mostly distinct: shared tuples would not pay
        return list(zip(ids.tolist()))
    starts += 1
    bounds = np.concatenate((_ZERO, starts, [ids.size]))
    firsts = ids[bounds[:-1]].tolist()
    return list(chain.from_iterable(map(repeat, zip(firsts), np.diff(bounds).tolist())))


_ZERO = np.zeros(1, dtype=np.int64)


def row_roots(batch: pa.RecordBatch) -> list[tuple[int, ...]] | None:
    """Return each row's root ids as a tuple of ints, or None when the batch has no trees."""
    names = batch.schema.names
    if ROOT_COLUMN not in names and ROOTS_COLUMN not in names:
        return None
    flat, counts = root_lists(batch)
    values = flat.tolist()
    if counts is None:
        return list(zip(values))
    out, start = [], 0
    for count in counts.tolist():
        out.append(tuple(values[start:start + count]))
        start += count
    return out


def is_pickled(field: pa.Field) -> bool:
    """Return True when ``field`` holds pickled values."""
    return bool(field.metadata) and PICKLED_KEY in field.metadata


def column_values(batch: pa.RecordBatch, index: int,
                  load_serializer: SerializerLoader | None = None) -> list:
    """Return column ``index`` as Python values (deserialized when needed).

    ``load_serializer`` loads the serializer of a column whose class no serializer of this
    process registered (``register_serializer``).
    """
    values = batch.column(index).to_pylist()
    meta = batch.schema.field(index).metadata
    if meta:
        if PICKLED_KEY in meta:
            return [None if v is None else pickle.loads(v) for v in values]
        name = meta.get(SERIALIZER_KEY)
        if name is not None:
            load = _serializer_named(name, load_serializer).deserialize
            return [None if v is None else load(v) for v in values]
    return values


def rows(batch: pa.RecordBatch, field_count: int,
         load_serializer: SerializerLoader | None = None) -> list[tuple]:
    """Return the tuples of ``batch`` as Python tuples of their ``field_count`` field values.

    ``load_serializer``: as for ``column_values``.
    """
    if field_count == 0:
        return [()] * batch.num_rows
    return list(zip(*(column_values(batch, i, load_serializer) for i in range(field_count))))


def key_hash(columns: Sequence[pa.Array], dedupe: bool = True) -> np.ndarray:
    """Hash fields-grouping key columns (from ``key_columns``/``canonical_keys``) to uint64.

    Every key value is hashed through its ``str`` form (``str`` values as they are), so equal
    values hash equal whatever batch, column type or process they travel in. ``dedupe``:
    hash each distinct value of a big column of long values once (``hashing.string_hash``);
    False when the values are known distinct, or to keep ``pyarrow.compute`` unimported.
    """
    return hashing.combine([hashing.string_hash(column, dedupe) for column in columns])


def key_groups_of(keys: Sequence, max_parallelism: int) -> list[int]:
    """Return ``contract.key_groups.key_group(key, max_parallelism)`` of each Python key.

    ``key_group`` hashes one key per call in Python (about 7 us); this hashes them all in one
    vectorised call (a million keys: about 2 s). A tuple key (a grouping on several fields)
    combines its fields' hashes, so tuples go through ``key_group`` one at a time.
    """
    if not keys:
        return []
    hashes = key_hash([canonical_keys(keys)], dedupe=False)
    groups = key_groups.key_groups(hashes, max_parallelism).tolist()
    for i, key in enumerate(keys):
        if type(key) is tuple:
            groups[i] = key_groups.key_group(key, max_parallelism)
    return groups


def canonical_keys(values: Sequence) -> pa.Array:
    """Return Python key values as the Arrow strings ``key_hash`` takes."""
    texts = [v if type(v) is str else str(v) for v in values]
    try:
        return pa.array(texts, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError):  # lone surrogates
        return pa.array([t.encode("utf-8", "surrogatepass") for t in texts], type=pa.binary())


def key_columns(batch: pa.RecordBatch, indices: Sequence[int],
                load_serializer: SerializerLoader | None = None) -> list[pa.Array]:
    """Return the key columns of ``batch`` as the Arrow strings ``key_hash`` takes.

    ``load_serializer``: as for ``column_values``.
    """
    out = []
    for index in indices:
        column = batch.column(index)
        kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
        if (pa.types.is_string(kind) or pa.types.is_large_string(kind)) \
                and column.null_count == 0:
            out.append(column)
        else:
            out.append(canonical_keys(column_values(batch, index, load_serializer)))
    return out


def use_lean_memory_pool() -> str:
    """Make Arrow allocate from jemalloc and return the pool's name.

    Where pyarrow has no jemalloc, it uses the system allocator. Arrow's default mimalloc pool
    keeps what a batch freed for reuse, so a batch-API instance peaks higher in resident
    memory with it than with jemalloc, at the same throughput.
    """
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:
        pool = pa.system_memory_pool()
    pa.set_memory_pool(pool)
    return pool.backend_name


def warm_up() -> None:
    """Run every step a batch takes once, on a tiny batch.

    That way the first real batch does not pay for first use (Arrow's IPC writer and reader,
    NumPy's ufunc set-up): an instance calls this before it registers, so spouts
    start into warm processes.
    """
    batch = build(("word", "n", "x"), [("a", 1, 0.5), ("b", 2, 1.5), ("a", 3, None)])
    batch = with_roots(batch, np.array([1, 2, 3], dtype=np.uint64), np.array([1, 1, 1]))
    with_roots(batch, np.array([1, 2], dtype=np.uint64), np.array([2, 0, 0]))
    batch = with_keys(batch, np.array([4, 5, 6], dtype=np.uint64))
    # a slice, not ``take``: that imports pyarrow.compute (a large module), which a per-tuple
    # instance never needs
    decoded = decode(encode_batch(batch.slice(1)).__getitem__(slice(None)))
    rows(decoded, 3)
    row_roots(decoded)
    key_hash(key_columns(decoded, [0, 1]))
    decoded.slice(1, 2)
