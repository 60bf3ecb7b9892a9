"""The command line of each child process of a container, written once for both sides.

The container builds a child's argv with ``to_argv()``; the child's ``__main__`` reads it back
with ``from_argv()``. A field ``task_id`` is the flag ``--task-id``. Every child gets
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


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


@dataclasses.dataclass(frozen=True)
class MetricsManagerArgs(ChildArgs):
    """``python -m heron_spark.metrics``: a container's metrics manager."""

    MODULE: ClassVar[str] = "heron_spark.metrics"

    container: int
    tmaster: str  # host:port of the TMaster's listener

    @property
    def tmaster_address(self) -> tuple[str, int]:
        """The TMaster's ``(host, port)``."""
        return _split_address(self.tmaster)


@dataclasses.dataclass(frozen=True)
class StmgrArgs(ChildArgs):
    """``python -m heron_spark.stmgr``: a container's stream manager."""

    MODULE: ClassVar[str] = "heron_spark.stmgr"

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
    """``python -m heron_spark.instance``: one task's instance process."""

    MODULE: ClassVar[str] = "heron_spark.instance"

    component: str
    task_id: int
    stmgr_address: str  # the stmgr's local listener (unix:@name or 127.0.0.1:port)
