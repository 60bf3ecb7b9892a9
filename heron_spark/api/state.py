"""Stateful components (heronpy's ``heronpy.api.state``): state saved at checkpoints.

Under ``topology.reliability.mode: EFFECTIVELY_ONCE`` the runtime checkpoints every
``topology.stateful.checkpoint.interval.seconds``: each task's ``State`` is saved when the
checkpoint's markers reach it (Chandy-Lamport barriers aligned by the stmgrs), and after any
failure every task restarts from the last checkpoint all tasks saved, with spouts rewound.

``heron.state.backend`` picks where a task's state lives: ``memory`` (``HashMapState``, a dict,
the default) or ``rocksdb`` (a RocksDB database per task on local disk, for state larger than
memory). ``heron.state.ttl.secs`` gives every key a time to live: a key not written for that
long is gone (never returned by ``get``, ``items`` or ``enumerate``).
"""

from __future__ import annotations

import copy
import time
from abc import ABC, abstractmethod
from typing import Any, Callable, Iterator

Clock = Callable[[], float]

# Value types that cannot change in place: shared with a snapshot without copying.
_IMMUTABLE = frozenset({int, float, str, bytes, bool, type(None), complex})


class State(ABC):
    """A task's key/value state, as stateful spouts and bolts see it.

    ``put``, ``get``, ``enumerate`` and ``clear`` are heronpy's; ``delete`` and ``items`` are
    ours (a ``State`` of your own may leave them to these defaults).
    """

    @abstractmethod
    def put(self, key, value) -> None:
        """Set ``key`` to ``value``."""

    @abstractmethod
    def get(self, key):
        """Return the value of ``key`` (None when absent)."""

    @abstractmethod
    def enumerate(self):
        """Return an enumeration of the keys, as heronpy's does (``enumerate(keys)``)."""

    @abstractmethod
    def clear(self) -> None:
        """Remove every key."""

    def delete(self, key) -> None:
        """Remove ``key`` (nothing happens when it is absent)."""
        msg = f"{type(self).__name__} does not support delete"
        raise NotImplementedError(msg)

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Iterate over the (key, value) pairs."""
        for _, key in self.enumerate():
            yield key, self.get(key)


class HashMapState(State):
    """The ``memory`` backend: a dict. Keys and values must be picklable.

    With ``ttl_secs`` each key lives that long after its last ``put`` (``clock``: wall-clock
    seconds, ``time.time`` unless a test passes its own); an expired key is never returned.
    Loop thread only: a checkpoint takes a ``snapshot`` (a shallow copy) on that thread and
    pickles it on another. Values of a mutable type are copied on write: after a snapshot,
    the first ``get`` or ``items`` of such a value hands out a deep copy and keeps it, so a
    value changed in place (``state.get(k).append(x)``) never changes the snapshot being saved.
    """

    def __init__(self, items: dict | None = None, *, ttl_secs: float = 0.0,
                 clock: Clock = time.time) -> None:
        self.ttl_secs = ttl_secs
        self._clock = clock
        self._dict: dict = {}
        # Keys whose value is not shared with a snapshot; None: no snapshot taken yet.
        self._own: set | None = None
        for key, value in (items or {}).items():
            self.put(key, value)

    def put(self, key, value) -> None:
        """Set ``key`` to ``value`` (with a TTL: for ``ttl_secs`` from now)."""
        self._dict[key] = (self._clock() + self.ttl_secs, value) if self.ttl_secs else value
        if self._own is not None and type(value) not in _IMMUTABLE:
            self._own.add(key)

    def get(self, key):
        """Return the value of ``key`` (None when absent or expired)."""
        if not self.ttl_secs:
            value = self._dict.get(key)
        else:
            entry = self._dict.get(key)
            if entry is None:
                return None
            if entry[0] <= self._clock():
                del self._dict[key]
                return None
            value = entry[1]
        if self._own is None or type(value) in _IMMUTABLE or key in self._own:
            return value
        return self._unshare(key, value)

    def _unshare(self, key, value):
        """Replace ``key``'s value, shared with a snapshot, by a deep copy; return the copy."""
        value = copy.deepcopy(value)
        if self.ttl_secs:
            self._dict[key] = (self._dict[key][0], value)
        else:
            self._dict[key] = value
        assert self._own is not None
        self._own.add(key)
        return value

    def delete(self, key) -> None:
        """Remove ``key`` (nothing happens when it is absent)."""
        self._dict.pop(key, None)

    def enumerate(self):
        """Return ``enumerate`` over the live keys, as heronpy's does."""
        return enumerate(key for key, _ in self.items())

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Iterate over the live (key, value) pairs (a copy of the keys is not taken)."""
        if not self.ttl_secs:
            pairs: Iterator[tuple[Any, Any]] = iter(self._dict.items())
        else:
            now = self._clock()
            pairs = ((key, entry[1]) for key, entry in self._dict.items() if entry[0] > now)
        if self._own is None:
            return pairs
        return self._unshared(pairs)

    def _unshared(self, pairs: Iterator[tuple[Any, Any]]) -> Iterator[tuple[Any, Any]]:
        own = self._own
        assert own is not None
        for key, value in pairs:
            if type(value) in _IMMUTABLE or key in own:
                yield key, value
            else:  # replacing a present key's value leaves the dict's iteration valid
                yield key, self._unshare(key, value)

    def clear(self) -> None:
        """Remove every key."""
        self._dict.clear()

    def expire(self) -> int:
        """Drop every expired key now; return how many (``get`` drops them one by one)."""
        if not self.ttl_secs:
            return 0
        now = self._clock()
        dead = [key for key, entry in self._dict.items() if entry[0] <= now]
        for key in dead:
            del self._dict[key]
        return len(dead)

    def snapshot(self) -> tuple[float, dict]:
        """Return ``(ttl_secs, entries)``: a shallow copy, nothing serialized (loop thread).

        From now on every value of a mutable type is copied before it is handed out again.
        """
        self._own = set()
        return self.ttl_secs, self._dict.copy()

    def restore(self, ttl_secs: float, entries: dict) -> None:
        """Replace the contents with a ``snapshot``'s (written with TTL ``ttl_secs`` or none)."""
        if bool(ttl_secs) == bool(self.ttl_secs):
            self._dict = dict(entries)
            return
        self._dict = {}
        if ttl_secs:  # the checkpoint had a TTL, this run has none: keep the live keys
            now = self._clock()
            entries = {key: entry[1] for key, entry in entries.items() if entry[0] > now}
        for key, value in entries.items():
            self.put(key, value)

    def to_dict(self) -> dict:
        """Return a copy of the live pairs as a dict."""
        return dict(self.items())

    def __len__(self) -> int:
        return len(self._dict) if not self.ttl_secs else sum(1 for _ in self.items())

    def __contains__(self, key) -> bool:
        return self.get(key) is not None if self.ttl_secs else key in self._dict

    def __str__(self) -> str:
        return str(self.to_dict())

    __repr__ = __str__


class StatefulComponent:
    """Mix into a ``Spout`` or ``Bolt`` whose state must survive failures exactly once.

    ``init_state`` is called before ``initialize``, with the state of the last committed
    checkpoint (empty on a fresh start): keep it and keep your state in it, or copy your state
    into it in ``pre_save``, which runs just before the state is saved.
    """

    def init_state(self, stateful_state: State) -> None:
        """Take the recovered state (keep a reference: it is what gets saved)."""

    def pre_save(self, checkpoint_id) -> None:
        """Prepare the state: called just before it is saved for checkpoint ``checkpoint_id``."""


class TwoPhaseStatefulComponent(StatefulComponent):
    """A ``StatefulComponent`` told when its checkpoints commit (Heron 0.20's two-phase one).

    For components whose output leaves the topology (a transactional sink, offsets committed
    to an outside system): write the output of an interval in ``pre_save`` terms, make it
    visible in ``post_save``. ``post_save(checkpoint_id)`` runs once checkpoint
    ``checkpoint_id`` is committed, every task having saved it, and the commit recorded, so no
    rollback ever goes behind it; it covers every earlier checkpoint too (a task may miss
    the notice of one, for instance while it restores). ``pre_restore(checkpoint_id)`` runs on
    the component before a rollback to ``checkpoint_id`` throws it away (a new instance of the
    class gets ``init_state`` with that checkpoint's state): undo or release what was prepared
    after it. A task whose process died gets no ``pre_restore``: its successor finds what it
    left in the restored state. The TMaster pushes both (no polling); they run on the task's
    thread, between tuples.
    """

    def post_save(self, checkpoint_id) -> None:
        """Checkpoint ``checkpoint_id`` (and every one before it) is committed."""

    def pre_restore(self, checkpoint_id) -> None:
        """Prepare for a rollback to ``checkpoint_id``: this instance is thrown away next."""


__all__ = ["HashMapState", "State", "StatefulComponent", "TwoPhaseStatefulComponent"]
