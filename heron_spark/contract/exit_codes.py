"""What a heron_spark child process's exit code means; its container reads it through this.

One meaning per value, whatever the role. A negative ``returncode`` is a signal (Popen's
convention), never one of these.
"""

from __future__ import annotations

import enum
import signal


class ExitCode(enum.IntEnum):
    """Exit codes of the stmgr, metrics manager and instance processes."""

    OK = 0
    """Stopped as asked: the topology ended (the TMaster's shutdown, or SIGTERM)."""
    FAILED = 1
    """Failed: start-up error, user code raised or hung, instances never registered."""
    TMASTER_LOST = 2
    """Stmgr: its TMaster connection ended (the driver is gone); the container ends."""
    PARENT_DIED = 3
    """Any child: its parent (the container) died first."""
    RESTART = 4
    """Stmgr: the TMaster asked for a restart of its container (``heron restart``); the
    supervisor restarts every process of the container at once, not counted as a failure."""
    STMGR_LOST = 5
    """Instance: its stmgr connection ended; the stmgr's restart (or exit) decides."""
    RECOVER = 6
    """TMaster in container 0: replace every container now (a stmgr stayed away); its
    container fails the barrier task, and the submitter resubmits the stage."""


# The stmgr's exits that end its container for good.
STMGR_FINAL = frozenset({ExitCode.OK, ExitCode.TMASTER_LOST})


def describe(code: int) -> str:
    """Return ``code`` for a log line: ``code 4 (RESTART)``, ``signal SIGKILL``, ``code 9``."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    try:
        return f"code {code} ({ExitCode(code).name})"
    except ValueError:
        return f"code {code}"
