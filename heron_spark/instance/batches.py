"""The batch API inside an instance (``api.batch``).

What a batch component emits, turned into record batches of its stream; what it receives,
stripped to the stream's fields; and the tree roots of emitted rows under at-least-once. Loop
thread only; no per-row Python work.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from heron_spark.api.batch import SOURCE_COMPONENT_KEY, SOURCE_STREAM_KEY, SOURCE_TASK_KEY
from heron_spark.errors import TopologyTypeError, TopologyValueError

_UNION_ROWS_MAX = 4_000_000  # rows x trees an unparented batch may be anchored to


def as_batches(data, fields: Sequence[str], component: str, stream: str) -> list[pa.RecordBatch]:
    """Return ``data`` as record batches whose columns are ``fields``, in order.

    ``data`` is a record batch, a table, a pandas frame or a dict of columns.
    """
    if isinstance(data, pa.RecordBatch):
        batches = [data]
    elif isinstance(data, pa.Table):
        batches = data.to_batches()
    elif isinstance(data, dict):
        batches = [pa.RecordBatch.from_pydict(data)]
    elif type(data).__name__ == "DataFrame" and hasattr(data, "to_numpy"):
        batches = [pa.RecordBatch.from_pandas(data, preserve_index=False)]
    else:
        msg = (f"emit_batch on stream {stream!r} takes a pyarrow RecordBatch or Table, a pandas "
               f"DataFrame or a dict of columns")
        raise TopologyTypeError(msg, component=component, value=type(data).__name__)
    out = []
    for batch in batches:
        names = batch.schema.names
        if names != list(fields):
            missing = [f for f in fields if f not in names]
            if missing:
                msg = f"emit_batch on stream {stream!r} lacks the declared field(s) {missing}"
                raise TopologyValueError(
                    msg, component=component, value=names, kind="batch_fields",
                    fix=f"give the batch the columns {list(fields)}")
            batch = batch.select(list(fields))
        out.append(batch)
    return out


def input_view(batch: pa.RecordBatch, width: int, component: str, stream: str,
               task: int) -> pa.RecordBatch:
    """Return the received ``batch`` as a batch bolt sees it.

    The stream's fields only (not the acking columns), with its source in the schema metadata
    (``api.batch.batch_source``).
    """
    if batch.num_columns != width:
        batch = batch.select(list(range(width)))
    return batch.replace_schema_metadata({SOURCE_COMPONENT_KEY: component.encode(),
                                          SOURCE_STREAM_KEY: stream.encode(),
                                          SOURCE_TASK_KEY: str(task).encode()})


def anchored_roots(flat: np.ndarray, counts: np.ndarray | None, parents, rows: int,
                   component: str) -> tuple[np.ndarray, np.ndarray]:
    """Return the roots (flat root ids, count per row) of ``rows`` emitted rows.

    ``flat``/``counts`` are the input batch's roots (``counts`` None: one per input row);
    ``parents[i]`` names the input row emitted row i derives from; None anchors every emitted
    row to every tree of the input batch.
    """
    if parents is None:
        trees = np.unique(flat)
        if rows * trees.size > _UNION_ROWS_MAX:
            msg = (f"emit_batch without parents would anchor {rows} rows to each of {trees.size} "
                   f"tuple trees")
            raise TopologyValueError(
                msg, component=component, value=rows, kind="batch_parents",
                fix="pass parents=: each emitted row's index in the input batch "
                    "(pyarrow.compute.list_parent_indices for a split)")
        return np.tile(trees, rows), np.full(rows, trees.size, dtype=np.int64)
    parents = np.asarray(parents.to_numpy(zero_copy_only=False)
                         if hasattr(parents, "to_numpy") else parents, dtype=np.int64)
    if parents.shape != (rows,):
        msg = f"emit_batch got {parents.size} parents for {rows} rows"
        raise TopologyValueError(
            msg, component=component, value=parents.size, kind="batch_parents",
            fix="give one parent index per emitted row")
    inputs = flat.size if counts is None else counts.size
    if rows and (parents.min() < 0 or parents.max() >= inputs):
        msg = f"emit_batch parents must index the input batch's {inputs} rows"
        raise TopologyValueError(
            msg, component=component, value=int(parents.max()), kind="batch_parents",
            fix="use indices 0 .. rows - 1")
    if counts is None:
        return flat[parents], np.ones(rows, dtype=np.int64)
    starts = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    out_counts = counts[parents]
    within = np.arange(out_counts.sum()) - np.repeat(np.cumsum(out_counts) - out_counts,
                                                     out_counts)
    return flat[np.repeat(starts[parents], out_counts) + within], out_counts
