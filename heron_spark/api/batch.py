"""The batch API: spouts and bolts that work on whole Apache Arrow record batches.

A ``BatchBolt`` gets every batch its task receives as one ``pyarrow.RecordBatch`` (columns:
the input stream's declared fields) in ``process_batch``, or as a ``pandas.DataFrame`` in
``process_frame`` when ``input_format = "pandas"``. A ``BatchSpout`` emits whole batches from
``next_batch``. Both emit with ``emit_batch``: a record batch, a table, a pandas frame or a
dict of columns, whose columns are the stream's declared fields. Python runs once per batch,
not once per tuple, so vectorised code (``pyarrow.compute``, NumPy, pandas) sets the pace.

They mix freely with per-tuple components: a batch bolt may consume a per-tuple spout's
stream and feed a per-tuple bolt; groupings, backpressure and acking work the same way.
Under at-least-once a batch bolt acks each input batch when ``process_batch`` returns (unless
it called ``fail_batch``), and each emitted row is anchored to the input rows named by
``parents`` (its parent row's index in the input batch; ``pyarrow.compute.list_parent_indices``
gives them for a split) or, without ``parents``, to every tree of the input batch. A batch
spout's ``emit_batch(..., tup_id=X)`` makes the whole batch one tuple tree: ``ack(X)`` once
every row's processing is done, ``fail(X)`` if any row failed or timed out.
"""

from __future__ import annotations

from typing import Any

from heron_spark.api.bolt import Bolt
from heron_spark.api.spout import Spout
from heron_spark.api.stream import Stream

SOURCE_COMPONENT_KEY = b"heron.component"
SOURCE_STREAM_KEY = b"heron.stream"
SOURCE_TASK_KEY = b"heron.task"


def batch_source(batch) -> tuple[str, str, int]:
    """Return ``(component, stream, task)`` that sent ``batch`` to ``process_batch``."""
    meta = batch.schema.metadata or {}
    return (meta.get(SOURCE_COMPONENT_KEY, b"").decode(), meta.get(SOURCE_STREAM_KEY, b"").decode(),
            int(meta.get(SOURCE_TASK_KEY, b"-1")))


class BatchBolt(Bolt):
    """A bolt that processes whole Arrow record batches; see the module docstring.

    ``process_batch`` runs on the instance's loop thread once per received batch. The batch's
    schema metadata names its source (``batch_source(batch)``).
    """

    input_format = "arrow"
    """``"arrow"``: ``process_batch(pyarrow.RecordBatch)``; ``"pandas"``:
    ``process_frame(pandas.DataFrame)``."""

    def process_batch(self, batch) -> None:
        """Handle one input batch (a ``pyarrow.RecordBatch``); may ``emit_batch``."""
        if self.input_format == "pandas":
            self.process_frame(batch.to_pandas())
            return
        msg = f"{type(self).__name__} must implement process_batch()"
        raise NotImplementedError(msg)

    def process_frame(self, frame) -> None:
        """Handle one input batch as a ``pandas.DataFrame`` (``input_format = "pandas"``)."""
        msg = f"{type(self).__name__} must implement process_frame() (input_format is 'pandas')"
        raise NotImplementedError(msg)

    def process(self, tup) -> None:
        """Batch bolts get batches: ``process_batch`` replaces ``process``."""
        msg = "a BatchBolt receives whole batches in process_batch()"
        raise NotImplementedError(msg)

    def emit_batch(self, data, stream: str = Stream.DEFAULT_STREAM_ID, parents=None) -> None:
        """Emit every row of ``data`` on ``stream``.

        ``data`` is a ``pyarrow.RecordBatch`` or ``Table``, a ``pandas.DataFrame`` or a dict of
        columns.

        ``parents`` (at-least-once): for each emitted row, the index of the row of the current
        input batch it derives from; None anchors every row to all of that batch's trees.
        """
        self.delegate.emit_batch(data, stream, parents, None)

    def fail_batch(self) -> None:
        """Fail the current input batch (at-least-once): its spouts replay its trees."""
        self.delegate.fail_batch()


class BatchSpout(Spout):
    """A spout that emits whole Arrow record batches; see the module docstring.

    ``next_batch`` is called in a loop on the instance's loop thread, like ``next_tuple``.
    """

    def next_batch(self) -> None:
        """Emit zero or more batches with ``emit_batch``."""
        msg = f"{type(self).__name__} must implement next_batch()"
        raise NotImplementedError(msg)

    def next_tuple(self) -> None:
        """Batch spouts emit batches: ``next_batch`` replaces ``next_tuple``."""
        self.next_batch()

    def emit_batch(self, data, stream: str = Stream.DEFAULT_STREAM_ID, tup_id: Any = None) -> None:
        """Emit every row of ``data`` on ``stream``, optionally as one tuple tree.

        ``data`` as in ``BatchBolt.emit_batch``; with a ``tup_id`` (at-least-once) the batch is
        one tuple tree, acked or failed as a whole.
        """
        self.delegate.emit_batch(data, stream, None, tup_id)
