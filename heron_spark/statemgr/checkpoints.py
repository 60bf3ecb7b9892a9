"""Where effectively-once checkpoints keep task state: any ``pyarrow.fs`` filesystem.

``heron.checkpoint.root`` is a URL (``file:///...``, ``hdfs://...``, ``s3://...``) or a local
path; empty means ``<heron.work.dir>/checkpoints`` on the local filesystem, which is enough for
``local[N]`` and a single machine. On a cluster set a URL every executor can reach. Layout,
under ``<root>/<topology>/``:

- ``<checkpoint id>/<task id>.state``: a ``memory`` task's state: the pickled header
  ``{"format": MEMORY_FORMAT, "ttl_secs": ..., "chunks": n}``, then ``n`` pickled dicts of
  its entries, ``MEMORY_CHUNK_KEYS`` each (a checkpoint of the first backends holds the tuple
  ``(ttl_secs, {key: value})``). Not split by key group:
  hashing every key at every checkpoint cost more than pickling them (2.7 s against 1.0 s
  per million keys), so a restore that splits (a rescale) and the state reader hash them;
- ``<checkpoint id>/<task id>.timers``: the timers of a bolt task that overrides ``on_timer``
  (``instance.timers``): its pickled ``KeyedTimers.snapshot()``, every timer with its key, so
  a rescaled component's restore splits them by key group as it splits a memory state;
- ``<checkpoint id>/component-<name>.json``: a stateful component's layout when it saved
  (``parallelism``, ``max_parallelism``, its task ids in index order, the backend), written
  by its task of index 0: a rescaled component's restore reads its old tasks' files by it;
- ``<checkpoint id>/<task id>.manifest``: a ``rocksdb`` task's checkpoint, a JSON list of the
  database's files: each small file (``CURRENT``, ``MANIFEST-*``, ``OPTIONS-*``, the WAL)
  stored under ``<checkpoint id>/<task id>.files/``, each SST file by its content's SHA-256
  under ``shared/``, uploaded once and referenced by every checkpoint whose database holds it.

An upload writes its list of files as ``<checkpoint id>/<task id>.uploading`` first and the
manifest last. Instances write and read their own files (writes from their background
uploader thread); the TMaster deletes checkpoints older than the last committed one
(``retain``), and with them every shared file no remaining manifest or ``.uploading`` list
references, but not a checkpoint a reader holds (``hold``: ``<checkpoint id>/hold-*.json``, the
wall-clock time until which it stays). A shared file an upload in flight reuses is
always still referenced: an SST file never comes back once compaction dropped it, so a file
the database holds now was in its last committed checkpoint too (``retain`` keeps that one).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import posixpath
import time
import uuid
from typing import Iterable

from heron_spark.errors import ConfigError

log = logging.getLogger(__name__)

SHARED = "shared"
HOLD = "hold-"  # a reader's hold on a checkpoint: <checkpoint id>/hold-<uuid>.json
MANIFEST_FORMAT = "heron_spark.rocksdb/2"  # /2: every stored key starts with its key group
MEMORY_FORMAT = "heron_spark.memory/4"  # a memory state: a header, then pickled slices
MEMORY_CHUNK_KEYS = 10_000  # entries per slice (about 10 ms of pickling each)
_CHUNK_BYTES = 4 * 1024 * 1024
TIMERS_SUFFIX = "timers"  # <checkpoint id>/<task id>.timers: a bolt's pickled timers


def checkpoint_root(root: str, work_dir: str) -> str:
    """Return the effective checkpoint root URL or path."""
    return root or posixpath.join(work_dir, "checkpoints")


def is_shared(name: str) -> bool:
    """Return whether a database file is stored once for every checkpoint (an SST file)."""
    return name.endswith((".sst", ".blob"))


@dataclasses.dataclass(frozen=True)
class ManifestEntry:
    """One file of a checkpointed database: its name there, size and where it is stored."""

    name: str
    size: int
    sha256: str
    shared: bool


class CheckpointStore:
    """One topology's checkpoints under ``root`` (see the module docstring).

    Not shared between threads: each thread (a task's uploader, the TMaster) opens its own.
    """

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
        self._known: set[str] = set()  # shared files this store saw uploaded or present

    # ---- paths ------------------------------------------------------------------------------
    def path(self, checkpoint_id: int, task: int, suffix: str = "state") -> str:
        """Return where ``task``'s file of ``checkpoint_id`` lives (``.state`` / ``.manifest``)."""
        return posixpath.join(self.base, str(checkpoint_id), f"{task}.{suffix}")

    def shared_path(self, sha256: str) -> str:
        """Return where the shared file of content hash ``sha256`` lives."""
        return posixpath.join(self.base, SHARED, sha256)

    def _own_path(self, checkpoint_id: int, task: int, name: str) -> str:
        return posixpath.join(self.base, str(checkpoint_id), f"{task}.files", name)

    def entry_path(self, checkpoint_id: int, task: int, entry: ManifestEntry) -> str:
        """Return where a manifest entry's bytes are stored."""
        return self.shared_path(entry.sha256) if entry.shared \
            else self._own_path(checkpoint_id, task, entry.name)

    # ---- whole-state files (memory) ---------------------------------------------------------
    def save(self, checkpoint_id: int, task: int, data: bytes) -> None:
        """Write ``task``'s state for ``checkpoint_id`` (atomically: temp file, then move)."""
        self._write(self.path(checkpoint_id, task), data)

    def load(self, checkpoint_id: int, task: int) -> bytes | None:
        """Return ``task``'s state for ``checkpoint_id``; None when it saved none."""
        path = self.path(checkpoint_id, task)
        return self._read(path) if self._is_file(path) else None

    def save_extra(self, checkpoint_id: int, task: int, suffix: str, data: bytes) -> None:
        """Write a small file of ``task`` beside its state (``suffix``: what it holds)."""
        self._write(self.path(checkpoint_id, task, suffix), data)

    def load_extra(self, checkpoint_id: int, task: int, suffix: str) -> bytes | None:
        """Return ``save_extra``'s file, None when the task saved none."""
        path = self.path(checkpoint_id, task, suffix)
        return self._read(path) if self._is_file(path) else None

    # ---- component layouts (key groups) -----------------------------------------------------
    def component_path(self, checkpoint_id: int, component: str) -> str:
        """Return where ``component``'s layout of ``checkpoint_id`` lives."""
        from urllib.parse import quote

        return posixpath.join(self.base, str(checkpoint_id),
                              f"component-{quote(component, safe='')}.json")

    def save_component(self, checkpoint_id: int, component: str, layout: dict) -> None:
        """Write ``component``'s layout (parallelism, max parallelism, tasks) for a checkpoint."""
        self._write(self.component_path(checkpoint_id, component),
                    json.dumps(layout, sort_keys=True).encode())

    def load_component(self, checkpoint_id: int, component: str) -> dict | None:
        """Return ``component``'s layout of ``checkpoint_id``; None when it wrote none.

        Raise ``ValueError`` when the file is not one.
        """
        path = self.component_path(checkpoint_id, component)
        if not self._is_file(path):
            return None
        layout = json.loads(self._read(path))
        if not isinstance(layout, dict) or not isinstance(layout.get("tasks"), list):
            msg = f"{path} is not a component layout"
            raise ValueError(msg)
        return layout

    # ---- manifests and shared files (rocksdb) -----------------------------------------------
    def describe(self, local_dir: str, names: Iterable[str],
                 hashes: dict[str, str]) -> list[ManifestEntry]:
        """Return the manifest entries of the files ``names`` of ``local_dir``.

        ``hashes`` maps a local file's identity (name, size, inode: a checkpoint hard-links
        the database's SST files) to its SHA-256 from earlier checkpoints, so an unchanged SST
        file is not read again; it is updated in place.
        """
        import os

        entries = []
        for name in sorted(names):
            local = os.path.join(local_dir, name)
            stat = os.stat(local)
            shared = is_shared(name)
            identity = f"{name}:{stat.st_size}:{stat.st_ino}"
            digest = hashes.get(identity) if shared else None
            if digest is None:
                digest = _sha256(local)
                if shared:
                    hashes[identity] = digest
            entries.append(ManifestEntry(name, stat.st_size, digest, shared))
        return entries

    def upload(self, checkpoint_id: int, task: int, local_dir: str,
               entries: list[ManifestEntry]) -> int:
        """Store ``entries`` of ``local_dir``; return the bytes written.

        First the list of files as ``<task>.uploading`` (so ``collect_shared`` keeps what this
        upload writes), then each file: a shared one the store does not hold yet, or one of
        this checkpoint's own; then the manifest, which makes the checkpoint whole.
        """
        import os

        pending = self.path(checkpoint_id, task, "uploading")
        self._write(pending, _manifest_bytes(entries))
        written = 0
        for entry in entries:
            if entry.shared and self._has_shared(entry.sha256):
                continue
            self._write_file(self.entry_path(checkpoint_id, task, entry),
                             os.path.join(local_dir, entry.name))
            written += entry.size
            if entry.shared:
                self._known.add(entry.sha256)
        self._write(self.path(checkpoint_id, task, "manifest"), _manifest_bytes(entries))
        self.fs.delete_file(pending)
        return written

    def load_manifest(self, checkpoint_id: int, task: int) -> list[ManifestEntry] | None:
        """Return ``task``'s manifest of ``checkpoint_id``; None when it wrote none.

        Raise ``ValueError`` when the manifest cannot be read as one.
        """
        path = self.path(checkpoint_id, task, "manifest")
        if not self._is_file(path):
            return None
        return _parse_manifest(self._read(path), path)

    def download(self, checkpoint_id: int, task: int, entry: ManifestEntry, local: str) -> None:
        """Copy one manifest entry to ``local``; raise ``ValueError`` when it is not intact."""
        path = self.entry_path(checkpoint_id, task, entry)
        digest = hashlib.sha256()
        size = 0
        with self.fs.open_input_stream(path) as stream, open(local, "wb") as out:
            while chunk := stream.read(_CHUNK_BYTES):
                digest.update(chunk)
                size += len(chunk)
                out.write(chunk)
        if size != entry.size or digest.hexdigest() != entry.sha256:
            msg = (f"{path} is corrupt: {size} bytes of SHA-256 {digest.hexdigest()}, the "
                   f"manifest says {entry.size} bytes of {entry.sha256}")
            raise ValueError(msg)

    # ---- listing and deleting ---------------------------------------------------------------
    def checkpoints(self) -> list[int]:
        """Return the checkpoint ids present, ascending."""
        return sorted(int(info.base_name) for info in self._list(self.base)
                      if info.type == _directory() and info.base_name.isdigit())

    def retain(self, keep: int) -> None:
        """Delete every checkpoint older than ``keep``, then the shared files none references.

        A checkpoint a reader holds (``hold``) stays until its hold runs out.
        """
        now = time.time()
        for checkpoint_id in self.checkpoints():
            if checkpoint_id < keep and not self.held(checkpoint_id, now):
                self._delete(checkpoint_id)
        self.collect_shared()

    # ---- readers' holds ---------------------------------------------------------------------
    def hold(self, checkpoint_id: int, until: float) -> str:
        """Keep ``checkpoint_id`` from ``retain`` until wall-clock time ``until``; return the file.

        A reader of a checkpoint's state (``heron_spark.sql.state``) holds it while it reads, so
        the next commit does not delete it under the read. ``clear`` ignores holds.
        """
        path = posixpath.join(self.base, str(checkpoint_id), f"{HOLD}{uuid.uuid4().hex}.json")
        self._write(path, json.dumps({"until": until}).encode())
        return path

    def held(self, checkpoint_id: int, now: float) -> bool:
        """Return whether a reader's hold on ``checkpoint_id`` lasts beyond ``now``."""
        for info in self._list(posixpath.join(self.base, str(checkpoint_id))):
            if info.base_name.startswith(HOLD) and info.base_name.endswith(".json"):
                try:
                    if float(json.loads(self._read(info.path))["until"]) > now:
                        return True
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # being written or damaged: a hold lasts seconds, ignore it
        return False

    def clear(self) -> None:
        """Delete every checkpoint of the topology (a new run starts from empty state)."""
        for checkpoint_id in self.checkpoints():
            self._delete(checkpoint_id)
        self.collect_shared()

    def referenced(self) -> set[str] | None:
        """Return the shared files (content hashes) the remaining manifests reference.

        Uploads in flight count (their ``.uploading`` lists); None when a manifest cannot be
        read (then nothing is deleted).
        """
        used: set[str] = set()
        for checkpoint_id in self.checkpoints():
            for info in self._list(posixpath.join(self.base, str(checkpoint_id))):
                stem, _, suffix = info.base_name.partition(".")
                if suffix not in ("manifest", "uploading") or not stem.isdigit():
                    continue
                try:
                    entries = _parse_manifest(self._read(info.path), info.path)
                except FileNotFoundError:  # an upload finished between listing and reading
                    continue
                except (OSError, ValueError) as exc:
                    log.warning("cannot read manifest %s: %s", info.path, exc)
                    return None
                used.update(entry.sha256 for entry in entries if entry.shared)
        return used

    def collect_shared(self) -> int:
        """Delete the shared files no remaining manifest references; return how many.

        The shared files are listed before the manifests are read: a file uploaded after the
        listing is not looked at, and one uploaded before it was named in an ``.uploading``
        list before that.
        """
        present = self._list(posixpath.join(self.base, SHARED))
        used = self.referenced()
        if used is None:
            return 0
        deleted = 0
        for info in present:
            if info.type == _file() and info.base_name not in used \
                    and not info.base_name.endswith(".tmp"):
                try:
                    self.fs.delete_file(info.path)
                    deleted += 1
                except OSError as exc:  # another cleaner got there first, or a flaky store
                    log.warning("could not delete shared file %s: %s", info.path, exc)
        self._known &= used
        return deleted

    # ---- I/O helpers ------------------------------------------------------------------------
    def _has_shared(self, digest: str) -> bool:
        if digest in self._known:
            return True
        if self._is_file(self.shared_path(digest)):
            self._known.add(digest)
            return True
        return False

    def _is_file(self, path: str) -> bool:
        return self.fs.get_file_info(path).type == _file()

    def _list(self, folder: str) -> list:
        import pyarrow.fs as pafs

        try:
            return self.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        except OSError:
            return []

    def _read(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as stream:
            return stream.read()

    def _write(self, path: str, data: bytes) -> None:
        self.fs.create_dir(posixpath.dirname(path), recursive=True)
        temp = f"{path}.tmp"
        with self.fs.open_output_stream(temp) as out:
            out.write(data)
        self.fs.move(temp, path)

    def _write_file(self, path: str, local: str) -> None:
        self.fs.create_dir(posixpath.dirname(path), recursive=True)
        temp = f"{path}.tmp"
        with open(local, "rb") as source, self.fs.open_output_stream(temp) as out:
            while chunk := source.read(_CHUNK_BYTES):
                out.write(chunk)
        self.fs.move(temp, path)

    def _delete(self, checkpoint_id: int) -> None:
        try:
            self.fs.delete_dir(posixpath.join(self.base, str(checkpoint_id)))
        except OSError as exc:  # another cleaner got there first, or a flaky store
            log.warning("could not delete checkpoint %d: %s", checkpoint_id, exc)


def encode_memory_state(ttl_secs: float, entries: dict,
                        chunk_keys: int = MEMORY_CHUNK_KEYS) -> bytes:
    """Return a ``memory`` task's state file: a header, then its entries in pickled slices.

    Each slice of ``chunk_keys`` entries is pickled by its own call, so a thread pickling a
    large state (the uploader) gives the GIL back between slices (``time.sleep(0)``): one
    ``pickle.dumps`` of a million entries held it, and so stopped the task's thread, for
    about a second. Raise what ``pickle`` raises for a key or value it cannot write.
    """
    import itertools
    import pickle
    import time

    items = iter(entries.items())
    parts = [b""]
    count = 0
    while True:
        chunk = dict(itertools.islice(items, chunk_keys))
        if not chunk:
            break
        parts.append(pickle.dumps(chunk, protocol=pickle.HIGHEST_PROTOCOL))
        count += 1
        time.sleep(0)  # let the task's thread run between slices
    parts[0] = pickle.dumps({"format": MEMORY_FORMAT, "ttl_secs": ttl_secs, "chunks": count},
                            protocol=pickle.HIGHEST_PROTOCOL)
    return b"".join(parts)


def decode_memory_state(data: bytes) -> tuple[float, dict]:
    """Return ``(ttl_secs, {key: value})`` of a ``memory`` task's state file.

    Raise ``ValueError`` for an unknown format (and what ``pickle`` raises for bytes that are
    not a pickle).
    """
    import io
    import pickle

    stream = io.BytesIO(data)
    body = pickle.load(stream)
    if isinstance(body, tuple):  # the first backends' (ttl_secs, entries)
        return body[0], body[1]
    if not isinstance(body, dict) or body.get("format") != MEMORY_FORMAT:
        found = body.get("format") if isinstance(body, dict) else type(body).__name__
        msg = f"unknown state format {found!r}"
        raise ValueError(msg)
    entries: dict = {}
    for _ in range(int(body["chunks"])):
        entries.update(pickle.load(stream))
    if stream.read(1):
        msg = "bytes after the last slice of the state"
        raise ValueError(msg)
    return body["ttl_secs"], entries


def _manifest_bytes(entries: list[ManifestEntry]) -> bytes:
    body = {"format": MANIFEST_FORMAT, "files": [dataclasses.asdict(e) for e in entries]}
    return json.dumps(body, sort_keys=True).encode()


def _parse_manifest(data: bytes, path: str) -> list[ManifestEntry]:
    """Read a manifest's bytes; raise ``ValueError`` when they are not one."""
    try:
        body = json.loads(data)
        if body.get("format") != MANIFEST_FORMAT:
            msg = f"unknown manifest format {body.get('format')!r}"
            raise ValueError(msg)
        return [ManifestEntry(**entry) for entry in body["files"]]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        msg = f"{path} is not a checkpoint manifest: {exc}"
        raise ValueError(msg) from exc


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while chunk := source.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _file():
    import pyarrow.fs as pafs

    return pafs.FileType.File


def _directory():
    import pyarrow.fs as pafs

    return pafs.FileType.Directory
