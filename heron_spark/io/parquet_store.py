"""The I/O shell of the Spark commit log: a folder on any ``pyarrow.fs`` filesystem.

``CommitLog`` lists, reads and creates the batch files ``parquet_log`` describes. Committing
takes the next batch id by creating its file only if it is absent: on the local filesystem
(and anything mounted locally, NFS included) the batch is written to a hidden temporary file
and hard-linked to its name, which fails if the name exists, so several tasks committing to one
log at once each get their own batch id and a reader never sees half a batch. Other
filesystems (``s3://``, ``hdfs://``, ``gs://``) offer no create-if-absent through
``pyarrow.fs``: there the batch is written to a temporary file and moved after checking the
name is free, which is safe for one committer per path only, so ``ParquetSink`` refuses a
parallelism above 1 on them. ``recent_identities`` reads back the de-duplication fields of the
newest committed files. Runs in a Heron Instance (the sink) or anywhere (reading).
"""

from __future__ import annotations

import os
import posixpath
import time
import uuid
from urllib.parse import quote, unquote

from heron_spark.io import parquet_log
from heron_spark.io.parquet_log import SinkFile

_MAX_ATTEMPTS = 10_000  # batch ids tried before giving up (each loss means another committer won)


def open_filesystem(url: str):
    """Return ``(filesystem, path, URI prefix)`` for a local path or a ``pyarrow.fs`` URL.

    A URL's path is percent-decoded (``file:///a%20b`` is the folder ``/a b``); ``file:/a``,
    the form Spark's own file sink logs, is a URL too. The URI prefix turns a path on the
    filesystem into the URI Spark's log holds (``uri``).
    """
    import pyarrow.fs as pafs

    if "://" not in url and not url.startswith("file:"):
        return pafs.LocalFileSystem(), os.path.abspath(url), "file://"
    fs, base = pafs.FileSystem.from_uri(url)
    if isinstance(fs, pafs.LocalFileSystem):
        return fs, base, "file://"
    scheme, rest = url.split("://", 1)
    authority = rest.split("/", 1)[0] if scheme not in ("s3", "gs", "gcs") else ""
    return fs, base, f"{scheme}://{authority}" if authority else f"{scheme}://"


class CommitLog:
    """``<base>/_spark_metadata`` on ``fs``; see the module docstring. One per task."""

    def __init__(self, fs, base: str, uri_prefix: str,
                 compact_interval: int = parquet_log.DEFAULT_COMPACT_INTERVAL) -> None:
        import pyarrow.fs as pafs

        self.fs = fs
        self.base = base
        self.dir = posixpath.join(base, parquet_log.METADATA_DIR)
        self.uri_prefix = uri_prefix
        self.compact_interval = compact_interval
        self.local = isinstance(fs, pafs.LocalFileSystem)

    @classmethod
    def open(cls, url: str, compact_interval: int = parquet_log.DEFAULT_COMPACT_INTERVAL
             ) -> CommitLog:
        """Return the log of the sink folder ``url`` (a local path or a ``pyarrow.fs`` URL)."""
        fs, base, prefix = open_filesystem(url)
        return cls(fs, base, prefix, compact_interval)

    def create(self) -> None:
        """Create the folder and ``_spark_metadata`` (from then on readers use the log)."""
        self.fs.create_dir(self.dir, recursive=True)

    def uri(self, path: str) -> str:
        """Return the URI Spark's log uses for ``path`` on this filesystem."""
        return self.uri_prefix + quote(path if path.startswith("/") else "/" + path, safe="/=:")

    def entry(self, path: str) -> SinkFile:
        """Return the log entry of the written file ``path`` (size and time from the fs)."""
        info = self.fs.get_file_info(path)
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else int(time.time() * 1000)
        return SinkFile(path=self.uri(path), size=int(info.size or 0), modification_time_ms=mtime)

    def names(self) -> list[str]:
        """Return the names of the batch files present."""
        import pyarrow.fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.dir, allow_not_found=True))
        except FileNotFoundError:
            # pyarrow lists, and only when that fails looks whether the folder exists: a folder
            # a sink creates in between raises despite allow_not_found. It was not there when
            # listed, so nothing was committed then.
            return []
        return [i.base_name for i in infos if i.type == pafs.FileType.File
                and parquet_log.batch_id_of(i.base_name) is not None]

    def read(self, name: str) -> list[SinkFile]:
        """Return the entries of the batch file ``name``; ValueError naming it if malformed."""
        path = posixpath.join(self.dir, name)
        with self.fs.open_input_stream(path) as stream:
            data = stream.read()
        try:
            return parquet_log.decode(data)
        except ValueError as exc:
            msg = f"{path}: {exc}"
            raise ValueError(msg) from exc

    def files(self, upto: int | None = None) -> list[SinkFile]:
        """Return the files a Spark reader sees in batches ``0..upto`` (None: all), in order."""
        entries: list[SinkFile] = []
        for name in parquet_log.read_plan(self.names(), upto):
            entries.extend(self.read(name))
        return parquet_log.visible(entries)

    def path_of(self, uri: str) -> str:
        """Return the path on this filesystem of a URI the log holds (``uri``'s inverse)."""
        rest = uri.removeprefix(self.uri_prefix) if uri.startswith(self.uri_prefix) else uri
        path = unquote(rest)
        return path if self.local or not self.uri_prefix.endswith("://") else path.lstrip("/")

    def recent_identities(self, fields: tuple[str, ...], partition_by: tuple[str, ...],
                          window: int) -> list[tuple]:
        """Return the ``fields`` values of the newest ``window`` committed rows, oldest first.

        Files are read newest first (the log's order), only the columns of ``fields``; a field
        that is a partition field is taken from the file's ``field=value`` folder as text
        (None for Arrow's ``__HIVE_DEFAULT_PARTITION__``).
        """
        import pyarrow.parquet as pq

        columns = [f for f in fields if f not in partition_by]
        found: list[list[tuple]] = []
        total = 0
        for entry in reversed(self.files()):
            if total >= window:
                break
            path = self.path_of(entry.path)
            folders = _hive_values(path, self.base)
            table = pq.read_table(path, columns=columns, filesystem=self.fs)
            data = {f: table.column(f).to_pylist() for f in columns}
            rows = table.num_rows
            keys = list(zip(*[data[f] if f in data else [folders.get(f)] * rows
                              for f in fields]))
            found.append(keys[-(window - total):])
            total += len(found[-1])
        return [key for keys in reversed(found) for key in keys]

    def commit(self, entries: list[SinkFile]) -> int:
        """Write ``entries`` as the next batch; return its id. Safe with concurrent committers."""
        for _ in range(_MAX_ATTEMPTS):
            plan = parquet_log.plan_next(self.names(), self.compact_interval)
            batch = list(entries)
            if plan.reads:
                folded: list[SinkFile] = []
                for name in plan.reads:
                    folded.extend(self.read(name))
                batch = parquet_log.visible([*folded, *entries])
            if self._create_if_absent(plan.name, parquet_log.encode(batch)):
                return plan.batch_id
        msg = f"could not claim a batch id in {self.dir} after {_MAX_ATTEMPTS} attempts"
        raise RuntimeError(msg)

    def _create_if_absent(self, name: str, data: bytes) -> bool:
        target = posixpath.join(self.dir, name)
        temp = posixpath.join(self.dir, f".{name}.{uuid.uuid4().hex}.tmp")
        with self.fs.open_output_stream(temp) as out:
            out.write(data)
        if self.local:
            try:
                os.link(temp, target)
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(temp)
        import pyarrow.fs as pafs

        if self.fs.get_file_info(target).type != pafs.FileType.NotFound:
            self.fs.delete_file(temp)
            return False
        self.fs.move(temp, target)
        return True


def _hive_values(path: str, base: str) -> dict[str, str | None]:
    """Return the ``field=value`` folders between ``base`` and the file ``path``, decoded."""
    relative = posixpath.relpath(posixpath.dirname(path), base.rstrip("/") or "/")
    values: dict[str, str | None] = {}
    for segment in relative.split("/"):
        name, sep, value = segment.partition("=")
        if sep:
            text = unquote(value)
            values[name] = None if text == _HIVE_NULL else text
    return values


_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"

__all__ = ["CommitLog", "open_filesystem"]
