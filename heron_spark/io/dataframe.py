"""``from_dataframe(df)``: a bounded Spark DataFrame as a replayable spout.

The DataFrame is never collected to the driver: ``from_dataframe`` has Spark write it as
Parquet (``df.write.parquet(path)``, run by the cluster's executors, so it works in a classic
session and under Spark Connect alike) and returns a source whose spout is a bounded
``FileSource`` over that folder: its fields are the DataFrame's columns, each Parquet part
belongs to one spout task, rows are replayed from the folder under at-least-once and
effectively once, and the spout is exhausted once every row is done. ``path`` must be a folder
every executor can read (the default, ``<heron.work.dir>/dataframes/<uuid>``, is local: fine
for ``local[N]``; on a cluster pass a shared path). The folder is left in place for replays
after a restart; delete it when the topology is done. Call it where the DataFrame's session
lives (the driver or a Connect client); the spout runs in Heron Instances.
"""

from __future__ import annotations

import posixpath
import uuid

from heron_spark.config import SystemConfig
from heron_spark.errors import TopologyTypeError
from heron_spark.io import file_source
from heron_spark.io.file_source import FileSource


class DataFrameSource:
    """What ``from_dataframe`` returns: pass it where a spout class goes (``add_spout``)."""

    def __init__(self, path: str, fields: list[str]) -> None:
        self.path = path
        self.fields = list(fields)

    def settings(self) -> dict:
        """Return the ``FileSource`` config reading the written folder."""
        return {file_source.PATH: self.path, file_source.FORMAT: "parquet",
                file_source.PATTERN: "*.parquet", file_source.FIELDS: list(self.fields),
                file_source.BOUNDED: True}

    def spec(self, name=None, par=1, inputs=None, config=None, optional_outputs=None):
        """Return a ``FileSource`` spec over the written folder (``TopologyBuilder.add_spout``)."""
        return FileSource.spec(name=name, par=par, inputs=inputs,
                               config={**(config or {}), **self.settings()},
                               optional_outputs=optional_outputs)


def from_dataframe(df, path: str | None = None) -> DataFrameSource:
    """Write ``df`` as Parquet with Spark and return it as a spout source (see the module).

    Use as ``builder.add_spout("rows", from_dataframe(df), par=2)``. ``path``: where the
    executors write and the spout reads (default ``<heron.work.dir>/dataframes/<uuid>``).
    """
    if not hasattr(df, "write") or not hasattr(df, "columns"):
        msg = "from_dataframe takes a Spark DataFrame"
        raise TopologyTypeError(msg, value=type(df).__name__,
                                fix="pass spark.createDataFrame(...) or spark.read...(...)")
    target = path or posixpath.join(SystemConfig().work_dir, "dataframes", uuid.uuid4().hex)
    # "error" (= errorifexists): the one spelling Spark Connect's writer also takes
    df.write.mode("error").parquet(target)
    return DataFrameSource(target, list(df.columns))


__all__ = ["DataFrameSource", "from_dataframe"]
