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
  ``(b + 1) % k == 0`` is the file ``<b>.compact`` and holds every file committed so far: a
  reader of batches ``0..b`` reads the last compaction file at or below ``b`` and every batch
  after it (``read_plan``; a writer may delete the batch files a compaction folded in, so an
  older ``b`` can be gone: ``missing`` says which);
- with one or more ``.compact`` files present the writer derives ``k`` from them (Spark's
  ``compactInterval``), so a writer that joins an existing log derives it the same way;
- the version line is ``v<n>``: a reader takes ``n <= 1`` and refuses a newer log; the
  temporary and checksum files beside the batches (``.3.<uuid>.tmp``, ``.3.crc``) are not
  batches (``batch_id_of`` is None for them).

The shell that lists, reads and creates these files is ``heron_spark.io.parquet_store``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable

SUPPORTED_VERSION = 1
VERSION_LINE = f"v{SUPPORTED_VERSION}"
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
    """Parse a batch file; raise ValueError (saying why) for anything but a log of v1 or older.

    As Spark's ``validateVersion``: the first line is ``v<n>``, ``n`` at most 1; a newer
    version is refused with its own message (a newer writer; this reader cannot know its form).
    """
    lines = data.decode("utf-8", errors="replace").split("\n")
    version = lines[0].strip()
    if not version.startswith("v") or not _is_number(version[1:]):
        msg = f"not a Spark file-sink log batch (first line {version[:40]!r}, not v1)"
        raise ValueError(msg)
    if int(version[1:]) > SUPPORTED_VERSION:
        msg = f"a file-sink log of version {version}, newer than v{SUPPORTED_VERSION}"
        raise ValueError(msg)
    try:
        return [SinkFile.from_json(line) for line in lines[1:] if line.strip()]
    except (ValueError, KeyError, TypeError) as exc:
        msg = f"a malformed file-sink log entry ({type(exc).__name__}: {exc})"
        raise ValueError(msg) from exc


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def batch_id_of(name: str) -> int | None:
    """Return the batch id of a log file name (``12``, ``19.compact``); None for other names."""
    stem = name[:-len(COMPACT_SUFFIX)] if name.endswith(COMPACT_SUFFIX) else name
    return int(stem) if _is_number(stem) else None


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


def read_plan(names: Iterable[str], upto: int | None = None) -> tuple[str, ...]:
    """Return the batch file names a reader reads to list the files of batches ``0..upto``.

    ``upto`` None: the latest batch. That is the last ``.compact`` file at or below ``upto``
    among ``names`` and every batch after it, named as found (``.compact`` or not), else
    ``str(id)`` for a batch that is absent (``missing`` tells). Taking the compaction files
    that exist, rather than deriving where they should be, reads logs whose writer used a
    compact interval other than the reader's default too; on a log Spark reads, the same
    files as Spark's ``CompactibleFileStreamLog.allFiles``. ``upto < 0`` or an empty log: ().
    """
    found: dict[int, str] = {}
    for name in names:
        batch_id = batch_id_of(name)
        if batch_id is not None and (batch_id not in found or name.endswith(COMPACT_SUFFIX)):
            found[batch_id] = name
    if upto is None:
        upto = max(found, default=-1)
    if upto < 0:
        return ()
    compacts = [i for i, name in found.items() if i <= upto and name.endswith(COMPACT_SUFFIX)]
    return tuple(found.get(i, str(i)) for i in range(max(compacts, default=0), upto + 1))


def missing(plan: Iterable[str], names: Iterable[str]) -> list[str]:
    """Return the batch file names of ``plan`` that are not among ``names`` (deleted ones)."""
    present = set(names)
    return [name for name in plan if name not in present]


__all__ = ["ADD", "COMPACT_SUFFIX", "DEFAULT_COMPACT_INTERVAL", "DELETE", "METADATA_DIR",
           "SUPPORTED_VERSION", "VERSION_LINE", "BatchPlan", "SinkFile", "batch_file_name",
           "batch_id_of", "batches_to_compact", "decode", "derive_interval", "encode",
           "is_compaction", "latest_batch_id", "missing", "plan_next", "read_plan", "visible"]
