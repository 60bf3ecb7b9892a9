"""Spout backpressure with hysteresis, and the time spent in it.

A stmgr is *congested* when a send queue towards a local instance or a peer stmgr holds more
bytes than the high water mark, or a local bolt has more tuples waiting for it (handed over,
not yet executed) than the high water mark in tuples; it stays congested until every queue is
below both low water marks. While any stmgr of the topology is congested, every stmgr stops
reading from its local spouts and tells them to stop emitting. ``Backpressure`` is the state
(hysteresis, the time spent); ``SpoutGate`` acts on it. Used by the stmgr's routing thread only.
"""

from __future__ import annotations

import logging
import time

from heron_spark.proto import stmgr_pb2
from heron_spark.stmgr.relay import Relay
from heron_spark.stmgr.transport import StmgrTransport
from heron_spark.wire import frames

log = logging.getLogger(__name__)


class Backpressure:
    """Tracks own congestion and peers' signals; reports when spouts must pause or resume."""

    def __init__(self, high_water_bytes: int, low_water_bytes: int,
                 high_water_tuples: int = 1 << 62, low_water_tuples: int = 1 << 61) -> None:
        self.high = high_water_bytes
        self.low = low_water_bytes
        self.high_tuples = high_water_tuples
        self.low_tuples = low_water_tuples
        self.congested = False
        self.remote: set[int] = set()  # containers that announced congestion
        self._since: float | None = None
        self.total_secs = 0.0       # spouts paused, whoever asked (Heron's ..._aggr)
        self.initiated_secs = 0.0   # this stmgr congested (Heron's ..._initiated)
        self.episodes = 0
        self.component_secs: dict[str, float] = {}  # time each local component held it up
        self._last_tick: float | None = None

    @property
    def spouts_paused(self) -> bool:
        """True while local spouts must not be read."""
        return self.congested or bool(self.remote)

    def observe(self, max_queued_bytes: int, max_queued_tuples: int = 0) -> bool | None:
        """Update own congestion from the largest queue; return the new state on change.

        The largest queue is given both in bytes and in tuples.
        """
        if not self.congested and (max_queued_bytes > self.high
                                   or max_queued_tuples > self.high_tuples):
            self.congested = True
            self.episodes += 1
            return True
        if self.congested and not self.above_low(max_queued_bytes, max_queued_tuples):
            self.congested = False
            return False
        return None

    def above_low(self, queued_bytes: int, queued_tuples: int = 0) -> bool:
        """Return True when a queue is at or above either low water mark."""
        return queued_bytes >= self.low or queued_tuples >= self.low_tuples

    def set_remote(self, container: int, active: bool) -> None:
        """Record a peer's congestion signal."""
        if active:
            self.remote.add(container)
        else:
            self.remote.discard(container)

    def tick(self, now: float | None = None, culprits: tuple[str, ...] = ()) -> None:
        """Accumulate time spent with spouts paused.

        While this stmgr is congested, the time is charged to ``culprits`` (the components
        whose queues are above the low water mark).
        """
        now = time.monotonic() if now is None else now
        if self.congested and self._last_tick is not None:
            self.initiated_secs += now - self._last_tick
            for component in culprits:
                self.component_secs[component] = (self.component_secs.get(component, 0.0)
                                                  + now - self._last_tick)
        self._last_tick = now
        if self.spouts_paused:
            if self._since is None:
                self._since = now
            else:
                self.total_secs += now - self._since
                self._since = now
        elif self._since is not None:
            self.total_secs += now - self._since
            self._since = None


class SpoutGate:
    """Act on ``Backpressure``: measure the queues, tell the peers, gate the local spouts.

    ``backpressure`` holds the state; the relay (``relay.Relay``) holds the queue counts and
    sends each spout its gate; ``transport`` is the core's. No I/O of its own. The stmgr's
    loop thread only.
    """

    def __init__(self, backpressure: Backpressure, relay: Relay, index: int,
                 spout_tasks: frozenset[int], transport: StmgrTransport) -> None:
        self.backpressure = backpressure
        self.relay = relay
        self.index = index
        self.spout_tasks = spout_tasks
        self.io = transport

    def check(self, now: float, peers: list[int], task_component: dict[int, str]) -> None:
        """Measure the largest queue; on a change tell ``peers`` and gate the local spouts.

        Then charge the time spent paused, to the components whose queues are above the low
        water mark while this stmgr is congested.
        """
        io, relay, connected = self.io, self.relay, self.relay.connected
        queued = io.peer_queued_bytes()
        tuples = 0
        sent, executed, queued_bytes = relay.sent_tuples, relay.executed_tuples, \
            io.instance_queued_bytes
        for task in connected:  # the largest queue, in bytes and in tuples
            task_bytes = queued_bytes(task)
            if task_bytes > queued:
                queued = task_bytes
            task_tuples = sent[task] - executed[task]
            if task_tuples > tuples:
                tuples = task_tuples
        backpressure = self.backpressure
        change = backpressure.observe(queued, tuples)
        if change is not None:
            log.info("backpressure %s", "started" if change else "stopped")
            frame = frames.control_frame(stmgr_pb2.StmgrToStmgr(
                backpressure=stmgr_pb2.BackpressureSignal(container_index=self.index,
                                                          active=change)))
            for container in peers:
                io.to_peer(container, frame)
            self.apply()
        culprits: tuple[str, ...] = ()
        if backpressure.congested:
            culprits = tuple({task_component[task] for task in connected
                              if backpressure.above_low(io.instance_queued_bytes(task),
                                                        relay.queued_tuples(task))})
        backpressure.tick(now, culprits)

    def remote(self, container: int, active: bool) -> None:
        """Take a peer's congestion signal, and gate the local spouts by it."""
        self.backpressure.set_remote(container, active)
        self.apply()

    def apply(self) -> None:
        """Pause or resume local spouts: stop reading them, and tell them to stop emitting.

        During a restore (effectively once) held spouts emit nothing and must be read: their
        restore reports go through the same connection.
        """
        paused = self.backpressure.spouts_paused
        relay = self.relay
        changed = paused != relay.gate_paused
        relay.gate_paused = paused
        for task in self.spout_tasks & relay.connected:
            self.io.set_reading(task, not paused or relay.restoring)
            if changed:
                relay.send_gate(task)
