"""Read a sink folder's commit log batch by batch, as a streaming query asks for it.

The log is the one Spark's file sink keeps and ``heron_spark.io.ParquetSink`` writes:
``<path>/_spark_metadata/<batch id>``, with ``.compact`` batches. Its format and the rules for
reading it (which batch files list the files of batches ``0..N``, deletions, temporary and
checksum files) are written once, in ``heron_spark.io.parquet_log``; the files are listed and
read through ``heron_spark.io.parquet_store.CommitLog``. This module adds what the data source
needs on top: the files committed in a range of batch ids, each file in exactly one range, and
the data source's errors (a log this reader cannot read, or one whose older batches were
deleted after a compaction, is a ``DataSourceOptionError`` on the option ``path``).

Runs on the driver (planning); data files are read on the executors (``heron_spark.sql.reading``).
"""

from __future__ import annotations

from typing import NoReturn

from heron_spark.errors import DataSourceOptionError
from heron_spark.io import parquet_log
from heron_spark.io.parquet_log import SinkFile
from heron_spark.io.parquet_store import CommitLog
from heron_spark.sql.resolve import PATH

_NOT_A_LOG_FIX = ("point the source at a folder a ParquetSink or Spark's file sink writes (a "
                  "log of a newer version needs a newer heron_spark)")


def open_log(base: str) -> SinkLog:
    """Return the commit log of the sink folder ``base`` (a local path or a URL; driver)."""
    return SinkLog(base, CommitLog.open(base))


class SinkLog:
    """The commit log of one sink folder, as the data source reads it.

    Remembers the files of the last batch range it computed, so a streaming query (which asks
    for ``(end of the previous micro-batch, latest]``) reads only the batch files after it.
    Driver only; not thread-safe.
    """

    def __init__(self, where: str, log: CommitLog) -> None:
        self.where = where
        self._log = log
        self._cached: tuple[int, list[SinkFile]] | None = None

    def latest(self) -> int:
        """Return the id of the last committed batch, or -1 when none is."""
        latest = parquet_log.latest_batch_id(self._log.names())
        return -1 if latest is None else latest

    def files_upto(self, upto: int) -> list[SinkFile]:
        """Return the files committed in batches ``0..upto``, in commit order."""
        if self._cached is not None and self._cached[0] == upto:
            return self._cached[1]
        names = self._log.names()
        reads = parquet_log.read_plan(names, upto)
        entries: list[SinkFile] = []
        if self._cached is not None and reads:
            done, files = self._cached
            first = parquet_log.batch_id_of(reads[0])
            if first is not None and first <= done < upto:  # no compaction after `done`
                entries = list(files)
                reads = tuple(name for name in reads
                              if (parquet_log.batch_id_of(name) or 0) > done)
        gone = parquet_log.missing(reads, names)
        if gone:
            self._gone(upto, gone[0])
        for name in reads:
            entries.extend(self._read(upto, name))
        files = parquet_log.visible(entries)
        self._cached = (upto, files)
        return files

    def files_between(self, start: int, end: int) -> list[SinkFile]:
        """Return the files committed in batches ``start+1..end``, in commit order."""
        before = {sink_file.path for sink_file in self.files_upto(start)} if start >= 0 else set()
        return [sink_file for sink_file in self.files_upto(end) if sink_file.path not in before]

    def _read(self, upto: int, name: str) -> list[SinkFile]:
        try:
            return self._log.read(name)
        except FileNotFoundError:  # deleted since it was listed (a writer cleaning up)
            self._gone(upto, name)
        except ValueError as exc:
            raise DataSourceOptionError(PATH, self.where, f"not a commit log this reader "
                                        f"can read: {exc}", _NOT_A_LOG_FIX) from exc

    def _gone(self, upto: int, name: str) -> NoReturn:
        raise DataSourceOptionError(PATH, self.where, f"the commit log no longer holds batch "
                                    f"file {name!r}, needed to list batch {upto} (deleted "
                                    f"after a later compaction)", "start the query again with "
                                    "a new checkpoint location")


__all__ = ["SinkLog", "open_log"]
