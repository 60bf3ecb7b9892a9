"""A task's background uploader: checkpoints leave the task's thread as local snapshots.

The task's loop thread ``submit``s a job per checkpoint (a callable that writes the snapshot
to the checkpoint store) and, on each of its turns, takes the ``finished`` ones; the uploader's
own thread runs the jobs in order. Shared between the two threads through two bounded queues
only (``heron.checkpoint.upload.queue.checkpoints`` jobs waiting; a full queue holds the next
checkpoint on the task's thread until an upload ends). The thread wakes the task's loop
(``wake``) after each job, so the task reports a save as soon as its upload is done.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable

Job = Callable[[], None]
Finished = tuple[int, BaseException | None]


class Uploader:
    """Runs one task's upload jobs on a thread of its own (see the module docstring)."""

    def __init__(self, capacity: int, name: str, wake: Callable[[], None] | None = None) -> None:
        self._jobs: queue.Queue[tuple[int, Job] | None] = queue.Queue(maxsize=capacity)
        # At most capacity jobs wait and one runs: their results always fit, so the thread
        # never blocks on a full results queue while the task blocks on a full jobs queue.
        self._done: queue.Queue[Finished] = queue.Queue(maxsize=capacity + 1)
        self._wake = wake
        self._name = name
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self.pending = 0  # submitted, not yet taken back with ``finished`` (loop thread)

    def submit(self, checkpoint_id: int, job: Job) -> None:
        """Queue ``job`` for ``checkpoint_id``; block while the queue is full (loop thread)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self.pending += 1
        self._jobs.put((checkpoint_id, job))

    def finished(self) -> list[Finished]:
        """Return the jobs done since the last call, in order, with their error (loop thread)."""
        done = []
        while True:
            try:
                done.append(self._done.get_nowait())
            except queue.Empty:
                break
        self.pending -= len(done)
        return done

    def close(self) -> None:
        """Stop after the job that runs (idempotent): jobs not started are dropped."""
        self._closed.set()
        while True:
            try:
                self._jobs.get_nowait()
            except queue.Empty:
                break
        try:
            self._jobs.put_nowait(None)
        except queue.Full:
            pass

    def _run(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None or self._closed.is_set():
                return
            checkpoint_id, job = item
            error: BaseException | None = None
            try:
                job()
            except BaseException as exc:  # noqa: BLE001 - handed to the task's thread
                error = exc
            self._done.put((checkpoint_id, error))
            if self._wake is not None:
                self._wake()
