"""Checkpoint barriers for effectively once: align markers per local bolt task.

Each upstream task sends a CHECKPOINT_MARKER to every downstream task after the tuples that
belong to the checkpoint. A task's state may be saved only once the marker came from every
one of its upstream tasks (Chandy-Lamport with aligned barriers, as Heron's stmgr does): from
the moment an upstream task's marker arrives, its later frames for that task are held back;
when the last upstream's marker arrives, the task gets one marker, then the held frames in
arrival order. ``alignment_secs`` keeps, per task, how long its last checkpoint's alignment
took (first marker to last). No I/O: the stmgr core gives frames in and a ``deliver`` callable
out.
"""

from __future__ import annotations

import time
from typing import Callable

from heron_spark.wire import frames

_MARKER = frames.CHECKPOINT_MARKER
_data_head = frames.DATA_HEAD.unpack_from
_PREFIX_BYTES = frames.PREFIX_BYTES


class CheckpointGateway:
    """See the module docstring. ``upstream``: local bolt task -> tasks that feed it."""

    def __init__(self, upstream: dict[int, frozenset[int]],
                 deliver: Callable[[int, bytes | bytearray, int], bool],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.upstream = upstream
        self._deliver = deliver
        self._clock = clock
        # task -> (checkpoint, arrived, first marker's time)
        self._aligning: dict[int, tuple[int, set[int], float]] = {}
        self.alignment_secs: dict[int, float] = {}  # task -> its last checkpoint's alignment
        self._held: dict[int, list[tuple[bytes | bytearray, int]]] = {}
        self.held_frames = 0

    def offer(self, task: int, frame: bytes | bytearray, rows: int) -> bool:
        """Deliver ``frame`` (a DATA frame for local ``task``) now or hold it.

        Return False when delivery failed (the task is not connected).
        """
        kind, src, _, _, stream_length = _data_head(frame, _PREFIX_BYTES)
        aligning = self._aligning.get(task)
        if aligning is not None and src in aligning[1]:
            self._held.setdefault(task, []).append((frame, rows))
            self.held_frames += 1
            return True
        if kind != _MARKER:
            return self._deliver(task, frame, rows)
        checkpoint = int(frames.data_stream(frame, stream_length))
        if aligning is None or aligning[0] != checkpoint:
            aligning = self._aligning[task] = (checkpoint, set(), self._clock())
        aligning[1].add(src)
        if not aligning[1] >= self.upstream.get(task, frozenset()):
            return True
        del self._aligning[task]
        self.alignment_secs[task] = self._clock() - aligning[2]
        delivered = self._deliver(task, frame, 0)
        held = self._held.pop(task, [])
        self.held_frames -= len(held)
        for held_frame, held_rows in held:
            self.offer(task, held_frame, held_rows)
        return delivered

    def reset(self) -> None:
        """Forget every alignment and held frame (a restore drops what is in flight)."""
        self._aligning.clear()
        self._held.clear()
        self.held_frames = 0
