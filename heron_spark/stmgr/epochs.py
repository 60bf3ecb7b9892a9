"""Effectively once in the stream manager: checkpoint epochs, restores and fences.

The TMaster starts each checkpoint at the local spouts (their markers then flow downstream
behind their tuples and are aligned per local bolt by ``gateway.CheckpointGateway``). On a
restore it names a new epoch and the checkpoint to roll back to: the stmgr forgets every
alignment and held frame, tells each peer with an ``EpochFence`` that everything it sends
from now on is of the new epoch, and drops what is in flight (the relay's epoch filter,
``relay.Relay``): DATA from each local instance until it reported that it restored the new
epoch, DATA from each peer until that peer's fence. Not until the TMaster's resume: a peer
that got the resume first may already send the new epoch's tuples, and they must not be lost.
No I/O: frames leave through the core's transport. The stmgr's loop thread only.
"""

from __future__ import annotations

import logging

from heron_spark.proto import stmgr_pb2, tmaster_pb2
from heron_spark.stmgr.gateway import CheckpointGateway
from heron_spark.stmgr.relay import Relay
from heron_spark.stmgr.transport import StmgrTransport
from heron_spark.wire import frames

log = logging.getLogger(__name__)


class Epochs:
    """See the module docstring.

    ``upstream`` (local bolt task -> the tasks that feed it) is given under effectively once
    only: otherwise there is no gateway, and no fences go out.
    """

    def __init__(self, index: int, upstream: dict[int, frozenset[int]] | None, relay: Relay,
                 transport: StmgrTransport) -> None:
        self.index = index
        self.relay = relay
        self.io = transport
        self.gateway: CheckpointGateway | None = None
        if upstream is not None:
            self.gateway = relay.gateway = CheckpointGateway(upstream, relay.deliver_now)
        self.restore_checkpoint = 0

    def begin_restore(self, restore: tmaster_pb2.RestoreState) -> None:
        """Enter ``restore``'s epoch: drop alignments, held frames and ended sources.

        The core then resets its queues, reads every spout and sends the fences.
        """
        log.info("restoring checkpoint %d in epoch %d", restore.checkpoint_id, restore.epoch)
        relay = self.relay
        relay.epoch, self.restore_checkpoint = restore.epoch, restore.checkpoint_id
        relay.restoring = True
        relay.restored_tasks = set()
        assert self.gateway is not None  # the TMaster restores only effectively-once topologies
        self.gateway.reset()
        relay.ended_sources.clear()

    def restored(self, task: int, epoch: int) -> None:
        """Note that local ``task`` restored ``epoch``: its DATA passes again if it is current."""
        if epoch == self.relay.epoch:
            self.relay.restored_tasks.add(task)

    def resume(self, epoch: int) -> bool:
        """End the restore if ``epoch`` is the current one; return whether it was."""
        if epoch != self.relay.epoch:
            return False
        self.relay.restoring = False
        return True

    def fenced(self, container: int, epoch: int) -> None:
        """Note a peer's fence: what it sends from now on is of ``epoch``."""
        self.relay.peer_epochs[container] = epoch

    def send_fences(self, peers: list[int]) -> None:
        """Tell every peer that everything this stmgr sends from now on is of the current epoch."""
        if self.gateway is None:
            return
        fence = frames.control_frame(stmgr_pb2.StmgrToStmgr(
            fence=stmgr_pb2.EpochFence(container_index=self.index, epoch=self.relay.epoch)))
        for container in peers:
            self.io.to_peer(container, fence)
