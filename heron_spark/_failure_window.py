"""Counting failures in a sliding time window: the one rule every restart budget uses.

The container (stmgr deaths), the TMaster (a task's failures) and the scheduler (barrier stage
failures) each allow at most N failures within ``heron.restart.window.secs``. Not thread-safe:
each owner calls it from one thread (or under its own lock).
"""

from __future__ import annotations

import collections
import time


class FailureWindow:
    """Failures seen in the last ``window_secs`` seconds."""

    def __init__(self, window_secs: float, clock=time.monotonic) -> None:
        self.window_secs = window_secs
        self._clock = clock
        self._times: collections.deque = collections.deque()

    def record(self, now: float | None = None) -> int:
        """Count a failure at ``now`` (default: the clock's now).

        Return how many fell within the window, this one included.
        """
        if now is None:
            now = self._clock()
        self._times.append(now)
        while self._times and self._times[0] < now - self.window_secs:
            self._times.popleft()
        return len(self._times)
