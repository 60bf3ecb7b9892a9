"""Effectively once, the task's side: load state at start, snapshot it at checkpoints.

A ``TaskState`` belongs to one executor. At every start (the first, or a restore after a
failure) it loads the state of the checkpoint the stmgr names (none: empty) into the
component's backend (``heron.state.backend``: ``memory``, a ``HashMapState``; ``rocksdb``, a
``RocksDBState``) and hands it to a ``StatefulComponent``'s ``init_state``. A restore never
starts a task with empty or partial state: a missing or corrupt file raises
``TopologyRuntimeError``.

When a checkpoint reaches the task (a spout: the TMaster's StartCheckpoint; a bolt: the
aligned marker) the executor sends what it buffered, calls ``snapshot`` (``pre_save``, then a
local snapshot: a shallow copy of the dict whose mutable values are then copied on write, or a
RocksDB checkpoint of hard links) and sends the marker to every downstream task at once; the
snapshot goes to the task's ``Uploader`` thread, which writes it to the checkpoint store
(``statemgr.checkpoints``: the pickled dict, or only the SST files the store does not hold yet
plus a manifest). The executor takes the ``finished`` uploads on its turns and only then
reports each save; the TMaster commits the checkpoint once every task has. A failed upload
fails the task and the checkpoint is never committed. Loop thread only (the upload jobs run on
the uploader's thread and touch only their snapshot and a store of their own).
"""

from __future__ import annotations

import itertools
import os
import pickle
import posixpath
import shutil
import time
from typing import Callable

from heron_spark.api.serializer import IHeronSerializer
from heron_spark.api.state import HashMapState, State, StatefulComponent
from heron_spark.config import StateSettings, SystemConfig
from heron_spark.errors import TopologyRuntimeError
from heron_spark.instance.state_stats import StateStats
from heron_spark.instance.uploader import Finished, Uploader
from heron_spark.statemgr.checkpoints import CheckpointStore, checkpoint_root

# A database folder is never opened twice in one process: an in-process task that crashed may
# still hold its old one open (RocksDB locks a folder per process).
_INCARNATIONS = itertools.count(1)

_FIX_ROOT = ("make heron.checkpoint.root a place every executor can write, with room for the "
             "state (hdfs://, s3://, a shared file:// mount)")


def local_state_dir(config: SystemConfig, topology: str, task_id: int) -> str:
    """Return the folder of a task's local state (its RocksDB database and snapshots)."""
    return os.path.join(config.work_dir, "state", topology, f"task-{task_id}")


class TaskState:
    """One task's checkpointed state; see the module docstring."""

    def __init__(self, config: SystemConfig, topology: str, task_id: int, component: str,
                 settings: StateSettings, wake: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._root = checkpoint_root(config.checkpoint_root, config.work_dir)
        self._topology = topology
        self.task_id = task_id
        self.component = component
        self.settings = settings
        self._clock = clock
        self._store: CheckpointStore | None = None
        self._local = local_state_dir(config, topology, task_id)
        self._uploader = Uploader(config.checkpoint_upload_queue_checkpoints,
                                  f"uploader-{task_id}", wake)
        self._ready: list[Finished] = []  # saves with nothing to upload (not a stateful component)
        self._hashes: dict[str, str] = {}  # the uploader thread's: SST identity -> SHA-256
        self.state: State = HashMapState()
        self.epoch = 0
        self.checkpoint_id = 0
        self.saved = 0
        self.stats = StateStats()  # published as the task's state metrics

    @property
    def store(self) -> CheckpointStore:
        """Return the loop thread's checkpoint store, opened on first use."""
        if self._store is None:
            self._store = CheckpointStore(self._root, self._topology)
        return self._store

    @property
    def uploading(self) -> int:
        """Return how many saves wait for their upload or their report."""
        return self._uploader.pending + len(self._ready)

    # ---- start and restore ------------------------------------------------------------------
    def load(self, component, epoch: int, checkpoint_id: int,
             serializer: IHeronSerializer | None = None) -> None:
        """Load ``checkpoint_id``'s state (0: empty) and give it to ``component``."""
        self.epoch, self.checkpoint_id = epoch, checkpoint_id
        if not isinstance(component, StatefulComponent):
            self.state = HashMapState()
            return
        started = time.perf_counter()
        if self.settings.backend == "rocksdb":
            self.state = self._load_rocksdb(checkpoint_id, serializer)
        else:
            self.state = self._load_memory(checkpoint_id)
        if checkpoint_id:
            self.stats.restore_ms = round((time.perf_counter() - started) * 1000.0, 3)
        component.init_state(self.state)

    def _load_memory(self, checkpoint_id: int) -> HashMapState:
        state = HashMapState(ttl_secs=self.settings.ttl_secs, clock=self._clock)
        if not checkpoint_id:
            return state
        path = self.store.path(checkpoint_id, self.task_id)
        try:
            data = self.store.load(checkpoint_id, self.task_id)
            if data is None:
                raise self._missing(checkpoint_id, path)
            ttl_secs, entries = pickle.loads(data)
        except TopologyRuntimeError:
            raise
        except Exception as exc:  # noqa: BLE001 - unpickling raises anything
            raise self._corrupt(checkpoint_id, path, exc) from exc
        state.restore(ttl_secs, entries)
        return state

    def _load_rocksdb(self, checkpoint_id: int, serializer: IHeronSerializer | None) -> State:
        from heron_spark.instance.rocksdb_state import RocksDBState

        self._close_backend()
        shutil.rmtree(self._local, ignore_errors=True)
        db_dir = os.path.join(self._local, f"db-{os.getpid()}-{next(_INCARNATIONS)}")
        os.makedirs(db_dir)
        if checkpoint_id:
            self._download(checkpoint_id, db_dir)
        return RocksDBState(db_dir, serializer, ttl_secs=self.settings.ttl_secs,
                            clock=self._clock, component=self.component)

    def _download(self, checkpoint_id: int, db_dir: str) -> None:
        store = self.store
        path = store.path(checkpoint_id, self.task_id, "manifest")
        try:
            entries = store.load_manifest(checkpoint_id, self.task_id)
        except (OSError, ValueError) as exc:
            raise self._corrupt(checkpoint_id, path, exc) from exc
        if entries is None:
            raise self._missing(checkpoint_id, path)
        for entry in entries:
            path = store.entry_path(checkpoint_id, self.task_id, entry)
            try:
                store.download(checkpoint_id, self.task_id, entry,
                               os.path.join(db_dir, entry.name))
            except (OSError, ValueError) as exc:
                raise self._corrupt(checkpoint_id, path, exc) from exc

    def _missing(self, checkpoint_id: int, path: str) -> TopologyRuntimeError:
        # Committed means every stateful task saved: the file is gone or was written on
        # another host's local disk (the default root). Never start from empty state.
        msg = (f"the committed checkpoint {checkpoint_id} holds no state for this task at "
               f"{path} (heron.checkpoint.root {self._root!r}; saved on another host's "
               f"local disk?). Fix: set heron.checkpoint.root to storage every executor "
               f"reaches (hdfs://, s3://, a shared file:// mount)")
        return TopologyRuntimeError(msg, component=self.component, task_id=self.task_id)

    def _corrupt(self, checkpoint_id: int, path: str, exc: BaseException) -> TopologyRuntimeError:
        msg = (f"cannot restore checkpoint {checkpoint_id} from {path}: {exc}. Fix: the "
               f"checkpoint store lost or damaged this file; restore it, or clear "
               f"heron.checkpoint.root's folder of the topology to start from empty state")
        return TopologyRuntimeError(msg, component=self.component, task_id=self.task_id)

    # ---- checkpoints ------------------------------------------------------------------------
    def snapshot(self, component, checkpoint_id: int) -> None:
        """``pre_save``, take a local snapshot for ``checkpoint_id`` and queue its upload.

        Blocks only while the upload queue is full.
        """
        if not isinstance(component, StatefulComponent):
            self._ready.append((checkpoint_id, None))
            return
        started = time.perf_counter()
        job = self._snapshot(component, checkpoint_id)
        stats = self.stats
        stats.pause_ms = round((time.perf_counter() - started) * 1000.0, 3)
        stats.snapshots += 1
        self._uploader.submit(checkpoint_id, lambda: self._timed(job))

    def _snapshot(self, component, checkpoint_id: int) -> Callable[[], tuple[int, int]]:
        """Take the local snapshot; return its upload job (-> state bytes, bytes written)."""
        component.pre_save(str(checkpoint_id))
        state = self.state
        if isinstance(state, HashMapState):
            ttl_secs, entries = state.snapshot()
            self.stats.keys = len(entries)
            return lambda: self._upload_memory(checkpoint_id, ttl_secs, entries)
        from heron_spark.instance.rocksdb_state import RocksDBState

        if not isinstance(state, RocksDBState):  # init_state's object replaced by the user's
            # Its values may change in place and it copies none on write: pickle them now.
            items = dict(state.items())
            self.stats.keys = len(items)
            data = self._pickled(checkpoint_id, 0.0, items)
            return lambda: self._upload_bytes(checkpoint_id, data)
        folder = os.path.join(self._local, "snapshots", str(checkpoint_id))
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        state.checkpoint(folder)
        self.stats.keys = state.estimated_keys()
        return lambda: self._upload_rocksdb(checkpoint_id, folder)

    def finished(self) -> list[Finished]:
        """Return the saves whose upload ended (with its error, or None), in order."""
        done = self._ready + self._uploader.finished() if self._ready \
            else self._uploader.finished()
        self._ready = []
        self.saved += sum(1 for _, error in done if error is None)
        return done

    def close(self) -> None:
        """Stop the uploader (uploads not started are dropped), close and remove the backend.

        The local folder goes with the task: the checkpoint store holds what a restart needs.
        """
        self._uploader.close()
        self._close_backend()
        shutil.rmtree(self._local, ignore_errors=True)

    def _close_backend(self) -> None:
        close = getattr(self.state, "close", None)
        if close is not None:
            close()

    # ---- upload jobs (the uploader's thread) ------------------------------------------------
    def _upload_store(self) -> CheckpointStore:
        store = getattr(self, "_thread_store", None)
        if store is None:
            store = self._thread_store = CheckpointStore(self._root, self._topology)
        return store

    def _timed(self, job: Callable[[], tuple[int, int]]) -> None:
        started = time.perf_counter()
        state_bytes, written = job()
        self.stats.uploaded(state_bytes, written, time.perf_counter() - started)

    def _upload_memory(self, checkpoint_id: int, ttl_secs: float,
                       entries: dict) -> tuple[int, int]:
        return self._upload_bytes(checkpoint_id, self._pickled(checkpoint_id, ttl_secs, entries))

    def _pickled(self, checkpoint_id: int, ttl_secs: float, entries: dict) -> bytes:
        try:
            return pickle.dumps((ttl_secs, entries), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - pickling raises anything
            msg = (f"cannot pickle the state for checkpoint {checkpoint_id}: {exc}. Fix: keep "
                   f"only picklable keys and values in the state")
            raise TopologyRuntimeError(msg, component=self.component,
                                       task_id=self.task_id) from exc

    def _upload_bytes(self, checkpoint_id: int, data: bytes) -> tuple[int, int]:
        path = posixpath.join(self._root, self._topology, str(checkpoint_id))
        try:
            store = self._upload_store()
            path = store.path(checkpoint_id, self.task_id)
            store.save(checkpoint_id, self.task_id, data)
        except OSError as exc:
            raise self._upload_failed(checkpoint_id, path, exc) from exc
        return len(data), len(data)

    def _upload_rocksdb(self, checkpoint_id: int, folder: str) -> tuple[int, int]:
        path = posixpath.join(self._root, self._topology, str(checkpoint_id))
        try:
            store = self._upload_store()
            path = store.path(checkpoint_id, self.task_id, "manifest")
            entries = store.describe(folder, os.listdir(folder), self._hashes)
            written = store.upload(checkpoint_id, self.task_id, folder, entries)
        except OSError as exc:
            raise self._upload_failed(checkpoint_id, path, exc) from exc
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return sum(entry.size for entry in entries), written

    def _upload_failed(self, checkpoint_id: int, path: str,
                       exc: BaseException) -> TopologyRuntimeError:
        msg = (f"cannot write checkpoint {checkpoint_id} to {path}: {exc}. Fix: "
               f"{_FIX_ROOT}")
        return TopologyRuntimeError(msg, component=self.component, task_id=self.task_id)
