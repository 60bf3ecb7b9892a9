"""A stream manager's lifecycle: ``StmgrState``, its allowed changes, and the error for others.

No I/O; ``core.StmgrCore`` holds the state and moves it with ``enter``.
"""

from __future__ import annotations

import enum

from heron_spark.errors import HeronSparkError


class StmgrState(enum.Enum):
    """Where a stream manager is in its life (``StmgrCore.state``).

    The changes:

    - WAITING_PLAN -> RUNNING: the TMaster's first physical plan; local instances start;
    - WAITING_PLAN | RUNNING -> RESTARTING: the TMaster's shutdown(RESTARTING) (``heron
      restart``): exit ``ExitCode.RESTART`` without telling the instances, for the
      supervisor to restart the container;
    - WAITING_PLAN | RUNNING -> STOPPING: the TMaster's shutdown, the TMaster lost, or the
      shell closing (``StmgrCore.close``).

    RESTARTING and STOPPING are final: TMaster frames are ignored, instance disconnects are no
    longer failures, instances that register are not started.
    """

    WAITING_PLAN = "waiting for the physical plan"
    RUNNING = "running"
    RESTARTING = "exiting to be restarted"
    STOPPING = "stopping"


ENDING = frozenset({StmgrState.RESTARTING, StmgrState.STOPPING})
NEXT_STATES = {
    StmgrState.WAITING_PLAN: frozenset({StmgrState.RUNNING, *ENDING}),
    StmgrState.RUNNING: ENDING,
    StmgrState.RESTARTING: frozenset(),
    StmgrState.STOPPING: frozenset(),
}


class StmgrStateError(HeronSparkError, RuntimeError):
    """A ``StmgrCore`` was asked for a state change its lifecycle forbids.

    A bug in its shell or in the core, never a peer's doing: frames that arrive too late are
    ignored.
    """

    def __init__(self, index: int, state: StmgrState, wanted: StmgrState) -> None:
        self.index, self.state, self.wanted = index, state, wanted
        allowed = ", ".join(sorted(s.name for s in NEXT_STATES[state])) or "none"
        super().__init__(f"stmgr of container {index}: cannot go from {state.name} to "
                         f"{wanted.name} (allowed: {allowed})")
