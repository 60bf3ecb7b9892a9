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
plus a manifest). The task of index 0 also writes its component's layout (parallelism,
``topology.max.parallelism``, task ids). The executor takes the ``finished`` uploads on its
turns and only then reports each save; the TMaster commits the checkpoint once every task has. A failed upload
fails the task and the checkpoint is never committed.

Keyed state lives per key group (``contract.key_groups``): a ``rocksdb`` database keeps each
key behind its group; a ``memory`` checkpoint holds its entries whole, hashed only when a
restore splits them. A restore reads the layout its component saved: the same
parallelism reads the file of the task of the same index; a new parallelism (``heron-spark
update``) reads, from every old task whose key groups overlap the ones this task owns now,
the entries of those groups, so each key's state is on exactly one task. An old task holding
a key outside its own key groups means the state is not keyed by the fields grouping: the
restore fails rather than guess.

Beside the state, every task of an effectively-once topology saves its event-time progress
(``time_state``: its watermarks, ``instance.watermarks``) in a small file of its own; a start
from a checkpoint reads it back when the component has the parallelism it had (after a
rescale watermarks start over: every upstream task sends its own again). A bolt with timers
(``instance.timers``) saves them in a file of its own too, every timer with its key, and a
restore splits them by key group as it splits a memory state. Loop thread only
(the upload jobs run on the uploader's thread and touch only their snapshot and a store of
their own).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import pickle
import posixpath
import shutil
import time
from typing import Callable

from heron_spark.api.serializer import IHeronSerializer
from heron_spark.api.state import HashMapState, State, StatefulComponent
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.config import StateSettings, SystemConfig
from heron_spark.contract import key_groups
from heron_spark.errors import TopologyRuntimeError
from heron_spark.instance.state_stats import StateStats
from heron_spark.instance.timers import (KeyedTimers, check_snapshot, merge_snapshots,
                                         split_by_key_group)
from heron_spark.instance.uploader import Finished, Uploader
from heron_spark.statemgr.checkpoints import (TIMERS_SUFFIX, CheckpointStore, checkpoint_root,
                                              decode_memory_state, encode_memory_state)
from heron_spark.wire import tuple_batch

# A database folder is never opened twice in one process: an in-process task that crashed may
# still hold its old one open (RocksDB locks a folder per process).
_INCARNATIONS = itertools.count(1)

_FIX_ROOT = ("make heron.checkpoint.root a place every executor can write, with room for the "
             "state (hdfs://, s3://, a shared file:// mount)")


@dataclasses.dataclass(frozen=True)
class KeyLayout:
    """A task's place among its component's tasks, and so its share of the key groups."""

    task_index: int
    tasks: tuple[int, ...]  # the component's task ids, in index order
    max_parallelism: int    # topology.max.parallelism

    @property
    def owned(self) -> range:
        """Return the key groups this task owns."""
        return key_groups.key_group_range(self.task_index, len(self.tasks),
                                          self.max_parallelism)

    def record(self, backend: str) -> dict:
        """Return the component layout a checkpoint keeps (``CheckpointStore.save_component``)."""
        return {"parallelism": len(self.tasks), "max_parallelism": self.max_parallelism,
                "tasks": list(self.tasks), "backend": backend}


def group_by_key_group(entries: dict, max_parallelism: int) -> dict[int, dict]:
    """Return ``entries`` split by the key group of each key (hashed vectorised, in NumPy)."""
    keys = list(entries)
    groups = tuple_batch.key_groups_of(keys, max_parallelism)
    out: dict[int, dict] = {}
    for key, group in zip(keys, groups):
        part = out.get(group)
        if part is None:
            part = out[group] = {}
        part[key] = entries[key]
    return out


def local_state_dir(config: SystemConfig, topology: str, task_id: int) -> str:
    """Return the folder of a task's local state (its RocksDB database and snapshots)."""
    return os.path.join(config.work_dir, "state", topology, f"task-{task_id}")


class TaskState:
    """One task's checkpointed state; see the module docstring."""

    def __init__(self, config: SystemConfig, topology: str, task_id: int, component: str,
                 settings: StateSettings, wake: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.time,
                 layout: KeyLayout | None = None) -> None:
        self._layout = layout  # None: one task alone (tests), its state not split
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
        self.time_state: dict | None = None  # the loaded checkpoint's event-time progress
        self.timers: KeyedTimers | None = None  # a bolt with on_timer's: saved beside the state

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
        self.time_state = self._load_time(checkpoint_id) if checkpoint_id else None
        if self.timers is not None:
            self._load_timers(self.timers, checkpoint_id)
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
        sources, owned = self._restore_plan(checkpoint_id)
        merged: dict = {}
        ttl_secs = 0.0
        for task, theirs in sources:
            ttl_secs, entries = self._read_memory(checkpoint_id, task)
            if theirs is None or owned is None:
                merged.update(entries)
                continue
            assert self._layout is not None  # a split comes from the layout
            for group, part in group_by_key_group(entries,
                                                  self._layout.max_parallelism).items():
                if group not in theirs:
                    raise self._not_keyed(checkpoint_id, task, next(iter(part)), group)
                if group in owned:
                    merged.update(part)
        state.restore(ttl_secs, merged)
        return state

    def _read_memory(self, checkpoint_id: int, task: int) -> tuple[float, dict]:
        """Return ``(ttl_secs, entries)`` of a task's file."""
        path = self.store.path(checkpoint_id, task)
        try:
            data = self.store.load(checkpoint_id, task)
            if data is None:
                raise self._missing(checkpoint_id, path)
            return decode_memory_state(data)
        except TopologyRuntimeError:
            raise
        except Exception as exc:  # noqa: BLE001 - unpickling raises anything
            raise self._corrupt(checkpoint_id, path, exc) from exc

    def _restore_plan(self, checkpoint_id: int) -> tuple[list[tuple[int, range | None]],
                                                         range | None]:
        """Return the old tasks to read, each with its key groups, and the groups to keep.

        Each old task comes with the key groups it owned (None: not split); the groups to keep
        are None for all. From the layout the component saved with ``checkpoint_id``: none (a checkpoint from
        before key groups, or a task with no layout) reads this task id's file.
        """
        layout = self._layout
        if layout is None:
            return [(self.task_id, None)], None
        path = self.store.component_path(checkpoint_id, self.component)
        try:
            record = self.store.load_component(checkpoint_id, self.component)
            if record is None:
                return [(self.task_id, None)], None
            old_tasks = [int(task) for task in record["tasks"]]
            old_max = int(record["max_parallelism"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise self._corrupt(checkpoint_id, path, exc) from exc
        if old_max != layout.max_parallelism:
            msg = (f"checkpoint {checkpoint_id} was written with topology.max.parallelism "
                   f"{old_max}, this run has {layout.max_parallelism}: key groups cannot "
                   f"change while the topology has state. Fix: set topology.max.parallelism "
                   f"back to {old_max}")
            raise TopologyRuntimeError(msg, component=self.component, task_id=self.task_id)
        if len(old_tasks) == len(layout.tasks):
            return [(old_tasks[layout.task_index], None)], None
        owned = layout.owned
        sources: list[tuple[int, range | None]] = []
        for index, task in enumerate(old_tasks):
            theirs = key_groups.key_group_range(index, len(old_tasks), old_max)
            if theirs.start < owned.stop and owned.start < theirs.stop:
                sources.append((task, theirs))
        return sources, owned

    def _not_keyed(self, checkpoint_id: int, task: int, key, group: int) -> TopologyRuntimeError:
        msg = (f"cannot split the state of checkpoint {checkpoint_id} across a new "
               f"parallelism: task {task} held the key {key!r}, of key group {group}, which "
               f"that task did not own, so the state is not keyed by the component's fields "
               f"grouping. Fix: update the component back to its old parallelism, or keep "
               f"its state under the key(s) its fields grouping routes by")
        return TopologyRuntimeError(msg, component=self.component, task_id=self.task_id)

    def _load_rocksdb(self, checkpoint_id: int, serializer: IHeronSerializer | None) -> State:
        from heron_spark.instance.rocksdb_state import RocksDBState

        self._close_backend()
        shutil.rmtree(self._local, ignore_errors=True)
        db_dir = os.path.join(self._local, f"db-{os.getpid()}-{next(_INCARNATIONS)}")
        os.makedirs(db_dir)
        sources, owned = self._restore_plan(checkpoint_id) if checkpoint_id else ([], None)
        if owned is None and sources:
            self._download(checkpoint_id, sources[0][0], db_dir)
        most = self._layout.max_parallelism if self._layout is not None \
            else TopologyConfig.max_parallelism
        state = RocksDBState(db_dir, serializer, ttl_secs=self.settings.ttl_secs,
                             clock=self._clock, component=self.component, max_parallelism=most)
        if owned is None:
            return state
        assert self._layout is not None  # owned comes from the layout
        for task, theirs in sources:  # a new parallelism: copy the groups this task owns now
            folder = os.path.join(self._local, f"old-{task}")
            shutil.rmtree(folder, ignore_errors=True)
            os.makedirs(folder)
            self._download(checkpoint_id, task, folder)
            assert theirs is not None  # a split names each old task's key groups
            stray = state.absorb(folder, owned, theirs, self._layout.max_parallelism)
            shutil.rmtree(folder, ignore_errors=True)
            if stray is not None:
                state.close()
                raise self._not_keyed(checkpoint_id, task, *stray)
        return state

    def _download(self, checkpoint_id: int, task: int, db_dir: str) -> None:
        store = self.store
        path = store.path(checkpoint_id, task, "manifest")
        try:
            entries = store.load_manifest(checkpoint_id, task)
        except (OSError, ValueError) as exc:
            raise self._corrupt(checkpoint_id, path, exc) from exc
        if entries is None:
            raise self._missing(checkpoint_id, path)
        for entry in entries:
            path = store.entry_path(checkpoint_id, task, entry)
            try:
                store.download(checkpoint_id, task, entry,
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
    def snapshot(self, component, checkpoint_id: int, time_state: dict | None = None) -> None:
        """``pre_save``, take a local snapshot for ``checkpoint_id`` and queue its upload.

        ``time_state``: the task's event-time progress, saved beside the state; the timers
        (if the task keeps any) are saved by the same upload job. Blocks only while the upload
        queue is full.
        """
        blob = None if time_state is None else self._time_blob(time_state)
        timers = self._timers_job(checkpoint_id)
        if not isinstance(component, StatefulComponent):
            if blob is None and timers is None:
                self._ready.append((checkpoint_id, None))
                return

            def upload_extras() -> None:
                if blob is not None:
                    self._upload_time(checkpoint_id, blob)
                if timers is not None:  # no state upload writes the layout: this one does
                    timers(True)
            self._uploader.submit(checkpoint_id, upload_extras)
            return
        started = time.perf_counter()
        job = self._snapshot(component, checkpoint_id)
        stats = self.stats
        stats.pause_ms = round((time.perf_counter() - started) * 1000.0, 3)
        stats.snapshots += 1

        def upload() -> None:
            self._timed(job)
            if blob is not None:
                self._upload_time(checkpoint_id, blob)
            if timers is not None:
                timers(False)
        self._uploader.submit(checkpoint_id, upload)

    # ---- event-time progress ----------------------------------------------------------------
    def _time_owner(self) -> tuple:
        """Return whose progress a time file holds: the component, the task's index, its tasks."""
        layout = self._layout
        return (self.component, None if layout is None else layout.task_index,
                None if layout is None else len(layout.tasks))

    def _time_blob(self, time_state: dict) -> bytes:
        return pickle.dumps({"owner": self._time_owner(), "time": time_state},
                            protocol=pickle.HIGHEST_PROTOCOL)

    def _upload_time(self, checkpoint_id: int, blob: bytes) -> None:
        path = posixpath.join(self._root, self._topology, str(checkpoint_id))
        try:
            store = self._upload_store()
            path = store.path(checkpoint_id, self.task_id, "time")
            store.save_extra(checkpoint_id, self.task_id, "time", blob)
        except OSError as exc:
            raise self._upload_failed(checkpoint_id, path, exc) from exc

    def _load_time(self, checkpoint_id: int) -> dict | None:
        """Return the event-time progress this task saved at ``checkpoint_id``, if it is its own.

        None when there is none, or it belonged to another component or parallelism.
        """
        try:
            blob = self.store.load_extra(checkpoint_id, self.task_id, "time")
        except OSError as exc:
            raise self._missing(checkpoint_id, self.store.path(
                checkpoint_id, self.task_id, "time")) from exc
        if blob is None:
            return None
        try:
            saved = pickle.loads(blob)  # noqa: S301 - our own file in the checkpoint store
        except Exception as exc:  # noqa: BLE001 - a corrupt file raises anything
            raise self._corrupt(checkpoint_id, self.store.path(checkpoint_id, self.task_id,
                                                               "time"), exc) from exc
        return saved["time"] if saved.get("owner") == self._time_owner() else None

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
            return encode_memory_state(ttl_secs, entries)
        except Exception as exc:  # noqa: BLE001 - pickling raises anything
            msg = (f"cannot pickle the state for checkpoint {checkpoint_id}: {exc}. Fix: keep "
                   f"only picklable keys and values in the state")
            raise TopologyRuntimeError(msg, component=self.component,
                                       task_id=self.task_id) from exc

    def _upload_bytes(self, checkpoint_id: int, data: bytes) -> tuple[int, int]:
        path = posixpath.join(self._root, self._topology, str(checkpoint_id))
        try:
            store = self._upload_store()
            self._save_layout(store, checkpoint_id, "memory")
            path = store.path(checkpoint_id, self.task_id)
            store.save(checkpoint_id, self.task_id, data)
        except OSError as exc:
            raise self._upload_failed(checkpoint_id, path, exc) from exc
        return len(data), len(data)

    def _upload_rocksdb(self, checkpoint_id: int, folder: str) -> tuple[int, int]:
        path = posixpath.join(self._root, self._topology, str(checkpoint_id))
        try:
            store = self._upload_store()
            self._save_layout(store, checkpoint_id, "rocksdb")
            path = store.path(checkpoint_id, self.task_id, "manifest")
            entries = store.describe(folder, os.listdir(folder), self._hashes)
            written = store.upload(checkpoint_id, self.task_id, folder, entries)
        except OSError as exc:
            raise self._upload_failed(checkpoint_id, path, exc) from exc
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return sum(entry.size for entry in entries), written

    def _save_layout(self, store: CheckpointStore, checkpoint_id: int, backend: str) -> None:
        """Write the component's layout with the checkpoint (the task of index 0 does)."""
        if self._layout is not None and self._layout.task_index == 0:
            store.save_component(checkpoint_id, self.component, self._layout.record(backend))

    def _upload_failed(self, checkpoint_id: int, path: str,
                       exc: BaseException) -> TopologyRuntimeError:
        msg = (f"cannot write checkpoint {checkpoint_id} to {path}: {exc}. Fix: "
               f"{_FIX_ROOT}")
        return TopologyRuntimeError(msg, component=self.component, task_id=self.task_id)

    # ---- timers (instance.timers): a file per task beside the state -------------------------
    def _timers_job(self, checkpoint_id: int) -> Callable[[bool], None] | None:
        """Return the upload job of this task's timers as they are now (None: it keeps none).

        The loop thread copies them (plain data); the uploader thread pickles and writes them
        (and, called with True, the component's layout, which a state upload writes otherwise).
        """
        if self.timers is None:
            return None
        data = self.timers.snapshot()
        return lambda layout: self._upload_timers(checkpoint_id, data, layout)

    def _upload_timers(self, checkpoint_id: int, data: dict, layout: bool) -> None:
        path = posixpath.join(self._root, self._topology, str(checkpoint_id))
        try:
            encoded = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - pickling raises anything
            msg = (f"cannot pickle the timers for checkpoint {checkpoint_id}: {exc}. Fix: "
                   f"register timers only under picklable keys")
            raise TopologyRuntimeError(msg, component=self.component,
                                       task_id=self.task_id) from exc
        try:
            store = self._upload_store()
            if layout:
                self._save_layout(store, checkpoint_id, self.settings.backend)
            path = store.path(checkpoint_id, self.task_id, TIMERS_SUFFIX)
            store.save_extra(checkpoint_id, self.task_id, TIMERS_SUFFIX, encoded)
        except OSError as exc:
            raise self._upload_failed(checkpoint_id, path, exc) from exc

    def _load_timers(self, timers: KeyedTimers, checkpoint_id: int) -> None:
        """Put the timers of ``checkpoint_id`` (0: none) this task owns now into ``timers``.

        The same split as a memory state's: the same parallelism reads the task of the same
        index; a new one takes, from every old task, the timers of the key groups it owns now.
        """
        if not checkpoint_id:
            timers.restore(merge_snapshots([]))
            return
        sources, owned = self._restore_plan(checkpoint_id)
        parts = []
        for task, theirs in sources:
            data = self._read_timers(checkpoint_id, task)
            if theirs is None or owned is None:
                parts.append(data)
                continue
            assert self._layout is not None  # a split comes from the layout
            for group, part in split_by_key_group(data, self._layout.max_parallelism).items():
                if group not in theirs:
                    key = next(iter(part["event"] or part["processing"]))[0]
                    raise self._not_keyed(checkpoint_id, task, key, group)
                if group in owned:
                    parts.append(part)
        timers.restore(merge_snapshots(parts))

    def _read_timers(self, checkpoint_id: int, task: int) -> dict:
        path = self.store.path(checkpoint_id, task, TIMERS_SUFFIX)
        try:
            encoded = self.store.load_extra(checkpoint_id, task, TIMERS_SUFFIX)
            if encoded is None:
                raise self._missing(checkpoint_id, path)
            data = pickle.loads(encoded)
            check_snapshot(data)
            return data
        except TopologyRuntimeError:
            raise
        except Exception as exc:  # noqa: BLE001 - unpickling raises anything
            raise self._corrupt(checkpoint_id, path, exc) from exc
