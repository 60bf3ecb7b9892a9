"""The exceptions instances died of, kept per task like Heron's TMaster keeps them.

The source is each ``InstanceFailed`` a stream manager reports (the exception with its
traceback, or the reason the process went away, and the instance's log path). Identical
stack traces of one task are one entry with a count, first and last time (Heron's exception
log). Bounded: at most ``max_per_task`` distinct traces per task; past that the entry seen
least recently is dropped.

I/O-free (times are passed in, wall-clock secs). Not thread-safe: the TMaster calls it under
its lock.
"""

from __future__ import annotations

import collections
import dataclasses
import time


@dataclasses.dataclass
class ExceptionEntry:
    """One distinct stack trace of one task."""

    task_id: int
    component: str
    hostname: str
    stacktrace: str
    logging: str          # the instance's log file
    firsttime: float      # wall-clock secs
    lasttime: float
    count: int = 1

    @property
    def class_name(self) -> str:
        """The exception's class, read from the trace.

        It is the last unindented ``Name: message`` line of the trace (the whole last line
        when there is none, e.g. "instance process exited ...").
        """
        lines = [line for line in self.stacktrace.strip().splitlines() if line.strip()]
        for line in reversed(lines):
            if not line[:1].isspace():
                head = line.split(":", 1)[0].strip()
                if head and " " not in head:
                    return head
        return lines[-1].strip() if lines else ""


def format_time(secs: float) -> str:
    """Return ``secs`` (epoch) as an ISO 8601 UTC string, the exceptions views' time format."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(secs))


class ExceptionLog:
    """See the module docstring."""

    def __init__(self, max_per_task: int = 20) -> None:
        if max_per_task < 1:
            msg = f"max_per_task must be >= 1 (got {max_per_task})"
            raise ValueError(msg)
        self.max_per_task = max_per_task
        self._tasks: dict[int, collections.OrderedDict[str, ExceptionEntry]] = {}

    def record(self, task_id: int, component: str, hostname: str, stacktrace: str,
               log_path: str, now: float) -> ExceptionEntry:
        """Add one failure of ``task_id``; return its (new or updated) entry."""
        entries = self._tasks.setdefault(task_id, collections.OrderedDict())
        entry = entries.get(stacktrace)
        if entry is not None:
            entry.count += 1
            entry.lasttime = now
            entry.hostname = hostname or entry.hostname
            entries.move_to_end(stacktrace)
            return entry
        entry = entries[stacktrace] = ExceptionEntry(task_id, component, hostname, stacktrace,
                                                     log_path, now, now)
        while len(entries) > self.max_per_task:
            entries.popitem(last=False)
        return entry

    def entries(self, tasks: set[int] | None = None) -> list[ExceptionEntry]:
        """Return the entries of ``tasks`` (None: every task), by task then first time."""
        out = [entry for task, entries in sorted(self._tasks.items())
               if tasks is None or task in tasks for entry in entries.values()]
        out.sort(key=lambda e: (e.task_id, e.firsttime))
        return out
