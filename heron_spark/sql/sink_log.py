"""Read the commit log Spark's file sink keeps: ``<path>/_spark_metadata/<batch id>``.

The format is the one ``FileStreamSinkLog`` writes (and ``heron_spark.io.ParquetSink`` writes
the same): one file per committed batch, named by its id; its first line is the version
(``v1``), each further line one JSON object per data file (``path`` a URI, ``size`` in bytes,
``action`` ``add``, or ``delete`` in logs of old Spark versions). Every ``compactInterval``
batches the writer folds all entries of batches ``0..N`` into ``N.compact`` instead of ``N``
(and may later delete the files of batches it folded). A file appears atomically (written
aside, then renamed), so a visible batch file is complete; temporary and checksum files
(``.N.<uuid>.tmp``, ``.N.crc``) are not batches.

The core (``parse_batch``, ``batch_ids``, ``files_to_read``) is I/O-free; ``SinkLog`` is the
thin shell reading through a ``pyarrow.fs`` file system. Runs on the driver (planning); data
files are read on the executors (``heron_spark.sql.reading``).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Callable, Iterable

from heron_spark.errors import DataSourceOptionError
from heron_spark.sql.resolve import PATH

METADATA_DIR = "_spark_metadata"
VERSION_PREFIX = "v"
SUPPORTED_VERSION = 1
COMPACT_SUFFIX = ".compact"
_BATCH_NAME = re.compile(r"^(\d+)(\.compact)?$")


@dataclasses.dataclass(frozen=True)
class SinkFile:
    """One committed data file: its URI and size in bytes."""

    path: str
    size_bytes: int


def parse_batch(text: str, where: str) -> list[tuple[str, SinkFile]]:
    """Return the ``(action, file)`` entries of one batch file's ``text`` (``where``: its path).

    Raise ``DataSourceOptionError`` (option ``path``) on a log this reader does not know.
    """
    lines = text.split("\n")
    version = lines[0].strip()
    if not version.startswith(VERSION_PREFIX) or not version[1:].isdigit():
        raise DataSourceOptionError(PATH, where, f"not a file-sink commit log (first line "
                                    f"{version[:40]!r}, not v1)",
                                    "point the source at the folder a ParquetSink or Spark's "
                                    "file sink writes")
    if int(version[1:]) > SUPPORTED_VERSION:
        raise DataSourceOptionError(PATH, where, f"commit log version {version} is newer "
                                    f"than v{SUPPORTED_VERSION}", "upgrade heron_spark")
    entries = []
    for line in lines[1:]:
        if not line.strip():
            continue
        record = json.loads(line)
        entries.append((str(record.get("action", "add")),
                        SinkFile(str(record["path"]), int(record.get("size", 0)))))
    return entries


def batch_ids(names: Iterable[str]) -> dict[int, bool]:
    """Return ``{batch id: is compact}`` for the batch files among ``names`` (file names)."""
    found: dict[int, bool] = {}
    for name in names:
        match = _BATCH_NAME.match(name)
        if match:
            batch = int(match.group(1))
            found[batch] = found.get(batch, False) or bool(match.group(2))
    return found


def batch_file_name(batch: int, compact: bool) -> str:
    """Return the file name of ``batch`` in the metadata folder."""
    return f"{batch}{COMPACT_SUFFIX if compact else ''}"


def files_to_read(batches: dict[int, bool], upto: int) -> list[str] | None:
    """Return the batch file names whose entries make up batches ``0..upto``, in order.

    That is the last compact file at or below ``upto`` and every batch after it (what
    ``CompactibleFileStreamLog.allFiles`` reads). None when a needed batch file is gone
    (cleaned up after a later compaction). ``upto < 0``: no batches, an empty list.
    """
    if upto < 0:
        return []
    compacts = [batch for batch, compact in batches.items() if compact and batch <= upto]
    first = max(compacts) if compacts else 0
    names = []
    for batch in range(first, upto + 1):
        if batch not in batches:
            return None
        names.append(batch_file_name(batch, batches[batch]))
    return names


class SinkLog:
    """The commit log of one sink folder, read through a ``pyarrow.fs`` file system.

    ``list_names()`` and ``read_text(name)`` are the only I/O; the log remembers the files of
    the last batch it computed, so a streaming query (which asks for ``(end of the previous
    micro-batch, latest]``) reads only the batch files after it. Driver only; not thread-safe.
    """

    def __init__(self, where: str, list_names: Callable[[], list[str]],
                 read_text: Callable[[str], str]) -> None:
        self.where = where
        self._list_names = list_names
        self._read_text = read_text
        self._cached: tuple[int, dict[str, SinkFile]] | None = None

    def latest(self) -> int:
        """Return the id of the last committed batch, or -1 when none is."""
        return max(batch_ids(self._list_names()), default=-1)

    def files_upto(self, upto: int) -> dict[str, SinkFile]:
        """Return the files committed in batches ``0..upto`` (path → file)."""
        if self._cached is not None and self._cached[0] == upto:
            return self._cached[1]
        batches = batch_ids(self._list_names())
        live: dict[str, SinkFile]
        if self._cached is not None and self._cached[0] < upto and all(
                batch in batches and not batches[batch]
                for batch in range(self._cached[0] + 1, upto + 1)):
            live = dict(self._cached[1])
            names = [batch_file_name(b, False) for b in range(self._cached[0] + 1, upto + 1)]
        else:
            live = {}
            found = files_to_read(batches, upto)
            if found is None:
                raise DataSourceOptionError(
                    PATH, self.where, f"the commit log no longer holds batch {upto} (its "
                    f"files were cleaned up after a later compaction)",
                    "start the query again with a new checkpoint location")
            names = found
        for name in names:
            for action, sink_file in parse_batch(self._read_text(name), f"{self.where}/{name}"):
                if action == "delete":
                    live.pop(sink_file.path, None)
                else:
                    live[sink_file.path] = sink_file
        self._cached = (upto, live)
        return live

    def files_between(self, start: int, end: int) -> list[SinkFile]:
        """Return the files committed in batches ``start+1..end``, in commit order."""
        before = set(self.files_upto(start)) if start >= 0 else set()
        return [sink_file for path, sink_file in self.files_upto(end).items()
                if path not in before]
