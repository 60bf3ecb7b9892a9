"""Read the keyed state a checkpoint holds, outside the topology: ``(task, key, value)`` rows.

What the Spark source's ``option("state", ...)`` reads (``heron_spark.sql.state``), usable on
its own. A task's state in a checkpoint is one of the ``CheckpointStore`` layouts
(``statemgr.checkpoints``): a ``memory`` task's pickled entries, or a ``rocksdb`` task's
manifest of database files (every stored key behind its 2-byte key group), which are copied
into a scratch folder (each checked against its SHA-256) and opened read-only with
``rocksdict``; keys and values are decoded with the topology's serializer, as the task
decodes them. Keys whose time to live (``heron.state.ttl.secs``) ran out by ``now`` are
skipped, as the task's ``get`` skips them.

``saved_tasks`` lists which tasks saved state in a checkpoint; ``read_task_state`` iterates one
task's pairs. Nothing is loaded whole but a ``memory`` task's pickle (which the task itself
holds whole). Neither touches the checkpoint: a reader never deletes or writes there.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import time
from typing import Any, Iterator

from heron_spark.api.serializer import IHeronSerializer, default_serializer
from heron_spark.config import ROCKSDB_EXTRA, ROCKSDB_PACKAGE
from heron_spark.errors import ExtrasError
from heron_spark.contract.key_groups import GROUP_PREFIX
from heron_spark.statemgr.checkpoints import CheckpointStore, decode_memory_state

MEMORY = "state"  # file suffixes of the two layouts
ROCKSDB = "manifest"
_EXPIRY = struct.Struct(">d")  # rocksdb values: the expiry (0: never), then the value


def saved_tasks(store: CheckpointStore, checkpoint_id: int) -> dict[int, str]:
    """Return the tasks that saved state in ``checkpoint_id``: task id -> ``state``/``manifest``.

    A task that is not a ``StatefulComponent`` saves nothing, so it is not listed.
    """
    import pyarrow.fs as pafs

    folder = os.path.dirname(store.path(checkpoint_id, 0))
    found: dict[int, str] = {}
    try:
        infos = store.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
    except OSError:
        return found
    for info in infos:
        stem, _, suffix = info.base_name.partition(".")
        if stem.isdigit() and suffix in (MEMORY, ROCKSDB) and info.type == pafs.FileType.File:
            found[int(stem)] = suffix
    return found


def read_task_state(store: CheckpointStore, checkpoint_id: int, task: int, layout: str,
                    serializer: IHeronSerializer | None = None,
                    now: float | None = None) -> Iterator[tuple[Any, Any]]:
    """Iterate ``task``'s live ``(key, value)`` pairs in ``checkpoint_id`` (``layout``: a suffix).

    Raise ``ValueError`` when the task's files are missing or damaged, ``ExtrasError`` when a
    ``rocksdb`` checkpoint is read without ``rocksdict``.
    """
    now = time.time() if now is None else now
    if layout == MEMORY:
        return _memory_pairs(store, checkpoint_id, task, now)
    return _rocksdb_pairs(store, checkpoint_id, task, serializer or default_serializer, now)


def _memory_pairs(store: CheckpointStore, checkpoint_id: int, task: int,
                  now: float) -> Iterator[tuple[Any, Any]]:
    path = store.path(checkpoint_id, task)
    data = store.load(checkpoint_id, task)
    if data is None:
        msg = f"{path} is gone"
        raise ValueError(msg)
    try:
        ttl_secs, entries = decode_memory_state(data)
    except Exception as exc:  # noqa: BLE001 - unpickling raises anything
        msg = f"{path} does not unpickle as a task's state: {exc}"
        raise ValueError(msg) from exc
    if not ttl_secs:
        yield from entries.items()
        return
    for key, (expiry, value) in entries.items():
        if expiry > now:
            yield key, value


def _rocksdb_pairs(store: CheckpointStore, checkpoint_id: int, task: int,
                   serializer: IHeronSerializer, now: float) -> Iterator[tuple[Any, Any]]:
    try:
        import rocksdict
    except ImportError as exc:
        raise ExtrasError(ROCKSDB_PACKAGE, ROCKSDB_EXTRA,
                          what="reading a rocksdb checkpoint") from exc
    entries = store.load_manifest(checkpoint_id, task)
    if entries is None:
        msg = f"{store.path(checkpoint_id, task, ROCKSDB)} is gone"
        raise ValueError(msg)
    scratch = tempfile.mkdtemp(prefix=f"heron-spark-state-{checkpoint_id}-{task}-")
    try:
        for entry in entries:
            store.download(checkpoint_id, task, entry, os.path.join(scratch, entry.name))
        options = rocksdict.Options(raw_mode=True)
        db: Any = rocksdict.Rdict(scratch, options,  # raw mode: keys and values are bytes
                                  access_type=rocksdict.AccessType.read_only())
        try:
            loads, size, prefix = serializer.deserialize, _EXPIRY.size, GROUP_PREFIX.size
            for raw_key, raw in db.items():
                expiry = _EXPIRY.unpack_from(raw)[0]
                if not expiry or expiry > now:
                    yield loads(raw_key[prefix:]), loads(raw[size:])
        finally:
            db.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
