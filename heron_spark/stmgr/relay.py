"""The stream manager's data path: DATA frames passed on untouched, and what they add up to.

Instances partition their output per destination task (``plan.grouping``); the relay reads a
DATA frame's fixed head and passes the frame on as it is, to the local instance or the peer
stmgr of its destination. Under effectively once a local bolt's frames go through the
checkpoint gateway (``gateway``: markers aligned per task), and the relay drops what belongs
to a rolled-back epoch: DATA from a local instance until it reported that it restored the
current epoch, DATA from a peer until that peer's fence of the current epoch (the filter's
state: ``epoch``, ``restoring``, ``restored_tasks``, ``peer_epochs``; moved by
``epochs.Epochs``).

It also keeps the counts the stmgr acts on and reports: Heron's ``__server/*`` traffic, the
tuples handed to each local bolt and how many it executed (their difference waits in queues
for it, dated by marks), and each local spout's routed tuples, told to the spout with its
gate (``SpoutGate``) every quarter of the tuple high water mark. No I/O: frames leave through
the core's transport. The stmgr's loop thread only; the DATA path does no more per frame than
its head read, its counters and one send.
"""

from __future__ import annotations

import collections
import logging
from typing import Callable

from heron_spark.proto import stmgr_pb2
from heron_spark.stmgr.gateway import CheckpointGateway
from heron_spark.stmgr.transport import StmgrTransport
from heron_spark.wire import frames

log = logging.getLogger(__name__)
_EOS = frames.END_OF_STREAM
_data_head = frames.DATA_HEAD.unpack_from
_PREFIX_BYTES = frames.PREFIX_BYTES


class Relay:
    """See the module docstring. ``connected`` is the core's set of connected local tasks."""

    def __init__(self, index: int, task_container: dict[int, int], local_tasks: frozenset[int],
                 spout_tasks: frozenset[int], routed_step: int, transport: StmgrTransport,
                 clock: Callable[[], float]) -> None:
        self.index = index
        self.io = transport
        self.clock = clock
        self.spout_tasks = spout_tasks
        self._task_container = task_container
        self.connected: set[int] = set()  # local tasks with a live connection
        self.gateway: CheckpointGateway | None = None  # effectively once: set by the core
        self.ended_sources: set[int] = set()  # tasks whose END_OF_STREAM went out or came in
        self.tuples_routed = 0
        # Heron's __server/* traffic counters (tuples and frame bytes, DATA frames only)
        self.tuples_from_workers = self.bytes_from_workers = 0
        self.tuples_to_workers = self.bytes_to_workers = 0
        self.tuples_from_stmgrs = self.bytes_from_stmgrs = 0
        self.tuples_dropped = 0  # tuples for a local instance that was not connected
        # Tuples handed to each local bolt, and how many it executed: their difference is
        # what waits in queues for it; marks (tuples sent so far, when) date the oldest.
        self.sent_tuples: collections.Counter = collections.Counter()
        self.executed_tuples: collections.Counter = collections.Counter()
        self._sent_marks: dict[int, collections.deque] = {
            t: collections.deque() for t in local_tasks}
        self.gate_paused = False  # what local spouts were last told (backpressure)
        self.routed_from: collections.Counter = collections.Counter()  # local spouts' tuples
        self._routed_reported: collections.Counter = collections.Counter()
        self._routed_step = routed_step
        # The epoch filter (effectively once)
        self.epoch = 0
        self.restoring = False
        self.restored_tasks: set[int] = set()  # local tasks that restored ``epoch``
        self.peer_epochs: dict[int, int] = {}  # container -> the epoch of its last fence
        self.frames_dropped_in_restore = 0

    def from_instance(self, task: int, frame: bytes | bytearray) -> None:
        """Pass a local instance's batch on to its destination task, without decoding it."""
        if self.restoring and task not in self.restored_tasks:
            self.frames_dropped_in_restore += 1  # sent before it restored: the old epoch's
            return
        kind, src, dest, rows, _ = _data_head(frame, _PREFIX_BYTES)
        self.tuples_from_workers += rows
        self.bytes_from_workers += len(frame)
        if dest not in self._task_container:
            log.error("task %d sent a batch for unknown task %d; dropped", src, dest)
            self.tuples_dropped += rows
            return
        self.tuples_routed += rows
        if src in self.spout_tasks:
            self._count_routed(src, rows)
        self.send_to_task(dest, frame, rows)

    def from_peer(self, frame: bytes | bytearray) -> None:
        """Deliver a peer stmgr's DATA frame to its local destination task."""
        data_kind, src, dest, rows, _ = _data_head(frame, _PREFIX_BYTES)
        self.tuples_from_stmgrs += rows
        self.bytes_from_stmgrs += len(frame)
        # An unknown task maps to container -1, which never sent a fence: its frame drops.
        # A frame behind the peer's fence of our epoch is the new epoch's, even before our
        # resume: the TMaster resumed the peer's spouts, so every task here has restored.
        if self.gateway is not None and \
                self.peer_epochs.get(self._task_container.get(src, -1)) != self.epoch:
            self.frames_dropped_in_restore += 1  # sent before its stmgr's epoch fence
            return
        if data_kind == _EOS:
            self.ended_sources.add(src)
        if not self.deliver_local(dest, frame, rows):
            self.tuples_dropped += rows

    def send_to_task(self, task: int, frame: bytes | bytearray, rows: int = 0) -> None:
        """Send ``frame`` (``rows`` tuples) to ``task``, here or through its container's stmgr."""
        container = self._task_container[task]
        if container != self.index:
            self.io.to_peer(container, frame)
        elif not self.deliver_local(task, frame, rows):
            self.tuples_dropped += rows  # at-least-once replays them; at-most-once loses them

    def deliver_local(self, task: int, frame: bytes | bytearray, rows: int = 0) -> bool:
        """Send ``frame`` (``rows`` tuples) to a local instance; False when it is not connected.

        Under effectively once the frame goes through the checkpoint gateway. An instance that
        is not connected is restarting.
        """
        if self.gateway is not None and task not in self.spout_tasks:
            return self.gateway.offer(task, frame, rows)
        return self.deliver_now(task, frame, rows)

    def deliver_now(self, task: int, frame: bytes | bytearray, rows: int = 0) -> bool:
        """Hand ``frame`` to local ``task`` now (no gateway); False when it is not connected."""
        if task not in self.connected or not self.io.to_instance(task, frame):
            return False
        self.tuples_to_workers += rows
        self.bytes_to_workers += len(frame)
        if rows:
            sent = self.sent_tuples[task] = self.sent_tuples[task] + rows
            self._sent_marks[task].append((sent, self.clock()))
        return True

    def progress(self, task: int, executed: int) -> None:
        """Note that local ``task`` has executed ``executed`` tuples since it started."""
        self.executed_tuples[task] = executed
        marks = self._sent_marks[task]
        while marks and marks[0][0] <= executed:
            marks.popleft()

    def queued_tuples(self, task: int) -> int:
        """Tuples handed to local ``task`` that it has not executed yet."""
        return self.sent_tuples[task] - self.executed_tuples[task]

    def queue_age_secs(self, task: int, now: float) -> float:
        """How long the oldest tuple waiting for local ``task`` has waited."""
        marks = self._sent_marks[task]
        return now - marks[0][1] if marks else 0.0

    def reset_queue(self, task: int) -> None:
        """Forget what was queued for ``task``'s old instance: a (re)started one holds nothing yet."""
        self.sent_tuples[task] = self.executed_tuples[task] = 0
        self.routed_from[task] = self._routed_reported[task] = 0
        self._sent_marks[task].clear()

    def _count_routed(self, spout: int, rows: int) -> None:
        """Count a local spout's routed tuples; tell it every quarter of the tuple high mark.

        That way the spout never has more than the mark on its way here.
        """
        routed = self.routed_from[spout] = self.routed_from[spout] + rows
        if routed - self._routed_reported[spout] >= self._routed_step:
            self.send_gate(spout)

    def send_gate(self, spout: int) -> None:
        """Tell local ``spout`` whether it may emit, and how many of its tuples were routed."""
        if spout in self.connected:
            self._routed_reported[spout] = self.routed_from[spout]
            self.io.to_instance(spout, frames.control_frame(stmgr_pb2.StmgrToInstance(
                gate=stmgr_pb2.SpoutGate(paused=self.gate_paused,
                                         routed=self.routed_from[spout]))))
