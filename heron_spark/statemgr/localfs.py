"""State manager on the local filesystem: one folder per topology, one file per key.

Writes are atomic (temp file + rename). Suits a single machine or a shared filesystem with
working ``flock`` (local disks do; some NFS setups do not); use ZooKeeper for clusters. Every
file is the owner's only (0600, as ``mkstemp`` makes it) in folders only the owner can list or
enter (0700: the root when this creates it, and each topology's folder).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import threading
from pathlib import Path

from heron_spark.errors import TopologyValueError
from heron_spark.statemgr.base import (
    TMASTER_LOCATION,
    StateManager,
    check_name,
    claimed_error,
    split_secret,
)

TMASTER_LOCK = "tmaster.lock"


class LocalFileStateManager(StateManager):
    """``StateManager`` under a root folder (created on first write). Thread-safe.

    The TMaster claim is an exclusive non-blocking ``flock`` on ``<root>/<topology>/tmaster.lock``,
    held through a file descriptor this object keeps open; the kernel drops it when the process
    dies, however it dies. The descriptor is close-on-exec, but a child made by a bare
    ``fork()`` (no exec) shares it and keeps the claim alive while it lives. Unlike
    ZooKeeper's ephemeral node, the ``tmaster`` key itself survives a crashed holder: it is
    stale until the next claim replaces it.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).expanduser()
        self._claims: dict[str, int] = {}   # topology -> fd holding the flock
        self._claims_lock = threading.Lock()

    def _make_folder(self, folder: Path) -> None:
        """Create ``folder`` (a topology's) and the root, if missing, for the owner only."""
        if not folder.is_dir():
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            folder.mkdir(mode=0o700, exist_ok=True)

    @property
    def location(self) -> str:
        """Return ``file://<root>``."""
        return f"file://{self.root}"

    def put(self, topology: str, key: str, value: bytes, private: bool = False) -> None:
        """Write ``<root>/<topology>/<key>`` atomically (a temporary file, then a rename)."""
        folder = self.root / check_name("topology", topology)
        if check_name("key", key) == TMASTER_LOCK:
            msg = "the key is reserved for the TMaster claim"
            raise TopologyValueError(msg, value=key,
                                     kind="name", fix="use another key name")
        self._make_folder(folder)
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
        """Return the bytes of ``<root>/<topology>/<key>``, or None if there is no such file."""
        try:
            return (self.root / check_name("topology", topology)
                    / check_name("key", key)).read_bytes()
        except FileNotFoundError:
            return None

    def keys(self, topology: str) -> list[str]:
        """Return the files in the topology's folder, sorted (temporary and lock files excluded)."""
        folder = self.root / check_name("topology", topology)
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir()
                      if p.is_file() and not p.name.startswith(".") and p.name != TMASTER_LOCK)

    def delete(self, topology: str, key: str) -> None:
        """Remove ``<root>/<topology>/<key>`` if it exists; the claim's lock file is refused."""
        if check_name("key", key) == TMASTER_LOCK:
            msg = "the key is reserved for the TMaster claim"
            raise TopologyValueError(msg, value=key,
                                     kind="name", fix="use release_tmaster")
        (self.root / check_name("topology", topology) / key).unlink(missing_ok=True)

    def delete_topology(self, topology: str) -> None:
        """Remove the topology's folder, ending this object's claim on it.

        A claim another object or process holds no longer excludes new claims either: its
        lock file is gone.
        """
        with self._claims_lock:
            fd = self._claims.pop(check_name("topology", topology), None)
            if fd is not None:
                os.close(fd)
        shutil.rmtree(self.root / check_name("topology", topology), ignore_errors=True)

    def topologies(self) -> list[str]:
        """Return the names of the folders under the root that hold a ``topology`` file, sorted."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "topology").is_file())

    def claim_tmaster(self, topology: str, location: dict) -> None:
        """Take the ``flock`` on the topology's lock file, then write ``location`` and the secret."""
        folder = self.root / check_name("topology", topology)
        value, private = split_secret(location)
        with self._claims_lock:
            if topology in self._claims:
                raise claimed_error(topology, self.location)
            self._make_folder(folder)
            fd = _lock_exclusive(folder / TMASTER_LOCK)
            if fd is None:
                raise claimed_error(topology, self.location)
            try:
                self.put(topology, TMASTER_LOCATION, value)
                for key, text in private.items():
                    self.put(topology, key, text.encode(), private=True)
            except BaseException:
                os.close(fd)
                raise
            self._claims[topology] = fd

    def release_tmaster(self, topology: str) -> None:
        """Remove the ``tmaster`` location and drop the ``flock``; do nothing without a claim."""
        with self._claims_lock:
            fd = self._claims.pop(topology, None)
            if fd is None:
                return
            try:
                (self.root / topology / TMASTER_LOCATION).unlink(missing_ok=True)
            finally:
                os.close(fd)  # drops the flock; the lock file stays (see _lock_exclusive)

    def close(self) -> None:
        """Release every TMaster claim of this object (idempotent)."""
        for topology in list(self._claims):
            self.release_tmaster(topology)


def _lock_exclusive(path: Path) -> int | None:
    """Return an fd holding an exclusive ``flock`` on ``path``, or None if another holds it.

    Lock files are never unlinked on release: a waiter that opened the old inode would lock a
    file nobody else sees. Only ``delete_topology`` removes them, so after locking, check that
    ``path`` still names the locked inode, and start over if not.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)
