"""``submit``'s start-up progress: "containers registered k/N" until the topology runs.

Where it goes: in a Jupyter kernel, one display output updated in place (an IPython display
handle); on a terminal (stderr is a TTY), one line rewritten in place; anywhere else, one
log line (INFO) per change. ``heron.submit.progress: false`` shows nothing. Driver only: a
daemon thread polls the TMaster until the topology runs or ends; sinks are used by that thread
alone (the notebook sink's first display is made by the caller's thread, inside the cell).

The driver's TMaster is read in memory every ``DRIVER_POLL_SECS``. A TMaster in container 0
is asked through its control port (``refresh``): directly on a classic session every
``poll_secs`` of its view, and under Spark Connect, where each question is a one-task Spark
job, every ``CONNECT_POLL_SECS``. The first line is the one known at submit (no
question), so ``submit`` returns without waiting for an answer.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import TextIO

from heron_spark.tmaster.protocol import TMasterView

log = logging.getLogger(__name__)

DRIVER_POLL_SECS = 0.1
CONNECT_POLL_SECS = 2.0


def progress_line(name: str, registered: int, total: int, state: str) -> str:
    """Return the progress text, e.g. ``topology wc: containers registered 1/2 (STARTING)``."""
    return f"heron_spark topology {name}: containers registered {registered}/{total} ({state})"


class LogSink:
    """One INFO log line per change."""

    def show(self, line: str) -> None:
        """Log ``line`` at INFO."""
        log.info("%s", line)

    def close(self) -> None:
        """Do nothing: log lines need no closing."""


class TerminalSink:
    """One line rewritten in place with a carriage return; a newline once done."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._width = 0

    def show(self, line: str) -> None:
        """Overwrite the current line with ``line`` (padded to cover a longer earlier one)."""
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = max(self._width, len(line))

    def close(self) -> None:
        """End the progress line with a newline."""
        self.stream.write("\n")
        self.stream.flush()


class NotebookSink:
    """One display output of the running cell, updated in place through its display id."""

    def __init__(self, first_line: str) -> None:
        from IPython.display import display

        self._handle = display({"text/plain": first_line}, raw=True, display_id=True)

    def show(self, line: str) -> None:
        """Replace the cell's progress output with ``line``."""
        self._handle.update({"text/plain": line}, raw=True)

    def close(self) -> None:
        """Do nothing: the last line stays in the cell's output."""


def in_kernel() -> bool:
    """Return True inside a Jupyter kernel (IPython imported and running with a kernel)."""
    ipython = sys.modules.get("IPython")  # never imported here: a kernel has it already
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return getattr(shell, "kernel", None) is not None


def choose_sink(first_line: str, stream: TextIO):
    """Return the sink for where this driver runs (see the module docstring)."""
    if in_kernel():
        return NotebookSink(first_line)
    isatty = getattr(stream, "isatty", None)
    if callable(isatty) and isatty():
        return TerminalSink(stream)
    return LogSink()


def watch(tmaster: TMasterView, enabled: bool,
          poll_secs: float | None = None) -> threading.Thread | None:
    """Show ``tmaster``'s start-up progress from a daemon thread; None when not ``enabled``.

    Before each look but the first it asks ``tmaster.refresh`` (a question to a TMaster in
    container 0, nothing for the driver's); it looks every ``poll_secs`` (default: the
    TMaster's own ``poll_secs``, at least ``DRIVER_POLL_SECS``).
    """
    if not enabled:
        return None
    poll = poll_secs if poll_secs is not None else max(DRIVER_POLL_SECS, tmaster.poll_secs)

    def line() -> str:
        status = tmaster.status()
        return progress_line(tmaster.name, len(status.registered), status.containers,
                             status.state)

    first = line()
    sink = choose_sink(first, sys.stderr)

    def run() -> None:
        shown = None
        while True:
            if shown is not None:
                tmaster.refresh()
            current = line()
            if current != shown:
                sink.show(current)
                shown = current
            if tmaster.running.is_set() or tmaster.done.is_set():
                if not current.endswith("(STARTING)"):
                    break
            tmaster.done.wait(poll)
        sink.close()

    thread = threading.Thread(target=run, daemon=True, name=f"progress-{tmaster.name}")
    thread.start()
    return thread
