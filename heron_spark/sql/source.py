"""The ``heron_spark`` Spark data source: a topology's committed stream as a DataFrame.

``spark.readStream.format("heron_spark").option("topology", T).option("component", C)
.option("stream", S).load()`` is a streaming DataFrame of the rows a ``ParquetSink`` committed
for that stream; ``spark.read.format("heron_spark")`` the same as a batch; ``.option("path",
FOLDER)`` (or ``.load(FOLDER)``) reads a sink folder directly. Rows come only from files in the
sink's commit log (``heron_spark.sql.sink_log``), so a reader never sees a file that is being
written or one a failed attempt left behind.

A streaming offset is ``{"batch": <last commit log batch id read>}``; a micro-batch reads the
files committed in batches ``(start, end]``, so each committed row is read once per query
(Spark's checkpoint keeps the offsets across restarts). ``startingOffsets``: ``earliest``
(default: everything committed so far, then what follows) or ``latest`` (only what is committed
after the query starts). Options are resolved once, when the DataFrame is defined (``load``).

Spark finds the source by itself: the top-level module ``pyspark_heron_spark`` (installed with
the package) exposes it as ``DefaultSource``, and PySpark 4 registers every such module on the
Python path of its workers the first time a Python data source is used.
``.option("state", "latest")`` (with ``topology`` and ``component``) reads instead the keyed
state of the component in the last committed checkpoint: see ``heron_spark.sql.state``.

``heron_spark.register_data_source(spark)`` registers it explicitly (classic or Connect).
Classes here run in Spark's Python workers: the driver's (planning) and the executors' (read).
"""

from __future__ import annotations

from typing import Iterator, Sequence

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader,
                                    InputPartition)

from heron_spark.errors import DataSourceOptionError
from heron_spark.sql import reading, state
from heron_spark.sql.resolve import resolve_path
from heron_spark.sql.sink_log import SinkLog, open_log

NAME = "heron_spark"
STARTING_OFFSETS = "startingOffsets"
BATCH = "batch"


class FilesPartition(InputPartition):
    """The committed data files one Spark task reads (URIs, in commit order)."""

    def __init__(self, base: str, uris: list[str]) -> None:
        super().__init__(uris)
        self.base = base
        self.uris = uris


def _partitions(base: str, files) -> Sequence[InputPartition]:
    return [FilesPartition(base, uris) for uris in reading.plan_partitions(files)]


class HeronSparkDataSource(DataSource):
    """``format("heron_spark")``: batch and streaming reads of a sink's committed rows."""

    def __init__(self, options) -> None:
        super().__init__(options)
        self.state: state.StatePlan | None = None
        if options.get(state.STATE) not in (None, ""):
            self.state = state.plan_state(options)
            self.base = ""
            self.starting = "earliest"
            return
        self.base = resolve_path(options)
        starting = str(options.get(STARTING_OFFSETS) or "earliest").lower()
        if starting not in ("earliest", "latest"):
            raise DataSourceOptionError(STARTING_OFFSETS, starting, "unknown starting point",
                                        "use 'earliest' or 'latest'")
        self.starting = starting

    @classmethod
    def name(cls) -> str:
        """Return ``heron_spark``, the name ``format()`` takes."""
        return NAME

    def schema(self):
        """Return the schema of the committed files (driver; only without ``.schema()``)."""
        if self.state is not None:
            return state.SCHEMA
        log = open_log(self.base)
        return reading.infer_schema(self.base, log.files_upto(log.latest()))

    def reader(self, schema) -> "DataSourceReader":
        """Return a batch reader of every file committed when the query is planned."""
        if self.state is not None:
            return _StateReader(self.state)
        return _BatchReader(self.base, schema)

    def streamReader(self, schema) -> "DataSourceStreamReader":  # noqa: N802 - pyspark\'s name
        """Return a micro-batch reader over the commit log's batch ids."""
        if self.state is not None:
            raise DataSourceOptionError(state.STATE, self.options.get(state.STATE),
                                        "a checkpoint's state is read as a batch",
                                        "use spark.read, not spark.readStream")
        return _StreamReader(self.base, schema, self.starting)


class _BatchReader(DataSourceReader):
    def __init__(self, base: str, schema) -> None:
        self.base = base
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        log = open_log(self.base)
        return _partitions(self.base, log.files_upto(log.latest()))

    def read(self, partition) -> Iterator:
        return reading.read_files(partition.base, partition.uris, self.schema)


class TaskPartition(InputPartition):
    """One task's state in a checkpoint."""

    def __init__(self, task: int) -> None:
        super().__init__(task)
        self.task = task


class _StateReader(DataSourceReader):
    def __init__(self, plan: state.StatePlan) -> None:
        self.plan = plan

    def partitions(self) -> Sequence[InputPartition]:
        return [TaskPartition(task) for task in sorted(self.plan.tasks)]

    def read(self, partition) -> Iterator:
        return state.read_batches(self.plan, partition.task)


class _StreamReader(DataSourceStreamReader):
    def __init__(self, base: str, schema, starting: str) -> None:
        self.base = base
        self.schema = schema
        self.starting = starting
        self._log: SinkLog | None = None

    def _sink_log(self) -> SinkLog:
        if self._log is None:  # the reader lives in one driver-side worker for the query
            self._log = open_log(self.base)
        return self._log

    def initialOffset(self) -> dict:  # noqa: N802 - pyspark\'s name
        return {BATCH: self._sink_log().latest() if self.starting == "latest" else -1}

    def latestOffset(self, start=None, limit=None) -> dict:  # noqa: N802 - pyspark\'s name
        return {BATCH: self._sink_log().latest()}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        if end[BATCH] <= start[BATCH]:
            return []
        return _partitions(self.base, self._sink_log().files_between(start[BATCH], end[BATCH]))

    def read(self, partition) -> Iterator:
        return reading.read_files(partition.base, partition.uris, self.schema)

    def commit(self, end: dict) -> None:
        """Nothing to release: the sink's files stay; Spark's checkpoint holds the offset."""
