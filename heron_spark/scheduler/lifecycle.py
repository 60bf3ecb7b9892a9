"""The I/O-free rules of a run's lifecycle: generations and the resubmission budget.

``scheduler.run.TopologyRun`` applies them to a real barrier stage; here they are plain
classes with a clock passed in, unit-tested without Spark. A *generation* is one launch of the
topology's containers: 0 at submit (or the prior run's next on a resume), one more on each
resubmission after a failed stage and on each update. Not thread-safe: the run calls them
under its own lock or from its stage thread alone.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from typing import Callable

from heron_spark._failure_window import FailureWindow


class Cause(enum.Enum):
    """Why a generation started."""

    SUBMITTED = "submitted"
    RESUMED = "resumed"  # a new driver took over a run whose driver died
    RESUBMITTED = "resubmitted"  # the stage failed (or the driver replaced its containers)
    UPDATED = "updated"  # ``heron update`` changed the parallelism


@dataclasses.dataclass(frozen=True)
class Generation:
    """One launch of the containers: its number, container count and cause."""

    number: int
    containers: int
    cause: Cause


class Generations:
    """The generations of one run, oldest first; the last one is ``current``."""

    def __init__(self, first: int, containers: int, resumed: bool = False) -> None:
        self.history = [Generation(first, containers,
                                   Cause.RESUMED if resumed else Cause.SUBMITTED)]

    @property
    def current(self) -> Generation:
        """The generation that runs (or last ran)."""
        return self.history[-1]

    @property
    def upcoming(self) -> int:
        """The number the next generation gets."""
        return self.current.number + 1

    def begin(self, number: int, containers: int, cause: Cause) -> Generation:
        """Record that generation ``number`` starts on ``containers``; return it.

        Raise ValueError when ``number`` does not come after the current one (generations
        only move forward: a stmgr of an older one is refused by the TMaster).
        """
        if number <= self.current.number:
            msg = (f"generation {number} cannot follow generation {self.current.number}: "
                   f"generations only move forward")
            raise ValueError(msg)
        generation = Generation(number, containers, cause)
        self.history.append(generation)
        return generation


@dataclasses.dataclass(frozen=True)
class Resubmit:
    """Resubmit the stage after ``delay_secs``; ``attempt`` of ``budget`` within the window."""

    delay_secs: float
    attempt: int
    budget: int


class GiveUp(enum.Enum):
    """Why a failed stage is not resubmitted."""

    PLANNED = "the stage was cancelled or the topology ended"
    DETERMINISTIC = "the failure would recur on every attempt"
    BUDGET = "too many failures within the restart window"


class ResubmissionPolicy:
    """Decide whether a failed barrier stage runs again as a new generation.

    At most ``budget`` resubmissions within ``window_secs`` (``heron.stage.resubmit.max``,
    ``heron.restart.window.secs``), each after a backoff that starts at ``backoff_secs`` and
    doubles with every failure counted in the window. ``clock`` is monotonic seconds.
    """

    def __init__(self, budget: int, window_secs: float, backoff_secs: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = budget
        self.window_secs = window_secs
        self.backoff_secs = backoff_secs
        self._failures = FailureWindow(window_secs, clock)

    def decide(self, planned: bool, deterministic: bool) -> Resubmit | GiveUp:
        """Return what to do about one failed stage.

        ``planned``: it was cancelled or the topology has ended (nothing to resubmit);
        ``deterministic``: its failure would recur (a module the executors cannot import).
        Only a failure that may be resubmitted counts against the budget.
        """
        if planned:
            return GiveUp.PLANNED
        if deterministic:
            return GiveUp.DETERMINISTIC
        recent = self._failures.record()
        if recent > self.budget:
            return GiveUp.BUDGET
        return Resubmit(self.backoff_secs * 2 ** (recent - 1), recent, self.budget)


def end_detail(error: BaseException | None, cancelled: bool, summary: str,
               cancelled_detail: str) -> str:
    """Return why the topology ended when its barrier stage ended with ``error``.

    ``summary`` is the stage failure's own lines; ``cancelled_detail`` what a cancellation is
    called (the driver's TMaster says "job group", container 0's submitter "job").
    """
    if error is None:
        return "every container exited before the topology ended"
    if cancelled:
        return cancelled_detail
    return f"the Spark barrier stage failed: {summary}"
