"""One in-memory transport for cores that share a process: the TMaster's and every stmgr's.

The in-process runner (``runner.InProcessTopology``) and the control-plane simulator
(``control_plane.ControlPlaneSim``) join the same cores the same way; they differ only in
what stands for the instances (``InstanceEnds``: the runner's executors, or the simulator's
counter) and whether every frame is counted (``Traffic``, the simulator's).

- ``Wires``: the channels. Frames between stmgr cores wait in one FIFO queue per (from, to)
  pair, as a socket would hold them, until ``deliver_peers``; a stmgr core's frames to the
  TMaster go straight in (``from_stmgr``); the TMaster core's frames to the stmgr cores wait in
  one FIFO queue and are delivered when its event returns (``tmaster_call``) or by
  ``deliver_tmaster``, so no stmgr core handles a TMaster frame inside the TMaster's own call.
- ``StmgrLink``: a stmgr core's ``StmgrTransport`` over the wires.
- ``TMasterLink``: the TMaster core's ``TMasterTransport`` over the wires; it records what
  a real TMaster would store or act on (plans saved, stmgrs dropped, recoveries asked).

Everything runs on the caller's thread.
"""

from __future__ import annotations

import collections
import time
from typing import Callable, Protocol

from heron_spark.contract.execution_state import ExecutionState
from heron_spark.proto import physical_plan_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.stmgr.core import StmgrCore
from heron_spark.tmaster.core import TMasterCore
from heron_spark.wire import frames

_PREFIX_BYTES = frames.PREFIX_BYTES
_unpack_prefix = frames.PREFIX.unpack_from


def as_frame(frame) -> tuple[int, bytes]:
    """Return (kind, the frame as one bytes object) of what an executor or core sent."""
    if type(frame) is list:
        frame = b"".join(frame)
    elif type(frame) is not bytes:
        frame = bytes(frame)
    return _unpack_prefix(frame, 0)[1], frame


def body_name(frame: bytes, message_class) -> str:
    """Name a control frame's message body (``data`` for a DATA frame)."""
    if _unpack_prefix(frame, 0)[1] != frames.CONTROL:
        return "data"
    message = message_class()
    message.ParseFromString(memoryview(frame)[_PREFIX_BYTES:])
    return str(message.WhichOneof("body"))


class Traffic:
    """Frames and payload bytes (without the frame prefix) per channel name."""

    def __init__(self) -> None:
        self.frames: collections.Counter = collections.Counter()
        self.bytes: collections.Counter = collections.Counter()

    def add(self, channel: str, frame: bytes) -> None:
        """Count one ``frame`` (prefix included in ``frame``) on ``channel``."""
        self.frames[channel] += 1
        self.bytes[channel] += len(frame) - _PREFIX_BYTES

    def snapshot(self) -> dict[str, tuple[int, int]]:
        """Return channel -> (frames, bytes) so far."""
        return {c: (self.frames[c], self.bytes[c]) for c in self.frames}


class FrameQueue:
    """Frames on their way to one receiver, and their bytes (what a socket would hold)."""

    __slots__ = ("frames", "bytes")

    def __init__(self) -> None:
        self.frames: collections.deque = collections.deque()
        self.bytes = 0

    def put(self, frame) -> None:
        """Queue ``frame`` (bytes, or a list of buffers as a shell would write them)."""
        kind, data = as_frame(frame)
        self.frames.append((kind, data))
        self.bytes += len(data)

    def get(self) -> tuple[int, bytes]:
        """Take the oldest frame: (kind, frame)."""
        kind, data = self.frames.popleft()
        self.bytes -= len(data)
        return kind, data


class InstanceEnds(Protocol):
    """What stands for a stmgr core's local instances."""

    def offer(self, task: int, frame) -> bool:
        """Hand ``frame`` to local ``task``; False when it is not running."""

    def set_reading(self, task: int, reading: bool) -> None:
        """Stop or resume taking ``task``'s frames (a paused spout's wait)."""

    def queued_bytes(self, task: int) -> int:
        """Bytes waiting for ``task``."""


class Wires:
    """The channels between one TMaster core and ``containers`` stmgr cores; see the module.

    ``cores`` and ``tmaster`` are set once they are built (each is built with its link).
    ``tmaster_cpu_secs`` adds up the thread CPU time spent inside the TMaster core's events.
    """

    def __init__(self, containers: int, clock: Callable[[], float],
                 traffic: Traffic | None = None) -> None:
        self.clock = clock
        self.traffic = traffic
        self.cores: list[StmgrCore] = []
        self.tmaster: TMasterCore | None = None
        self.peer_queues = {(a, b): FrameQueue() for a in range(containers)
                            for b in range(containers) if a != b}
        self.tmaster_frames: collections.deque = collections.deque()  # (stmgr index, frame)
        self.tmaster_cpu_secs = 0.0

    def tmaster_call(self, event, *args):
        """Run one TMaster core event, then deliver the frames it sent to the stmgr cores."""
        started = time.thread_time()
        try:
            return event(*args)
        finally:
            self.tmaster_cpu_secs += time.thread_time() - started
            self.deliver_tmaster()

    def from_stmgr(self, index: int, frame) -> None:
        """Hand what the stmgr core of container ``index`` sends its TMaster to the TMaster."""
        data = as_frame(frame)[1]
        message = tmaster_pb2.StmgrToTmaster()
        message.ParseFromString(memoryview(data)[_PREFIX_BYTES:])
        if self.traffic is not None:
            self.traffic.add(f"stmgr->tmaster:{message.WhichOneof('body')}", data)
        assert self.tmaster is not None  # built before any stmgr core has a frame for it
        self.tmaster_call(self.tmaster.on_stmgr_message, index, message, self.clock())

    def deliver_tmaster(self) -> bool:
        """Deliver the TMaster core's queued frames to their stmgr cores; return whether any."""
        queue = self.tmaster_frames
        moved = bool(queue)
        while queue:
            index, data = queue.popleft()
            if self.traffic is not None:
                self.traffic.add(f"tmaster->stmgr:{body_name(data, tmaster_pb2.TmasterToStmgr)}",
                                 data)
            self.cores[index].on_tmaster_frame(data)
        return moved

    def deliver_peers(self) -> bool:
        """Deliver every frame queued between stmgr cores, in order per pair; return whether any."""
        moved = False
        for (_, dest), queue in self.peer_queues.items():
            core = self.cores[dest]
            while queue.frames:
                kind, frame = queue.get()
                core.on_peer_frame(kind, frame)
                moved = True
        return moved

    def deliver(self) -> bool:
        """Deliver TMaster and peer frames until none is left; return whether any moved."""
        moved = False
        while self.deliver_tmaster() | self.deliver_peers():
            moved = True
        return moved


class StmgrLink:
    """The ``StmgrTransport`` of the stmgr core of container ``index`` over ``wires``."""

    def __init__(self, wires: Wires, index: int, instances: InstanceEnds, log_path: str) -> None:
        self.wires = wires
        self.index = index
        self.instances = instances
        self.log_path = log_path
        self.peers: set[int] = set()  # the containers a real stmgr would hold a link to
        self._out = [(dest, queue) for (src, dest), queue in wires.peer_queues.items()
                     if src == index]

    def to_instance(self, task: int, frame) -> bool:
        """Offer ``frame`` to local ``task``; False when it is not running."""
        return self.instances.offer(task, frame)

    def to_peer(self, container: int, frame) -> None:
        """Queue ``frame`` for the stmgr core of ``container``."""
        queue = self.wires.peer_queues[(self.index, container)]
        queue.put(frame)
        traffic = self.wires.traffic
        if traffic is not None:
            data = queue.frames[-1][1]
            traffic.add(f"stmgr->stmgr:{body_name(data, stmgr_pb2.StmgrToStmgr)}", data)

    def to_tmaster(self, frame) -> None:
        """Hand ``frame`` to the TMaster core at once."""
        self.wires.from_stmgr(self.index, frame)

    def serve_file(self, request: tmaster_pb2.FileRequest) -> None:
        """Never asked: no tracker in process."""

    def set_reading(self, task: int, reading: bool) -> None:
        """Stop or resume taking local ``task``'s frames."""
        self.instances.set_reading(task, reading)

    def instance_queued_bytes(self, task: int) -> int:
        """Bytes waiting for local ``task``."""
        return self.instances.queued_bytes(task)

    def peer_queued_bytes(self) -> int:
        """Bytes queued towards the most loaded peer stmgr core."""
        return max((queue.bytes for _, queue in self._out), default=0)

    def retarget_peers(self, addresses) -> None:
        """Note the peers: they are in this process, nothing to dial."""
        self.peers = set(addresses)

    def announce_stop(self) -> None:
        """Nothing to tell: no supervisor watches an in-process stmgr."""

    def failure_note(self, task: int) -> str | None:
        """None: a failed task reported its failure itself, before its queue closed."""
        return None

    def instance_log(self, task: int) -> str:
        """Return where ``task``'s log goes."""
        return self.log_path


class TMasterLink:
    """The TMaster core's ``TMasterTransport`` over ``wires``; see the module docstring.

    ``committed`` (optional) is told each committed checkpoint (effectively once).
    """

    def __init__(self, wires: Wires,
                 committed: Callable[[int, int, float], None] | None = None) -> None:
        self.wires = wires
        self._committed = committed
        self.saved_plans: list[int] = []  # bytes of each physical plan stored
        self.dropped: list[int] = []      # stmgrs the TMaster dropped, in order
        self.recoveries: list[str] = []   # why it asked for the stage to restart

    def to_stmgr(self, index: int, frame: bytes) -> None:
        """Queue ``frame`` for the stmgr core of container ``index``."""
        self.wires.tmaster_frames.append((index, as_frame(frame)[1]))

    def to_stmgrs(self, frame: bytes) -> None:
        """Queue ``frame`` for every stmgr core."""
        data = as_frame(frame)[1]
        for index in range(len(self.wires.cores)):
            self.wires.tmaster_frames.append((index, data))

    def drop_stmgr(self, index: int) -> None:
        """Record that the TMaster dropped the stmgr of container ``index``."""
        self.dropped.append(index)

    def recover(self, reason: str) -> None:
        """Record that the TMaster asked for the stage to restart, and why."""
        self.recoveries.append(reason)

    def save_plan(self, plan: physical_plan_pb2.PhysicalPlan) -> None:
        """Record the stored physical plan's size in bytes."""
        self.saved_plans.append(plan.ByteSize())

    def save_state(self, state: ExecutionState) -> None:
        """Nothing to store: no state manager in process."""

    def checkpoint_committed(self, checkpoint_id: int, epoch: int, at: float,
                             notice: bytes) -> None:
        """Tell ``committed`` (if given) that ``checkpoint_id`` of ``epoch`` committed at ``at``.

        Then queue ``notice`` for every stmgr core, as the driver's TMaster does once the
        commit is recorded.
        """
        if self._committed is not None:
            self._committed(checkpoint_id, epoch, at)
        self.to_stmgrs(notice)

    def file_response(self, response: tmaster_pb2.FileResponse) -> None:
        """Never asked: no tracker in process."""
