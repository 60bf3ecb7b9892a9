"""Which Spark executor hosts which container, from the JVM bridge's events. I/O-free.

The bridge's listener reports each task start of a topology's barrier stage (job group
``heron_spark:<name>``) with its executor, and every executor Spark removes. An executor
removed while it hosts a container of the current stage attempt is a lost container: the
TMaster restarts the stage at once instead of waiting for Spark or a heartbeat timeout.

Runs in the driver, in the thread that drains the bridge's events; not thread-safe.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping


@dataclasses.dataclass(frozen=True)
class ExecutorLoss:
    """An executor Spark removed while it hosted containers of the topology."""

    executor: str
    containers: tuple[int, ...]
    reason: str
    generation: int   # the topology generation those containers belonged to


class ContainerExecutors:
    """See the module docstring."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.attempt: tuple[int, int] | None = None   # (stage id, stage attempt) seen last
        self.hosting: dict[str, set[int]] = {}        # executor id -> container indexes
        self.generation = 0                           # of the stage attempt seen last

    def on_event(self, event: Mapping, generation: int) -> ExecutorLoss | None:
        """Take one bridge event; return the loss it reports, if it hits a container.

        ``generation`` is the generation the topology ran while the event was drained.
        """
        kind = event.get("type")
        if kind == "task_start" and event.get("group") == self.group:
            attempt = (int(event["stage"]), int(event.get("attempt", 0)))
            if self.attempt is None or attempt > self.attempt:  # a new stage (attempt) runs
                self.attempt = attempt
                self.hosting = {}
                self.generation = generation
            if attempt == self.attempt:
                self.hosting.setdefault(str(event["executor"]), set()).add(int(event["partition"]))
        elif kind == "executor_removed":
            containers = self.hosting.pop(str(event.get("executor")), None)
            if containers:
                return ExecutorLoss(str(event["executor"]), tuple(sorted(containers)),
                                    str(event.get("reason") or ""), self.generation)
        return None
