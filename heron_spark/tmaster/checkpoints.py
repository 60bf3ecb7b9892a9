"""Effectively once, the TMaster's side: start checkpoints, commit them, roll back on failure.

Heron's stateful processing, without I/O (``core.TMasterCore`` drives it, for the Spark
TMaster and the in-process runner alike): every ``interval`` the coordinator starts checkpoint
``n`` (the stmgrs pass it to their spouts, whose markers flow through the topology); once
every task reported its state saved, ``n`` is committed (``on_commit``: recorded in the state
manager, older checkpoints deleted). Any failure (a task, a stmgr, a container, the driver)
calls ``restore``: a new epoch begins, every task reloads the last committed checkpoint and
spouts hold; once every task restored the epoch, spouts resume. One checkpoint is in flight at
a time; one that does not complete within ``timeout`` is treated as a failure.
"""

from __future__ import annotations

import logging
from typing import Callable

from heron_spark.proto import tmaster_pb2

log = logging.getLogger(__name__)


class CheckpointCoordinator:
    """See the module docstring. ``send`` broadcasts a TmasterToStmgr to every stmgr.

    Times (``now``) are seconds of a monotonic clock the caller passes in; ``on_commit`` gets
    the checkpoint id, the epoch and the ``now`` of the commit.
    """

    def __init__(self, tasks: set[int], interval_secs: float, committed: int,
                 send: Callable[[tmaster_pb2.TmasterToStmgr], None],
                 on_commit: Callable[[int, int, float], None],
                 timeout_secs: float | None = None) -> None:
        self.tasks = frozenset(tasks)
        self.interval = interval_secs
        self.timeout = timeout_secs if timeout_secs is not None else max(60.0, 10 * interval_secs)
        self.committed = committed
        self.last_id = committed
        self._send = send
        self._on_commit = on_commit
        self.epoch = 0
        self.restoring = False
        self.restored: set[int] = set()
        self.in_flight: int | None = None
        self.stored: set[int] = set()
        self._started_at = 0.0
        self._next_due = float("inf")
        self.restores = 0
        self.restored_from: list[int] = []  # the checkpoint each restore went back to
        self.commits = 0
        self.last_commit_secs = 0.0  # how long the last committed checkpoint took
        self.commit_secs_total = 0.0
        self.commit_secs_max = 0.0

    def restore_message(self) -> tmaster_pb2.TmasterToStmgr:
        """Return the current epoch's restore message, for a stmgr that (re)joins."""
        return tmaster_pb2.TmasterToStmgr(restore=tmaster_pb2.RestoreState(
            epoch=self.epoch, checkpoint_id=self.committed))

    def restore(self, reason: str, broadcast: bool = True) -> tmaster_pb2.TmasterToStmgr:
        """Begin a new epoch that rolls every task back to the last committed checkpoint."""
        self.epoch += 1
        self.restores += 1
        self.restored_from = [*self.restored_from[-99:], self.committed]
        self.restoring = True
        self.restored = set()
        if self.in_flight is not None:
            log.info("checkpoint %d abandoned", self.in_flight)
        self.in_flight = None
        log.info("epoch %d: restoring checkpoint %d (%s)", self.epoch, self.committed, reason)
        message = self.restore_message()
        if broadcast:
            self._send(message)
        return message

    def on_restored(self, task: int, epoch: int, now: float) -> None:
        """Note that a task loaded the epoch's checkpoint; resume everyone once all have."""
        if not self.restoring or epoch != self.epoch:
            return
        self.restored.add(task)
        if self.restored >= self.tasks:
            self.restoring = False
            self._next_due = now + self.interval
            log.info("epoch %d: every task restored checkpoint %d; resuming", self.epoch,
                     self.committed)
            self._send(tmaster_pb2.TmasterToStmgr(resume=tmaster_pb2.ResumeProcessing(
                epoch=self.epoch)))

    def on_stored(self, task: int, checkpoint_id: int, now: float) -> None:
        """Note that a task saved its state; commit once every task has."""
        if checkpoint_id != self.in_flight or self.restoring:
            return
        self.stored.add(task)
        if self.stored >= self.tasks:
            self.committed = checkpoint_id
            self.commits += 1
            self.in_flight = None
            self.last_commit_secs = now - self._started_at
            self.commit_secs_total += self.last_commit_secs
            self.commit_secs_max = max(self.commit_secs_max, self.last_commit_secs)
            self._next_due = now + self.interval
            log.info("checkpoint %d committed in %.3f s", checkpoint_id, self.last_commit_secs)
            self._on_commit(checkpoint_id, self.epoch, now)

    def tick(self, now: float) -> None:
        """Start the next checkpoint when due; give up on one that takes too long."""
        if self.restoring:
            return
        if self.in_flight is not None:
            if now - self._started_at > self.timeout:
                self.restore(f"checkpoint {self.in_flight} incomplete after {self.timeout:g} s")
            return
        if now >= self._next_due:
            self.last_id += 1
            self.in_flight = self.last_id
            self.stored = set()
            self._started_at = now
            self._send(tmaster_pb2.TmasterToStmgr(checkpoint=tmaster_pb2.StartCheckpoint(
                checkpoint_id=self.in_flight)))

    def status(self) -> dict:
        """Return a JSON-ready summary."""
        return {"committed": self.committed, "epoch": self.epoch, "restoring": self.restoring,
                "in_flight": self.in_flight, "commits": self.commits, "restores": self.restores,
                "restored_from": list(self.restored_from),
                "last_commit_secs": round(self.last_commit_secs, 3),
                "commit_secs_mean": round(self.commit_secs_total / max(1, self.commits), 4),
                "commit_secs_max": round(self.commit_secs_max, 4),
                "waiting_for": sorted(self.tasks - (self.restored if self.restoring
                                                    else self.stored if self.in_flight
                                                    else self.tasks))}
