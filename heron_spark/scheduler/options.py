"""``SubmitOptions``: what ``heron-spark submit`` applies to every ``submit`` of the file it runs.

The CLI runs a topology file in its own process; the file calls ``submit`` (or
``build_and_submit``) itself, so the CLI's flags (``--conf``, the name, ``--master``,
``--deploy-deactivated``) reach those calls through ``cli_submits``, which holds them while
the file runs and collects the handles its submits return. Driver only; the file runs on the
CLI's main thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Iterator, Mapping

if TYPE_CHECKING:
    from heron_spark.scheduler.handle import TopologyHandle


@dataclasses.dataclass(frozen=True)
class SubmitOptions:
    """The CLI's flags for every submit in the file it runs; a call's own arguments win.

    ``conf`` is layered under the call's ``conf``; ``name`` and ``master`` apply where the
    call gives none; ``deactivated`` deploys every topology paused.
    """

    conf: Mapping[str, str] = dataclasses.field(default_factory=dict)
    name: str | None = None
    master: str | None = None
    deactivated: bool = False

    def apply(self, conf: dict | None, name: str | None, master: str | None,
              deactivated: bool) -> tuple[dict, str | None, str | None, bool]:
        """Return ``(conf, name, master, deactivated)`` of one call with these options under."""
        return ({**self.conf, **(conf or {})}, name or self.name, master or self.master,
                deactivated or self.deactivated)


@dataclasses.dataclass
class _CliRun:
    options: SubmitOptions
    handles: list["TopologyHandle"]


_active: list[_CliRun] = []  # the file ``heron-spark submit`` runs now (at most one)


def active() -> SubmitOptions | None:
    """Return the options of the CLI run in progress, None outside ``heron-spark submit``."""
    return _active[-1].options if _active else None


def record(handle: "TopologyHandle") -> bool:
    """Record a submitted topology for the CLI to wait for; False outside the CLI."""
    if not _active:
        return False
    _active[-1].handles.append(handle)
    return True


@contextlib.contextmanager
def cli_submits(options: SubmitOptions) -> Iterator[list["TopologyHandle"]]:
    """Apply ``options`` to every submit while the block runs; yield the handles they return."""
    run = _CliRun(options, [])
    _active.append(run)
    try:
        yield run.handles
    finally:
        _active.remove(run)
