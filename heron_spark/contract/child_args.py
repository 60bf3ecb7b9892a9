"""The command line of each child process of a container, written once for both sides.

The container builds a child's argv with ``to_argv()`` and runs ``python -m MODULE`` with it;
the child's entry module (``heron_spark.entry.<role>``) reads it back with ``from_argv()``. A
field ``task_id`` is the flag ``--task-id``. Every child gets
``--workdir`` (its container's folder; ``tests/chaos_support`` finds processes by it).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from pathlib import Path
from typing import ClassVar, TypeVar

_T = TypeVar("_T", bound="ChildArgs")


@dataclasses.dataclass(frozen=True)
class ChildArgs:
    """Base of the per-child argument dataclasses (``MODULE``: what ``python -m`` runs)."""

    MODULE: ClassVar[str] = ""

    workdir: Path

    def to_argv(self) -> list[str]:
        """Return the arguments after ``python -m MODULE``."""
        argv: list[str] = []
        for field in dataclasses.fields(self):
            argv += [_flag(field.name), str(getattr(self, field.name))]
        return argv

    @classmethod
    def from_argv(cls: type[_T], argv: list[str] | None = None) -> _T:
        """Parse ``argv`` (default ``sys.argv[1:]``) as ``to_argv`` wrote it."""
        parser = argparse.ArgumentParser(prog=cls.MODULE)
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            parser.add_argument(_flag(field.name), dest=field.name, required=True,
                                type=hints[field.name])
        return cls(**vars(parser.parse_args(argv)))


# ``--tmaster statemgr@<generation>``: a stmgr or metrics manager whose TMaster runs in
# container 0 reads the TMaster's location from the state manager (``statemgr.tmaster_address``)
# instead of host:port.
TMASTER_FROM_STATEMGR = "statemgr@"


def tmaster_from_statemgr(generation: int) -> str:
    """Return the ``--tmaster`` value that says: look the TMaster of ``generation`` up."""
    return f"{TMASTER_FROM_STATEMGR}{generation}"


def statemgr_generation(tmaster: str) -> int | None:
    """Return the generation of a ``tmaster_from_statemgr`` value, None for host:port."""
    if tmaster.startswith(TMASTER_FROM_STATEMGR):
        return int(tmaster[len(TMASTER_FROM_STATEMGR):])
    return None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


@dataclasses.dataclass(frozen=True)
class MetricsManagerArgs(ChildArgs):
    """``python -m heron_spark.entry.metrics``: a container's metrics manager."""

    MODULE: ClassVar[str] = "heron_spark.entry.metrics"

    container: int
    tmaster: str  # host:port of the TMaster's listener

    @property
    def tmaster_address(self) -> tuple[str, int]:
        """The TMaster's ``(host, port)``."""
        return _split_address(self.tmaster)


@dataclasses.dataclass(frozen=True)
class StmgrArgs(ChildArgs):
    """``python -m heron_spark.entry.stmgr``: a container's stream manager."""

    MODULE: ClassVar[str] = "heron_spark.entry.stmgr"

    container: int
    tmaster: str      # host:port of the TMaster's listener
    host: str         # the address this stmgr advertises to its peers
    generation: int   # the topology generation the container belongs to

    @property
    def tmaster_address(self) -> tuple[str, int]:
        """The TMaster's ``(host, port)``."""
        return _split_address(self.tmaster)


@dataclasses.dataclass(frozen=True)
class InstanceArgs(ChildArgs):
    """``python -m heron_spark.entry.instance``: one task's instance process."""

    MODULE: ClassVar[str] = "heron_spark.entry.instance"

    component: str
    task_id: int
    stmgr_address: str  # the stmgr's local listener (unix:@name or 127.0.0.1:port)


@dataclasses.dataclass(frozen=True)
class TMasterArgs(ChildArgs):
    """``python -m heron_spark.entry.tmaster``: the TMaster as container 0's child (placement container).

    ``workdir`` is container 0's folder (plan, packing plan, config, secret); the topology id,
    committed checkpoint and paused state of a resumed run come from the state manager.
    """

    MODULE: ClassVar[str] = "heron_spark.entry.tmaster"

    generation: int   # the generation whose stmgrs it serves
    host: str         # the address it listens on (container 0's host)
    deactivated: int  # 1: a new run starts deactivated
