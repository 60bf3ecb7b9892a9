"""The ``rocksdb`` state backend: a task's state in a RocksDB database on local disk.

One database per task, under ``<heron.work.dir>/state/<topology>/task-<id>/db``, opened through
the ``rocksdict`` package (``pip install 'heron_spark[rocksdb]'``). Keys and values are written
with the topology's serializer (``topology.serializer.classname``; pickle by default), each
value behind 8 bytes holding its expiry time (a big-endian double of wall-clock seconds, 0:
never), so ``heron.state.ttl.secs`` survives a restore. ``items`` walks the database with an
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
from heron_spark.errors import ExtrasError

_EXPIRY = struct.Struct(">d")


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
                 component: str | None = None) -> None:
        self._rocksdict = rocksdict_module(component)
        self.path = path
        self.ttl_secs = ttl_secs
        self._clock = clock
        serializer = serializer or default_serializer
        self._dumps, self._loads = serializer.serialize, serializer.deserialize
        self._db = self._open()

    def _open(self):
        options = self._rocksdict.Options(raw_mode=True)
        options.create_if_missing(True)
        return self._rocksdict.Rdict(self.path, options)

    def put(self, key, value) -> None:
        """Set ``key`` to ``value`` (with a TTL: for ``ttl_secs`` from now)."""
        expiry = self._clock() + self.ttl_secs if self.ttl_secs else 0.0
        self._db.put(self._dumps(key), _EXPIRY.pack(expiry) + self._dumps(value))

    def get(self, key):
        """Return the value of ``key`` (None when absent or expired)."""
        raw_key = self._dumps(key)
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
        self._db.delete(self._dumps(key))

    def enumerate(self):
        """Return ``enumerate`` over the live keys, as heronpy's does."""
        return enumerate(key for key, _ in self.items())

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Iterate over the live (key, value) pairs with a database iterator."""
        now = self._clock()
        loads, size = self._loads, _EXPIRY.size
        for raw_key, raw in self._db.items():
            expiry = _EXPIRY.unpack_from(raw)[0]
            if not expiry or expiry > now:
                yield loads(raw_key), loads(raw[size:])

    def clear(self) -> None:
        """Remove every key (the database starts over, empty)."""
        self._db.close()
        shutil.rmtree(self.path, ignore_errors=True)
        self._db = self._open()

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
