"""Spout backpressure with hysteresis, and the time spent in it.

A stmgr is *congested* when a send queue towards a local instance or a peer stmgr holds more
than the high water mark; it stays congested until every such queue is below the low water
mark. While any stmgr of the topology is congested, every stmgr stops reading from its local
spouts. Used by the stmgr's routing thread only.
"""

from __future__ import annotations

import time


class Backpressure:
    """Tracks own congestion and peers' signals; reports when spouts must pause or resume."""

    def __init__(self, high_water_bytes: int, low_water_bytes: int) -> None:
        self.high = high_water_bytes
        self.low = low_water_bytes
        self.congested = False
        self.remote: set[int] = set()  # containers that announced congestion
        self._since: float | None = None
        self.total_secs = 0.0
        self.episodes = 0
        self.component_secs: dict[str, float] = {}  # time each local component held it up
        self._last_tick: float | None = None

    @property
    def spouts_paused(self) -> bool:
        """True while local spouts must not be read."""
        return self.congested or bool(self.remote)

    def observe(self, max_queued_bytes: int) -> bool | None:
        """Update own congestion from the largest send queue; return the new state on change."""
        if not self.congested and max_queued_bytes > self.high:
            self.congested = True
            self.episodes += 1
            return True
        if self.congested and max_queued_bytes < self.low:
            self.congested = False
            return False
        return None

    def set_remote(self, container: int, active: bool) -> None:
        """Record a peer's congestion signal."""
        if active:
            self.remote.add(container)
        else:
            self.remote.discard(container)

    def tick(self, now: float | None = None, culprits: tuple[str, ...] = ()) -> None:
        """Accumulate time spent with spouts paused; while this stmgr is congested, charge it
        to ``culprits`` (the components whose queues are above the low water mark)."""
        now = time.monotonic() if now is None else now
        if self.congested and self._last_tick is not None:
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
