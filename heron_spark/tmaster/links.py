"""The TMaster core's ``TMasterTransport`` in the driver: connections and the state manager.

The core calls ``Links`` under the TMaster's lock; every call returns at once. Frames go out
on the stmgrs' connections then and there (a send only queues); what may block waits for the
end of the event, when the TMaster (``tmaster.master``) has released its lock: closing
connections (``to_close``), restarting the stage (``recoveries``) and every state-manager
write and checkpoint deletion (``writes``, run in order by ``run_writes``).
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import TYPE_CHECKING, Callable

from heron_spark.contract import execution_state
from heron_spark.contract.topology_view import CommittedCheckpoint
from heron_spark.proto import physical_plan_pb2, tmaster_pb2
from heron_spark.statemgr.base import StateManager
from heron_spark.statemgr.checkpoints import CheckpointStore
from heron_spark.wire.connection import Connection, ConnectionClosed

if TYPE_CHECKING:
    from heron_spark.tmaster.live_queries import FileFetcher

log = logging.getLogger(__name__)


def send(conn: Connection, frame: bytes) -> bool:
    """Send ``frame`` on ``conn``; return False if the connection has closed."""
    try:
        conn.send(frame)
    except ConnectionClosed:
        return False
    return True


class Links:
    """See the module docstring. ``stmgrs`` maps a container index to its stmgr's connection.

    ``stmgrs``, ``to_close`` and ``recoveries`` are the TMaster's, under its lock; ``writes``
    is appended under it and run outside it (``run_writes``, thread-safe, in order).
    """

    def __init__(self, name: str, statemgr: StateManager,
                 checkpoint_store: CheckpointStore | None, files: "FileFetcher") -> None:
        self.name = name
        self.statemgr = statemgr
        self.checkpoint_store = checkpoint_store
        self.files = files
        self.stmgrs: dict[int, Connection] = {}
        self.to_close: list[Connection] = []
        self.recoveries: list[str] = []
        self.writes: collections.deque[Callable[[], None]] = collections.deque()
        self._writing = threading.Lock()

    def to_stmgr(self, index: int, frame: bytes) -> None:
        """Send ``frame`` to container ``index``'s stmgr (dropped if not connected)."""
        conn = self.stmgrs.get(index)
        if conn is not None:
            send(conn, frame)

    def to_stmgrs(self, frame: bytes) -> None:
        """Send ``frame`` to every connected stmgr."""
        for conn in list(self.stmgrs.values()):
            send(conn, frame)

    def drop_stmgr(self, index: int) -> None:
        """Forget container ``index``'s stmgr; close its connection after the event."""
        conn = self.stmgrs.pop(index, None)
        if conn is not None:
            self.to_close.append(conn)

    def recover(self, reason: str) -> None:
        """Restart the stage after the event (the scheduler's ``recover``)."""
        self.recoveries.append(reason)

    def save_plan(self, plan: physical_plan_pb2.PhysicalPlan) -> None:
        """Store the physical plan after the event."""
        copy = physical_plan_pb2.PhysicalPlan()
        copy.CopyFrom(plan)  # the core goes on changing its own under the lock
        self.writes.append(lambda: self.statemgr.set_physical_plan(self.name, copy))

    def save_state(self, state: execution_state.ExecutionState) -> None:
        """Store the execution state after the event."""
        self.writes.append(lambda: self.statemgr.set_execution_state(self.name, state))

    def checkpoint_committed(self, checkpoint_id: int, epoch: int, at: float,
                             notice: bytes) -> None:
        """After the event: record the committed checkpoint, tell the stmgrs, delete older ones.

        The stmgrs connected now get ``notice`` once the record is written (a stmgr that joins
        later learns the committed checkpoint from its restore or start).
        """
        store = self.checkpoint_store
        assert store is not None  # a core has checkpoints only under effectively once
        record = CommittedCheckpoint(checkpoint_id, epoch, store.root, at)
        conns = list(self.stmgrs.values())
        self.writes.append(lambda: self._commit(store, record, conns, notice))

    def _commit(self, store: CheckpointStore, record: CommittedCheckpoint,
                conns: list[Connection], notice: bytes) -> None:
        self.statemgr.set_committed_checkpoint(self.name, record.as_dict())
        for conn in conns:  # Connection.send only queues, from any thread
            send(conn, notice)
        try:
            store.retain(record.id)
        except Exception as exc:  # noqa: BLE001 - cleaning up old checkpoints is best effort
            log.warning("could not delete checkpoints older than %d: %s", record.id, exc)

    def file_response(self, response: tmaster_pb2.FileResponse) -> None:
        """Complete the tracker's file request ``response`` answers."""
        self.files.on_response(response)

    def run_writes(self) -> None:
        """Run the queued writes in the order they were queued (outside the TMaster's lock).

        Whoever holds ``_writing`` runs every write queued so far, its callers' included, so
        a caller returns only once its own writes are done.
        """
        with self._writing:
            while self.writes:
                write = self.writes.popleft()
                try:
                    write()
                except Exception as exc:  # noqa: BLE001 - one failed write must not stop the rest
                    log.error("TMaster of %s: a state manager write failed: %s", self.name, exc)
