"""Spark's file-sink commit log (``<path>/_spark_metadata``), as data: no I/O here.

Spark's own file sink (``FileStreamSink``) commits each micro-batch by writing one log file,
``<path>/_spark_metadata/<batchId>``, and readers (``spark.read.parquet(path)``,
``spark.readStream.parquet(path)``) list only the files that log names once the folder
``_spark_metadata`` exists. This module writes and reads that log the way Spark's
``FileStreamSinkLog`` (a ``CompactibleFileStreamLog``) does:

- a batch file is the line ``v1`` then one JSON object per file (``SinkFileStatus``: ``path``
  as a URI, ``size`` in bytes, ``isDir``, ``modificationTime`` in ms since the epoch,
  ``blockReplication``, ``blockSize`` in bytes, ``action`` ``"add"`` or ``"delete"``);
- batch ids start at 0 and leave no gap; with a compact interval ``k`` (Spark's
  ``spark.sql.streaming.fileSink.log.compactInterval``, default 10) the batch ``b`` with
  ``(b + 1) % k == 0`` is the file ``<b>.compact`` and holds every file committed so far: the
  reader reads the last compaction batch at or below the latest id and every batch after it;
- with one or more ``.compact`` files present the reader derives ``k`` from them (Spark's
  ``compactInterval``), so a writer that joins an existing log derives it the same way.

The shell that lists, reads and creates these files is ``heron_spark.io.parquet_store``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable

VERSION_LINE = "v1"
COMPACT_SUFFIX = ".compact"
METADATA_DIR = "_spark_metadata"
DEFAULT_COMPACT_INTERVAL = 10
ADD = "add"
DELETE = "delete"


@dataclasses.dataclass(frozen=True)
class SinkFile:
    """One entry of a batch file (Spark's ``SinkFileStatus``); sizes in bytes, times in ms."""

    path: str
    size: int
    modification_time_ms: int
    block_size: int = 32 * 1024 * 1024
    block_replication: int = 1
    is_dir: bool = False
    action: str = ADD

    def to_json(self) -> str:
        """Return the JSON line Spark writes for this file (its field names and order)."""
        return json.dumps({"path": self.path, "size": self.size, "isDir": self.is_dir,
                           "modificationTime": self.modification_time_ms,
                           "blockReplication": self.block_replication,
                           "blockSize": self.block_size, "action": self.action},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> SinkFile:
        """Parse one JSON line of a batch file."""
        raw = json.loads(line)
        return cls(path=raw["path"], size=int(raw["size"]),
                   modification_time_ms=int(raw["modificationTime"]),
                   block_size=int(raw.get("blockSize", 0)),
                   block_replication=int(raw.get("blockReplication", 1)),
                   is_dir=bool(raw.get("isDir", False)), action=raw.get("action", ADD))


def encode(entries: Iterable[SinkFile]) -> bytes:
    """Return a batch file's bytes: ``v1``, then one JSON line per entry (no final newline)."""
    return "\n".join([VERSION_LINE, *(entry.to_json() for entry in entries)]).encode()


def decode(data: bytes) -> list[SinkFile]:
    """Parse a batch file; raise ValueError for an empty file or another version."""
    lines = data.decode().split("\n")
    if not lines or lines[0].strip() != VERSION_LINE:
        msg = f"not a v1 Spark file-sink log batch (first line {lines[0][:20] if lines else ''!r})"
        raise ValueError(msg)
    return [SinkFile.from_json(line) for line in lines[1:] if line.strip()]


def batch_id_of(name: str) -> int | None:
    """Return the batch id of a log file name (``12``, ``19.compact``); None for other names."""
    stem = name[:-len(COMPACT_SUFFIX)] if name.endswith(COMPACT_SUFFIX) else name
    return int(stem) if stem.isdigit() else None


def is_compaction(batch_id: int, interval: int) -> bool:
    """Tell whether ``batch_id`` is a compaction batch for ``interval``."""
    return (batch_id + 1) % interval == 0


def batch_file_name(batch_id: int, interval: int) -> str:
    """Return the file name Spark's reader looks for batch ``batch_id`` under."""
    return f"{batch_id}{COMPACT_SUFFIX}" if is_compaction(batch_id, interval) else str(batch_id)


def derive_interval(names: Iterable[str], default: int = DEFAULT_COMPACT_INTERVAL) -> int:
    """Return the compact interval Spark's reader uses for a log holding ``names``.

    No ``.compact`` file: ``default``. Two or more: the distance between the last two. One, at
    id ``c``: ``c + 1`` when that is at most ``default``, else the smallest divisor of ``c + 1``
    that is at least ``default`` (Spark's ``deriveCompactInterval``).
    """
    compacts = sorted((batch_id_of(n) for n in names if n.endswith(COMPACT_SUFFIX)),
                      key=lambda i: -1 if i is None else i, reverse=True)
    ids = [i for i in compacts if i is not None]
    if len(ids) >= 2:
        return ids[0] - ids[1]
    if not ids:
        return default
    size = ids[0] + 1
    if size <= default:
        return size
    if default < size // 2:
        for divisor in range(default, size // 2 + 1):
            if size % divisor == 0:
                return divisor
    return size


def latest_batch_id(names: Iterable[str]) -> int | None:
    """Return the highest batch id among ``names`` (None: an empty log)."""
    ids = [i for i in (batch_id_of(n) for n in names) if i is not None]
    return max(ids) if ids else None


def batches_to_read(latest: int, interval: int) -> range:
    """Return the batch ids a reader reads for ``latest``: its last compaction batch onwards."""
    start = max(0, (latest + 1) // interval * interval - 1)
    return range(start, latest + 1)


def batches_to_compact(batch_id: int, interval: int) -> range:
    """Return the ids a compaction batch folds in: the previous compaction batch onwards."""
    return range(max(0, batch_id - interval), batch_id)


def visible(entries: Iterable[SinkFile]) -> list[SinkFile]:
    """Return the entries a reader sees: each path once, none that a later entry deleted."""
    entries = list(entries)
    deleted = {e.path for e in entries if e.action == DELETE}
    seen: dict[str, SinkFile] = {}
    for entry in entries:
        if entry.action == ADD and entry.path not in deleted:
            seen.setdefault(entry.path, entry)
    return list(seen.values())


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """What to write for the next commit: ``name`` with ``entries``, after reading ``reads``."""

    batch_id: int
    name: str
    reads: tuple[str, ...]  # batch file names whose entries a compaction folds in


def plan_next(names: Iterable[str], default_interval: int = DEFAULT_COMPACT_INTERVAL) -> BatchPlan:
    """Return the next batch a committer writes, given the log's current file ``names``."""
    names = list(names)
    interval = derive_interval(names, default_interval)
    latest = latest_batch_id(names)
    batch_id = 0 if latest is None else latest + 1
    reads: tuple[str, ...] = ()
    if is_compaction(batch_id, interval):
        reads = tuple(batch_file_name(i, interval) for i in batches_to_compact(batch_id, interval))
    return BatchPlan(batch_id, batch_file_name(batch_id, interval), reads)


def read_plan(names: Iterable[str], default_interval: int = DEFAULT_COMPACT_INTERVAL
              ) -> tuple[str, ...]:
    """Return the batch file names a reader reads to list every committed file."""
    names = list(names)
    latest = latest_batch_id(names)
    if latest is None:
        return ()
    interval = derive_interval(names, default_interval)
    return tuple(batch_file_name(i, interval) for i in batches_to_read(latest, interval))


__all__ = ["ADD", "COMPACT_SUFFIX", "DEFAULT_COMPACT_INTERVAL", "DELETE", "METADATA_DIR",
           "VERSION_LINE", "BatchPlan", "SinkFile", "batch_file_name", "batch_id_of",
           "batches_to_compact", "batches_to_read", "decode", "derive_interval", "encode",
           "is_compaction", "latest_batch_id", "plan_next", "read_plan", "visible"]
