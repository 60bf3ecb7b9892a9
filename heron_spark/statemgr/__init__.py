"""State managers: pick one from a URL with ``open_state_manager``."""

from __future__ import annotations

from urllib.parse import urlparse

from heron_spark.config import STATEMGR
from heron_spark.errors import ConfigError
from heron_spark.statemgr.base import StateManager
from heron_spark.statemgr.localfs import LocalFileStateManager


def open_state_manager(url: str) -> StateManager:
    """Return the state manager for ``url``: ``file:///path`` (or a bare path)."""
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return LocalFileStateManager(parsed.path or url)
    if parsed.scheme == "zk":
        raise ConfigError(STATEMGR, url, "the ZooKeeper state manager is not available yet; "
                                         "use file:///path")
    raise ConfigError(STATEMGR, url, "use file:///path")


__all__ = ["LocalFileStateManager", "StateManager", "open_state_manager"]
