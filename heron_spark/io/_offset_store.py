"""Where a replayable spout keeps its offsets: ``OffsetStore``. Runs in a Heron Instance.

Under effectively once the offsets are part of each checkpoint (the task's ``State``, given
by ``init_state``, under one key); otherwise they go to the state manager's spout store,
saved at most every ``interval`` seconds while they change, and at close. ``FileSpout`` and
``FileSource`` keep theirs here.
"""

from __future__ import annotations

import time


class OffsetStore:
    """One spout task's committed offsets (see the module docstring)."""

    def __init__(self, spout, checkpointed, key: str, interval_secs: float) -> None:
        self._checkpointed = checkpointed
        self._store = None if checkpointed is not None else spout.delegate.spout_state_store()
        self._key = key
        self._interval = interval_secs
        self._saved_at = time.monotonic()

    def load(self) -> dict:
        """Return the offsets saved last (an empty dict for a new run)."""
        if self._store is None:
            return self._checkpointed.get(self._key) or {}
        return self._store.load() or {}

    def due(self) -> bool:
        """Tell whether ``interval_secs`` passed since the last save."""
        return time.monotonic() - self._saved_at >= self._interval

    def save(self, state: dict) -> None:
        """Save ``state``: into the checkpoint's state, or to the state manager."""
        if self._store is None:
            self._checkpointed.put(self._key, state)
        else:
            self._store.save(state)
        self._saved_at = time.monotonic()
