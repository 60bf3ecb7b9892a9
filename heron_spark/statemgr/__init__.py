"""State managers: pick one from a URL with ``open_state_manager``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from heron_spark.config import STATEMGR
from heron_spark.errors import ConfigError
from heron_spark.statemgr.base import StateManager
from heron_spark.statemgr.localfs import LocalFileStateManager

if TYPE_CHECKING:
    from heron_spark.statemgr.zookeeper import ZooKeeperStateManager


def __getattr__(name: str) -> Any:
    # ZooKeeperStateManager on first use: kazoo would cost memory in every process that never
    # talks to ZooKeeper (an instance, a file-state-manager stmgr).
    if name == "ZooKeeperStateManager":
        from heron_spark.statemgr.zookeeper import ZooKeeperStateManager

        return ZooKeeperStateManager
    message = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(message)


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
        from heron_spark.statemgr.zookeeper import ZooKeeperStateManager

        return ZooKeeperStateManager.from_url(url)
    raise ConfigError(STATEMGR, url, "use file:///path or zk://host:port/root")


__all__ = ["LocalFileStateManager", "StateManager", "ZooKeeperStateManager",
           "open_state_manager"]


def tmaster_address(tmaster: str, url: str, topology: str,
                    timeout_secs: float) -> tuple[str, int]:
    """Return the TMaster's ``(host, port)`` from a child's ``--tmaster`` value.

    ``host:port`` as is; ``statemgr@<generation>`` (a TMaster in container 0): wait up to
    ``timeout_secs`` for that generation's TMaster to claim its location in the state
    manager at ``url``.
    """
    from heron_spark.contract.child_args import statemgr_generation

    generation = statemgr_generation(tmaster)
    if generation is None:
        host, _, port = tmaster.rpartition(":")
        return host, int(port)
    from heron_spark.statemgr.base import wait_tmaster

    with open_state_manager(url) as statemgr:
        return wait_tmaster(statemgr, topology, generation, timeout_secs)
