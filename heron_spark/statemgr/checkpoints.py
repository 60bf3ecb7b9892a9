"""Where effectively-once checkpoints keep task state: any ``pyarrow.fs`` filesystem.

``heron.checkpoint.root`` is a URL (``file:///...``, ``hdfs://...``, ``s3://...``) or a local
path; empty means ``<heron.work.dir>/checkpoints`` on the local filesystem, which is enough for
``local[N]`` and a single machine. On a cluster set a URL every executor can reach. Layout:
``<root>/<topology>/<checkpoint id>/<task id>.state``, each file one task's pickled state.
Instances write and read their own files; the TMaster deletes checkpoints older than the last
committed one.
"""

from __future__ import annotations

import logging
import posixpath

from heron_spark.errors import ConfigError

log = logging.getLogger(__name__)


def checkpoint_root(root: str, work_dir: str) -> str:
    """Return the effective checkpoint root URL or path."""
    return root or posixpath.join(work_dir, "checkpoints")


class CheckpointStore:
    """One topology's checkpoints under ``root`` (see the module docstring)."""

    def __init__(self, root: str, topology: str) -> None:
        import pyarrow.fs as pafs

        try:
            self.fs, base = pafs.FileSystem.from_uri(root) if "://" in root \
                else (pafs.LocalFileSystem(), root)
        except (ValueError, OSError) as exc:
            raise ConfigError(key="heron.checkpoint.root", value=root,
                              fix=f"use a local path or a pyarrow.fs URL (file://, hdfs://, "
                                  f"s3://): {exc}") from exc
        self.root = root
        self.base = posixpath.join(base, topology)

    def _path(self, checkpoint_id: int, task: int) -> str:
        return posixpath.join(self.base, str(checkpoint_id), f"{task}.state")

    def save(self, checkpoint_id: int, task: int, data: bytes) -> None:
        """Write ``task``'s state for ``checkpoint_id`` (atomically: temp file, then move)."""
        path = self._path(checkpoint_id, task)
        self.fs.create_dir(posixpath.dirname(path), recursive=True)
        temp = f"{path}.tmp"
        with self.fs.open_output_stream(temp) as out:
            out.write(data)
        self.fs.move(temp, path)

    def load(self, checkpoint_id: int, task: int) -> bytes | None:
        """Return ``task``'s state for ``checkpoint_id``; None when it saved none."""
        import pyarrow.fs as pafs

        path = self._path(checkpoint_id, task)
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return None
        with self.fs.open_input_stream(path) as stream:
            return stream.read()

    def checkpoints(self) -> list[int]:
        """Return the checkpoint ids present, ascending."""
        import pyarrow.fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.base, allow_not_found=True))
        except OSError:
            return []
        return sorted(int(i.base_name) for i in infos
                      if i.type == pafs.FileType.Directory and i.base_name.isdigit())

    def retain(self, keep: int) -> None:
        """Delete every checkpoint older than ``keep``."""
        for checkpoint_id in self.checkpoints():
            if checkpoint_id < keep:
                self._delete(checkpoint_id)

    def clear(self) -> None:
        """Delete every checkpoint of the topology (a new run starts from empty state)."""
        for checkpoint_id in self.checkpoints():
            self._delete(checkpoint_id)

    def _delete(self, checkpoint_id: int) -> None:
        try:
            self.fs.delete_dir(posixpath.join(self.base, str(checkpoint_id)))
        except OSError as exc:  # another cleaner got there first, or a flaky store
            log.warning("could not delete checkpoint %d: %s", checkpoint_id, exc)
