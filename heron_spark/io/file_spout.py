"""A replayable spout over text files: lines with positions, message ids, committed offsets.

Each line is emitted as ``(line, position)`` with message id ``(file index, line number)``;
``position`` is ``"<file name>:<line number>"``, so downstream code can de-duplicate replays.
Files are shared out by line number: task ``k`` of ``n`` emits the lines with
``line_number % n == k``. A failed or timed-out line is emitted again. Acked lines move a
per-file watermark (first line not yet acked, and its byte offset) that is committed to the
state manager every ``commit_interval_secs`` and when the spout ends, together with the acked
lines beyond it; a restarted task seeks to the watermark and skips those lines, so a topology
resumes where acked work ended. The spout declares itself exhausted once every line of every
file has been acked. Runs in a Heron Instance. Under at-most-once nothing is acked: a line
counts as done once emitted, and a restart resumes after the last committed emitted line.
Under effectively once the offsets are part of each checkpoint instead (``init_state`` /
``pre_save``): after a failure the spout rewinds to the lines emitted before the checkpoint.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import BinaryIO

from heron_spark.api.spout import Spout
from heron_spark.api.state import StatefulComponent
from heron_spark.api.stream import Stream
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.errors import TopologyValueError
from heron_spark.io._offset_store import OffsetStore

PATH = "file.spout.path"
PATTERN = "file.spout.pattern"
LINES_PER_CALL = "file.spout.lines.per.call"
COMMIT_INTERVAL_SECS = "file.spout.commit.interval.secs"


class _File:
    """Read position and acking watermark of one file, for one task."""

    def __init__(self, path: Path, state: dict | None) -> None:
        self.path = path
        state = state or {}
        self.next_unacked = int(state.get("next_unacked", 0))  # watermark: line number ...
        self.unacked_offset = int(state.get("offset", 0))      # ... and its byte offset
        self.acked_beyond: set[int] = set(state.get("acked_beyond", ()))
        self.handle: BinaryIO | None = None
        self.read_line = self.next_unacked       # number of the next line to read
        self.offsets: dict[int, int] = {}        # byte offset of lines read but not acked
        self.resumed_skip = set(self.acked_beyond)  # acked before a restart: do not emit
        self.finished = False                    # read to the end

    def state(self) -> dict:
        return {"next_unacked": self.next_unacked, "offset": self.unacked_offset,
                "acked_beyond": sorted(self.acked_beyond)}

    def read(self) -> tuple[int, str] | None:
        """Return the next (line number, text) or None at the end of the file."""
        if self.handle is None:
            self.handle = open(self.path, "rb")  # noqa: SIM115 - kept open across calls
            self.handle.seek(self.unacked_offset)
        offset = self.handle.tell()
        raw = self.handle.readline()
        if not raw:
            self.finished = True
            return None
        number = self.read_line
        self.read_line += 1
        self.offsets[number] = offset
        return number, raw.decode("utf-8", errors="replace").rstrip("\r\n")

    def ack(self, number: int) -> None:
        self.acked_beyond.add(number)
        while self.next_unacked in self.acked_beyond:
            self.acked_beyond.discard(self.next_unacked)
            self.offsets.pop(self.next_unacked, None)
            self.next_unacked += 1
        if self.next_unacked in self.offsets:
            self.unacked_offset = self.offsets[self.next_unacked]
        elif self.next_unacked == self.read_line and self.handle is not None:
            self.unacked_offset = self.handle.tell()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


class FileSpout(Spout, StatefulComponent):
    """See the module docstring. Configure with ``FileSpout.spec(path=..., ...)``."""

    outputs = [Stream(fields=["line", "position"])]

    @staticmethod
    def settings(path: str, pattern: str = "*", lines_per_call: int = 64,
                 commit_interval_secs: float = 0.2, component: str | None = None) -> dict:
        """Return the component config reading ``path`` (a file, or ``pattern`` in a folder).

        Use it as ``config=`` of ``TopologyBuilder.add_spout``, or through ``spec``.
        """
        if not path:
            msg = "FileSpout needs a path"
            raise TopologyValueError(msg, component=component, value=path,
                                     kind="config", fix="pass path='/data/file.txt' or a folder")
        return {PATH: str(path), PATTERN: pattern, LINES_PER_CALL: int(lines_per_call),
                COMMIT_INTERVAL_SECS: float(commit_interval_secs)}

    @classmethod
    def spec(cls, name=None, par=1, inputs=None, config=None, optional_outputs=None, *,
             path: str = "", **settings):
        """Return a spec reading ``path``; ``settings`` as in ``FileSpout.settings``."""
        config = dict(config or {})
        if path or PATH not in config:  # TopologyBuilder passes settings() through config
            config.update(cls.settings(path, component=name, **settings))
        return super().spec(name=name, par=par, inputs=inputs, config=config,
                            optional_outputs=optional_outputs)

    _checkpointed = None  # effectively once: the task's State (set by init_state)

    def init_state(self, stateful_state) -> None:
        """Keep the checkpointed state (effectively once): offsets live there."""
        self._checkpointed = stateful_state

    def pre_save(self, checkpoint_id) -> None:
        """Write the acked offsets into the state before the checkpoint saves it."""
        self._commit()

    def initialize(self, config, context):
        """Open the files under ``file.spout.path`` and resume from their committed offsets."""
        root = Path(config[PATH])
        paths = [root] if root.is_file() else sorted(p for p in root.glob(config.get(PATTERN, "*"))
                                                     if p.is_file())
        if not paths:
            msg = f"FileSpout {context.get_component_id()}: no files at {root}"
            raise FileNotFoundError(msg)
        self._saved = OffsetStore(self, self._checkpointed, "file_spout",
                                  float(config.get(COMMIT_INTERVAL_SECS, 0.2)))
        saved = self._saved.load()
        self._files = [_File(p, saved.get("files", {}).get(p.name)) for p in paths]
        self._tasks = context.get_component_parallelism(context.get_component_id())
        self._index = context.get_task_index()
        self._per_call = int(config.get(LINES_PER_CALL, 64))
        self._acked_total = int(saved.get("acked_total", 0))
        self._pending: dict[tuple[int, int], str] = {}
        self._replay: collections.deque = collections.deque()
        self._reliable = TopologyConfig.from_config(config).at_least_once
        self._current = 0
        self._dirty = False

    def next_tuple(self):
        """Emit up to a batch of lines: replays of failed lines first, then new ones."""
        emitted = 0
        while emitted < self._per_call:
            if self._replay:
                message_id = self._replay.popleft()
                self._emit(message_id, self._pending[message_id])
                emitted += 1
                continue
            item = self._read_own_line()
            if item is None:
                break
            emitted += 1
        self._maybe_commit()
        if emitted == 0 and not self._pending and not self._replay and self._all_read():
            self._commit()
            self.declare_exhausted()

    def _read_own_line(self) -> tuple | None:
        while self._current < len(self._files):
            file = self._files[self._current]
            item = file.read()
            if item is None:
                self._current += 1
                continue
            number, text = item
            if number % self._tasks != self._index:
                file.ack(number)  # another task's line: not ours to track
                continue
            if number in file.resumed_skip:
                file.resumed_skip.discard(number)
                continue  # acked before a restart, already beyond the watermark
            message_id = (self._current, number)
            if self._reliable:
                self._pending[message_id] = text
            self._emit(message_id, text)
            if not self._reliable:
                self._done(message_id)
            return message_id
        return None

    def _emit(self, message_id: tuple[int, int], text: str) -> None:
        file = self._files[message_id[0]]
        self.emit([text, f"{file.path.name}:{message_id[1]}"], tup_id=message_id)

    def _all_read(self) -> bool:
        return self._current >= len(self._files)

    def ack(self, tup_id):
        """Mark the line done; its offset is committed once every line before it is."""
        if self._pending.pop(tup_id, None) is not None:
            self._done(tup_id)

    def _done(self, tup_id: tuple[int, int]) -> None:
        self._files[tup_id[0]].ack(tup_id[1])
        self._acked_total += 1
        self._dirty = True

    def fail(self, tup_id):
        """Queue the line for replay."""
        if tup_id in self._pending:
            self._replay.append(tup_id)

    def close(self):
        """Commit the acked offsets and close the files."""
        self._commit()
        for file in self._files:
            file.close()

    def _maybe_commit(self) -> None:
        if self._dirty and self._saved.due():
            self._commit()

    def _commit(self) -> None:
        self._saved.save({"files": {f.path.name: f.state() for f in self._files},
                          "acked_total": self._acked_total})
        self._dirty = False
