"""The ``rocksdb`` state backend: a task's state in a RocksDB database on local disk.

One database per task, under ``<heron.work.dir>/state/<topology>/task-<id>/db``, opened through
the ``rocksdict`` package (``pip install 'heron_spark[rocksdb]'``). Keys and values are written
with the topology's serializer (``topology.serializer.classname``; pickle by default), each
value behind 8 bytes holding its expiry time (a big-endian double of wall-clock seconds, 0:
never), so ``heron.state.ttl.secs`` survives a restore. Each stored key starts with its key
group (``contract.key_groups``, 2 bytes big-endian) so the database is ordered by key group and
a group's keys are one range: a restore after a rescale seeks to the groups it owns. The
stored key of a ``str`` key is remembered (a bounded dict), so a key used again is not hashed
again. ``items`` walks the database with an
iterator: nothing is loaded whole. A checkpoint is RocksDB's own (``checkpoint``): the
memtable is flushed and the SST files hard-linked into a folder, which the task's uploader
ships in the background.

Loop thread only.
"""

from __future__ import annotations

import shutil
import struct
import time
from typing import Any, Callable, Iterator

from heron_spark.api.serializer import IHeronSerializer, default_serializer
from heron_spark.api.state import State
from heron_spark.config import ROCKSDB_EXTRA, ROCKSDB_PACKAGE
from heron_spark.contract.key_groups import GROUP_PREFIX, key_group
from heron_spark.errors import ExtrasError, TopologyRuntimeError

_EXPIRY = struct.Struct(">d")
_GROUP = GROUP_PREFIX         # the key group before every stored key
_RAW_KEYS_MAX = 1 << 16       # stored keys of str keys remembered (then forgotten at once)


def _short(value: Any) -> str:
    """Return ``repr(value)``, cut to 60 characters for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def rocksdict_module(component: str | None = None) -> Any:
    """Return the ``rocksdict`` module, or raise ``ExtrasError`` naming the extra."""
    try:
        import rocksdict
    except ImportError as exc:
        raise ExtrasError(ROCKSDB_PACKAGE, ROCKSDB_EXTRA, component=component,
                          what="the rocksdb state backend") from exc
    return rocksdict


class RocksDBState(State):
    """A task's state in the RocksDB database at ``path`` (see the module docstring)."""

    def __init__(self, path: str, serializer: IHeronSerializer | None = None, *,
                 ttl_secs: float = 0.0, clock: Callable[[], float] = time.time,
                 component: str | None = None, max_parallelism: int = 128) -> None:
        self._rocksdict = rocksdict_module(component)
        self.component = component
        self.path = path
        self.max_parallelism = max_parallelism  # topology.max.parallelism: the key groups
        self._raw_keys: dict[str, bytes] = {}
        self.ttl_secs = ttl_secs
        self._clock = clock
        serializer = serializer or default_serializer
        self._serialize, self._loads = serializer.serialize, serializer.deserialize
        self._db = self._open()

    def _dumps(self, value) -> bytes:
        """Serialize a key or value; one clear error when the serializer cannot."""
        try:
            return self._serialize(value)
        except Exception as exc:  # noqa: BLE001 - a serializer raises anything
            msg = (f"the rocksdb state cannot store the {type(value).__name__} "
                   f"{_short(value)}: the topology's serializer failed ({exc}). Fix: put only "
                   "keys and values the serializer (topology.serializer.classname, pickle by "
                   "default) can write, such as numbers, strings, lists and dicts of them")
            raise TopologyRuntimeError(msg, component=self.component) from exc

    def _open(self):
        options = self._rocksdict.Options(raw_mode=True)
        options.create_if_missing(True)
        return self._rocksdict.Rdict(self.path, options)

    def _raw(self, key) -> bytes:
        """Return the stored key of ``key``: its key group, then the key serialized."""
        if type(key) is str:
            raw = self._raw_keys.get(key)
            if raw is None:
                if len(self._raw_keys) >= _RAW_KEYS_MAX:
                    self._raw_keys.clear()
                raw = self._raw_keys[key] = _GROUP.pack(
                    key_group(key, self.max_parallelism)) + self._dumps(key)
            return raw
        return _GROUP.pack(key_group(key, self.max_parallelism)) + self._dumps(key)

    def put(self, key, value) -> None:
        """Set ``key`` to ``value`` (with a TTL: for ``ttl_secs`` from now)."""
        expiry = self._clock() + self.ttl_secs if self.ttl_secs else 0.0
        self._db.put(self._raw(key), _EXPIRY.pack(expiry) + self._dumps(value))

    def get(self, key):
        """Return the value of ``key`` (None when absent or expired)."""
        raw_key = self._raw(key)
        raw = self._db.get(raw_key)
        if raw is None:
            return None
        expiry = _EXPIRY.unpack_from(raw)[0]
        if expiry and expiry <= self._clock():
            self._db.delete(raw_key)
            return None
        return self._loads(raw[_EXPIRY.size:])

    def delete(self, key) -> None:
        """Remove ``key`` (nothing happens when it is absent)."""
        self._db.delete(self._raw(key))

    def enumerate(self):
        """Return ``enumerate`` over the live keys, as heronpy's does."""
        return enumerate(key for key, _ in self.items())

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Iterate over the live (key, value) pairs with a database iterator."""
        now = self._clock()
        loads, size, group = self._loads, _EXPIRY.size, _GROUP.size
        for raw_key, raw in self._db.items():
            expiry = _EXPIRY.unpack_from(raw)[0]
            if not expiry or expiry > now:
                yield loads(raw_key[group:]), loads(raw[size:])

    def clear(self) -> None:
        """Remove every key (the database starts over, empty)."""
        self._db.close()
        shutil.rmtree(self.path, ignore_errors=True)
        self._db = self._open()

    def absorb(self, path: str, owned: range, theirs: range,
               max_parallelism: int) -> tuple[Any, int] | None:
        """Copy the keys of the key groups ``owned`` from the database at ``path``.

        A restore after a rescale: ``path`` holds an old task's database, which owned the
        groups ``theirs``; the stored keys of ``owned`` within them are one range, copied in
        one write batch. Return ``(key, group)`` of a key outside ``theirs`` (the state is not
        keyed by the grouping: the restore must fail), else None. The other database is opened
        read only and closed.
        """
        options = self._rocksdict.Options(raw_mode=True)
        old = self._rocksdict.Rdict(path, options,
                                    access_type=self._rocksdict.AccessType.read_only())
        try:
            for raw_key, _ in old.items():  # the first key: below theirs?
                group = _GROUP.unpack_from(raw_key)[0]
                if group < theirs.start:
                    return self._loads(raw_key[_GROUP.size:]), group
                break
            first = max(owned.start, theirs.start)
            stop = _GROUP.pack(min(owned.stop, theirs.stop))
            batch = self._rocksdict.WriteBatch(raw_mode=True)
            for raw_key, raw in old.items(from_key=_GROUP.pack(first)):
                if raw_key[:_GROUP.size] >= stop:
                    break
                batch.put(raw_key, raw)
            self._db.write(batch)
            if theirs.stop < max_parallelism:  # any key above theirs?
                for raw_key, _ in old.items(from_key=_GROUP.pack(theirs.stop)):
                    group = _GROUP.unpack_from(raw_key)[0]
                    return self._loads(raw_key[_GROUP.size:]), group
        finally:
            old.close()
        return None

    def checkpoint(self, folder: str) -> None:
        """Write a RocksDB checkpoint into ``folder`` (must not exist): flush, hard-link SSTs."""
        self._rocksdict.Checkpoint(self._db).create_checkpoint(folder)

    def estimated_keys(self) -> int:
        """Return RocksDB's estimate of the keys held (expired ones not yet removed count)."""
        return int(self._db.property_int_value("rocksdb.estimate-num-keys") or 0)

    def close(self) -> None:
        """Close the database (idempotent)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def __len__(self) -> int:
        return sum(1 for _ in self.items())
