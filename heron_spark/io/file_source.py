"""``FileSource``: a replayable spout over a folder of Parquet, CSV, JSON-lines or text files.

Configure it through its component config: ``file.path`` (a folder or one file),
``file.format`` (``parquet``, ``csv``, ``json`` for JSON lines, or ``text``: one ``line``
per row), ``file.pattern`` (a glob, default ``*``; names starting with ``.`` or ``_`` are
skipped), ``file.fields`` (the columns to emit, in order; default: the columns of the first
file found when the topology is built, ``["line"]`` for text), ``file.poll.secs`` (how often
the folder is listed for new files) and ``file.bounded`` (true: the spout is exhausted once
the files present at its start are done; false, the default: it keeps polling). A file is
taken once its size and modification time stayed the same over two listings, so a file still
being written is not read half-way: write elsewhere and move it in, or write it quickly.

Each file belongs to one task (a stable hash of its name modulo the parallelism). Rows are
emitted with message id ``(file name, row number)``; offsets are per file, committed like the
Kafka spout's: under at-least-once a file's offset (first row not yet acked, plus the acked
rows beyond it) advances only when rows are acked and is saved to the state manager every
``file.commit.interval.secs`` and at close, so a restarted task re-emits only unacked rows;
failed rows are emitted again. Under effectively once the offsets (rows emitted) are part of
each checkpoint's state, so a rollback rewinds to the checkpoint. Under at-most-once a row is
done once emitted. Runs in a Heron Instance; ``spec`` reads the folder where the topology is
built when ``file.fields`` is not given.
"""

from __future__ import annotations

import collections
import fnmatch
import os
import time
import zlib

from heron_spark.api.component import HeronComponentSpec
from heron_spark.api.spout import Spout
from heron_spark.api.state import StatefulComponent
from heron_spark.api.stream import Stream
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.errors import TopologyValueError
from heron_spark.io._offset_store import OffsetStore

PATH = "file.path"
FORMAT = "file.format"
PATTERN = "file.pattern"
FIELDS = "file.fields"
POLL_SECS = "file.poll.secs"
BOUNDED = "file.bounded"
ROWS_PER_CALL = "file.rows.per.call"
COMMIT_INTERVAL_SECS = "file.commit.interval.secs"
FORMATS = ("parquet", "csv", "json", "text")
STATE_KEY = "file_source"


class Offsets:
    """One file's progress: the first row not done, and the rows done beyond it. No I/O."""

    def __init__(self, saved: dict | None = None) -> None:
        saved = saved or {}
        self.next_row = int(saved.get("next", 0))
        self.done_beyond: set[int] = set(saved.get("beyond", ()))
        self.total: int | None = saved.get("total")  # rows in the file, once read to its end

    @property
    def finished(self) -> bool:
        """Tell whether every row of the file is done."""
        return self.total is not None and self.next_row >= self.total

    def done(self, row: int) -> None:
        """Mark ``row`` done; move the watermark over every done row."""
        self.done_beyond.add(row)
        while self.next_row in self.done_beyond:
            self.done_beyond.discard(self.next_row)
            self.next_row += 1

    def is_done(self, row: int) -> bool:
        """Tell whether ``row`` needs no emitting."""
        return row < self.next_row or row in self.done_beyond

    def to_state(self) -> dict:
        """Return the JSON-able form ``Offsets(saved)`` reads back."""
        return {"next": self.next_row, "beyond": sorted(self.done_beyond), "total": self.total}


def read_rows(path: str, fmt: str, fields: list[str] | None):
    """Return ``(fields, rows)`` of one file: rows as lists of values in field order."""
    if fmt == "text":
        with open(path, encoding="utf-8", errors="replace") as handle:
            return ["line"], [[line.rstrip("\r\n")] for line in handle]
    table = _read_table(path, fmt)
    names = list(fields or table.column_names)
    missing = [f for f in names if f not in table.column_names]
    if missing:
        msg = f"FileSource: {path} has no column(s) {missing}"
        raise TopologyValueError(msg, value=table.column_names, kind="config",
                                 fix="list existing columns in file.fields")
    columns = [table.column(f).to_pylist() for f in names]
    return names, [list(row) for row in zip(*columns)] if columns else []


def _read_table(path: str, fmt: str):
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path)
    if fmt == "csv":
        import pyarrow.csv as pcsv

        return pcsv.read_csv(path)
    import pyarrow.json as pjson

    return pjson.read_json(path)


def _settings(config: dict, component: str | None) -> tuple[str, str]:
    path, fmt = config.get(PATH), str(config.get(FORMAT, "text")).lower()
    if not path:
        msg = "FileSource needs file.path"
        raise TopologyValueError(msg, component=component, value=path, kind="config",
                                 fix="set config={'file.path': '/data/in', 'file.format': "
                                     "'parquet'}")
    if fmt not in FORMATS:
        msg = "FileSource: unknown file.format"
        raise TopologyValueError(msg, component=component, value=fmt, kind="config",
                                 fix=f"use one of {list(FORMATS)}")
    return str(path), fmt


def list_files(root: str, pattern: str) -> list[str]:
    """Return the matching files under ``root`` (or ``root`` itself), sorted by name."""
    if os.path.isfile(root):
        return [root]
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    return [os.path.join(root, n) for n in names if fnmatch.fnmatch(n, pattern)
            and not n.startswith((".", "_")) and os.path.isfile(os.path.join(root, n))]


class FileSource(Spout, StatefulComponent):
    """See the module docstring."""

    outputs = [Stream(fields=["line"])]

    @classmethod
    def spec(cls, name=None, par=1, inputs=None, config=None, optional_outputs=None):
        """Return the spec; its output fields are ``file.fields`` or the first file's columns."""
        config = dict(config or {})
        path, fmt = _settings(config, name)
        fields = config.get(FIELDS)
        if isinstance(fields, str):
            fields = [f.strip() for f in fields.split(",") if f.strip()]
        if fmt == "text":
            fields = ["line"]
        elif not fields:
            files = list_files(path, str(config.get(PATTERN, "*")))
            if not files:
                msg = "FileSource cannot tell its fields: no file yet and no file.fields"
                raise TopologyValueError(msg, component=name, value=path, kind="config",
                                         fix="set file.fields to the column names")
            fields = _read_table(files[0], fmt).column_names
        config[FIELDS] = list(fields)
        return HeronComponentSpec(name, cls, True, par, inputs=inputs,
                                  outputs=[Stream(fields=list(fields)), *(optional_outputs or [])],
                                  config=config)

    _checkpointed = None

    def init_state(self, stateful_state) -> None:
        """Keep the checkpointed state (effectively once): offsets live there."""
        self._checkpointed = stateful_state

    def pre_save(self, checkpoint_id) -> None:
        """Write the offsets into the state before the checkpoint saves it."""
        self._commit()

    def initialize(self, config, context):
        """Load the committed offsets and list the folder."""
        component = context.get_component_id()
        self._root, self._format = _settings(config, component)
        self._pattern = str(config.get(PATTERN, "*"))
        self._fields = list(config.get(FIELDS) or ["line"])
        self._poll = float(config.get(POLL_SECS, 1.0))
        self._bounded = bool(config.get(BOUNDED, False))
        self._per_call = int(config.get(ROWS_PER_CALL, 256))
        self._tasks = context.get_component_parallelism(component) or 1
        self._index = context.get_task_index()
        mode = TopologyConfig.from_config(config, component)
        self._reliable = mode.at_least_once
        self._saved = OffsetStore(self, self._checkpointed, STATE_KEY,
                                  float(config.get(COMMIT_INTERVAL_SECS, 0.2)))
        saved = self._saved.load()
        self._offsets = {name: Offsets(s) for name, s in saved.get("files", {}).items()}
        self._queue: collections.deque[str] = collections.deque()  # files ready to read
        self._taken: set[str] = set()  # files queued by this process (never queued twice)
        self._seen: dict[str, tuple] = {}   # name -> (size, mtime) at the last listing
        self._current: tuple[str, list] | None = None
        self._row = 0
        self._pending: dict[tuple[str, int], list] = {}
        self._replay: collections.deque = collections.deque()
        self._next_poll = 0.0
        self._first_listing: set[str] | None = None
        self._dirty = False
        self.emitted = 0

    def _mine(self, name: str) -> bool:
        return zlib.crc32(name.encode()) % self._tasks == self._index

    def _list(self, now: float) -> None:
        self._next_poll = now + self._poll
        queued = self._taken  # read (or queued) by this process: its replays go by ack/fail
        listing = {}
        for path in list_files(self._root, self._pattern):
            name = os.path.basename(path)
            if not self._mine(name):
                continue
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                continue
            listing[name] = (stat.st_size, stat.st_mtime_ns)
        if self._first_listing is None:
            self._first_listing = set(listing)
        for name, seen in sorted(listing.items()):
            stable = self._seen.get(name) == seen or self._bounded
            offsets = self._offsets.get(name)
            if stable and name not in queued and not (offsets and offsets.finished):
                self._offsets.setdefault(name, Offsets())
                self._queue.append(name)
                self._taken.add(name)
        self._seen = listing

    def next_tuple(self):
        """Emit up to ``file.rows.per.call`` rows: replays first, then new rows; poll the folder."""
        now = time.monotonic()
        if now >= self._next_poll:
            self._list(now)
        emitted = 0
        while emitted < self._per_call:
            if self._replay:
                message_id = self._replay.popleft()
                if message_id in self._pending:
                    self.emit(self._pending[message_id], tup_id=message_id)
                    emitted += 1
                continue
            if not self._next_row():
                break
            emitted += 1
        self.emitted += emitted
        if self._dirty and self._saved.due():
            self._commit()
        if self._bounded and emitted == 0 and self._exhausted():
            self._commit()
            self.declare_exhausted()

    def _next_row(self) -> bool:
        while True:
            if self._current is None:
                if not self._queue:
                    return False
                name = self._queue.popleft()
                _, rows = read_rows(os.path.join(self._root, name)
                                    if os.path.isdir(self._root) else self._root,
                                    self._format, self._fields)
                self._current, self._row = (name, rows), 0
            name, rows = self._current
            offsets = self._offsets[name]
            while self._row < len(rows) and offsets.is_done(self._row):
                self._row += 1
            if self._row >= len(rows):
                offsets.total = len(rows)
                self._dirty = True
                self._current = None
                continue
            row, values = self._row, rows[self._row]
            self._row += 1
            message_id = (name, row)
            if self._reliable:
                self._pending[message_id] = values
                self.emit(values, tup_id=message_id)
            else:
                self.emit(values, tup_id=message_id)
                offsets.done(row)  # at-most-once: done when emitted; effectively once: saved
                self._dirty = True
            return True

    def _exhausted(self) -> bool:
        if self._pending or self._replay or self._current or self._queue:
            return False
        first = self._first_listing or set()
        return all(self._offsets.get(n) is not None and self._offsets[n].finished
                   for n in first)

    def ack(self, tup_id):
        """Mark the row done; its file's offset moves once every row before it is done."""
        if self._pending.pop(tup_id, None) is not None:
            self._offsets[tup_id[0]].done(tup_id[1])
            self._dirty = True

    def fail(self, tup_id):
        """Queue the row for replay."""
        if tup_id in self._pending:
            self._replay.append(tup_id)

    def close(self):
        """Commit the offsets."""
        self._commit()

    def _commit(self) -> None:
        self._saved.save({"files": {name: o.to_state() for name, o in self._offsets.items()}})
        self._dirty = False


__all__ = ["FileSource", "Offsets", "list_files", "read_rows"]
