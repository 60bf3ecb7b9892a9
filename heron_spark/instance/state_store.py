"""Where a spout task keeps its source offsets: the topology's state manager (``FileSpout``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from heron_spark.statemgr.base import StateManager


class SpoutStateStore:
    """One spout task's saved state (JSON) in the state manager; opened on first use."""

    def __init__(self, statemgr_url: str, topology: str, key: str) -> None:
        self._url = statemgr_url
        self._topology = topology
        self._key = key
        self._manager: StateManager | None = None

    def _open(self) -> StateManager:
        if self._manager is None:
            from heron_spark.statemgr import open_state_manager

            self._manager = open_state_manager(self._url)
        return self._manager

    def load(self) -> dict | None:
        """Return the last saved state, or None."""
        return self._open().get_spout_state(self._topology, self._key)

    def save(self, state: dict) -> None:
        """Replace the saved state."""
        self._open().set_spout_state(self._topology, self._key, state)
