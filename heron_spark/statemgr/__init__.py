"""State managers: pick one from a URL with ``open_state_manager``."""

from __future__ import annotations

from urllib.parse import urlparse

from heron_spark.config import STATEMGR
from heron_spark.errors import ConfigError
from heron_spark.statemgr.base import StateManager
from heron_spark.statemgr.localfs import LocalFileStateManager
from heron_spark.statemgr.zookeeper import ZooKeeperStateManager


def open_state_manager(url: str) -> StateManager:
    """Return the state manager ``url`` names; ConfigError (key ``heron.statemgr``) if none.

    ``file:///path`` or a bare path: ``LocalFileStateManager``.
    ``zk://[user:password@]host:port[,host:port]/root[?session_timeout_secs=..&
    connect_timeout_secs=..]``: ``ZooKeeperStateManager``, connected before this returns.
    """
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return LocalFileStateManager(parsed.path or url)
    if parsed.scheme == "zk":
        return ZooKeeperStateManager.from_url(url)
    raise ConfigError(STATEMGR, url, "use file:///path or zk://host:port/root")


__all__ = ["LocalFileStateManager", "StateManager", "ZooKeeperStateManager",
           "open_state_manager"]
