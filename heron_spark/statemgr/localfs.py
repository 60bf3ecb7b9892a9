"""State manager on the local filesystem: one folder per topology, one file per key.

Writes are atomic (temp file + rename). Suits a single machine or a shared filesystem;
use ZooKeeper for clusters.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from heron_spark.statemgr.base import StateManager


class LocalFileStateManager(StateManager):
    """``StateManager`` under a root folder (created on first write)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).expanduser()

    @property
    def location(self) -> str:
        return f"file://{self.root}"

    def put(self, topology: str, key: str, value: bytes, private: bool = False) -> None:
        folder = self.root / topology
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{key}.")
        try:
            if private:
                os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(value)
            os.replace(tmp, folder / key)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get(self, topology: str, key: str) -> bytes | None:
        try:
            return (self.root / topology / key).read_bytes()
        except FileNotFoundError:
            return None

    def delete_topology(self, topology: str) -> None:
        shutil.rmtree(self.root / topology, ignore_errors=True)

    def topologies(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "topology").is_file())
