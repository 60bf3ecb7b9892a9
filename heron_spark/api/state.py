"""Stateful components (heronpy's ``heronpy.api.state``): state saved at checkpoints.

Under ``topology.reliability.mode: EFFECTIVELY_ONCE`` the runtime checkpoints every
``topology.stateful.checkpoint.interval.seconds``: each task's ``State`` is saved when the
checkpoint's markers reach it (Chandy-Lamport barriers aligned by the stmgrs), and after any
failure every task restarts from the last checkpoint all tasks saved, with spouts rewound.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class State(ABC):
    """A task's key/value state, as stateful spouts and bolts see it."""

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


class HashMapState(State):
    """The default ``State``: a dict. Keys and values must be picklable."""

    def __init__(self, items: dict | None = None) -> None:
        self._dict = dict(items or {})

    def put(self, key, value) -> None:
        """Set ``key`` to ``value``."""
        self._dict[key] = value

    def get(self, key):
        """Return the value of ``key`` (None when absent)."""
        return self._dict.get(key)

    def enumerate(self):
        """Return ``enumerate`` over the keys, as heronpy's does."""
        return enumerate(self._dict)

    def clear(self) -> None:
        """Remove every key."""
        self._dict.clear()

    # Python conveniences (not in heronpy)
    def items(self):
        """Return the (key, value) pairs."""
        return self._dict.items()

    def to_dict(self) -> dict:
        """Return a copy as a dict."""
        return dict(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __contains__(self, key) -> bool:
        return key in self._dict

    def __str__(self) -> str:
        return str(self._dict)

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


__all__ = ["HashMapState", "State", "StatefulComponent"]
