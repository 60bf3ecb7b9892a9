"""Which stmgrs are alive, from their heartbeats: the TMaster's liveness check. I/O-free.

Heron's TMaster expires a stmgr whose last heartbeat is older than a timeout. Here a stmgr
silent for longer than ``heron.tmaster.stmgr.heartbeat.timeout.secs`` is *dead*: reported,
its connection kept (a stmgr on a host cut off by a partition, or only slow, heartbeats again
on it once healed, and is alive again). One still dead a second timeout later is *overdue*:
its container cannot bring it back (the whole container is stopped, its executor is gone, or
its host stays cut off), so the TMaster drops it and restarts the Spark stage. That
is asked once per generation; ``reset`` starts a new one.

Runs in the driver; not thread-safe: the TMaster calls it under its lock. Times are seconds of
a monotonic clock the caller passes in.
"""

from __future__ import annotations


class StmgrLiveness:
    """See the module docstring."""

    def __init__(self, timeout_secs: float) -> None:
        self.timeout_secs = timeout_secs
        self.last_beat: dict[int, float] = {}     # container index -> last heartbeat
        self.dead_since: dict[int, float] = {}    # container index -> when it was found dead
        self.recovery_asked = False

    def beat(self, index: int, now: float) -> None:
        """Record a heartbeat or a (re)registration of the stmgr of container ``index``."""
        self.last_beat[index] = now
        self.dead_since.pop(index, None)

    def reset(self) -> None:
        """Forget every stmgr: a new generation of containers starts."""
        self.last_beat.clear()
        self.dead_since.clear()
        self.recovery_asked = False

    def check(self, now: float) -> tuple[list[int], list[int]]:
        """Return ``(newly dead, overdue)`` container indexes.

        Newly dead: silent for more than the timeout, reported once each. Overdue: dead for a
        further timeout without registering again; reported once per generation, as the
        moment to restart the stage.
        """
        newly = sorted(index for index, beat in self.last_beat.items()
                       if index not in self.dead_since and now - beat > self.timeout_secs)
        for index in newly:
            self.dead_since[index] = now
        overdue: list[int] = []
        if not self.recovery_asked:
            overdue = sorted(index for index, since in self.dead_since.items()
                             if now - since > self.timeout_secs)
            self.recovery_asked = bool(overdue)
        return newly, overdue

    def ages(self, now: float) -> dict[int, float]:
        """Seconds since each stmgr's last heartbeat, rounded to milliseconds."""
        return {index: round(now - beat, 3) for index, beat in sorted(self.last_beat.items())}
