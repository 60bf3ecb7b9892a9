"""How a streamlet topology runs (heronpy's streamlet ``Config``).

Delivery semantics, containers, resources and user keys, kept as ordinary topology config keys.
"""

from __future__ import annotations

from typing import Any

from heron_spark.api import api_constants as keys
from heron_spark.errors import TopologyTypeError, TopologyValueError
from heron_spark.streamlet.resources import Resources


class Config:
    """Topology configuration for ``Runner.run`` (or ``Builder.topology``)."""

    ATMOST_ONCE = 1
    ATLEAST_ONCE = 2
    EFFECTIVELY_ONCE = 3
    _MODES = {ATMOST_ONCE: keys.TopologyReliabilityMode.ATMOST_ONCE,
              ATLEAST_ONCE: keys.TopologyReliabilityMode.ATLEAST_ONCE,
              EFFECTIVELY_ONCE: keys.TopologyReliabilityMode.EFFECTIVELY_ONCE}

    def __init__(self, config: dict | None = None) -> None:
        if config is not None and not isinstance(config, dict):
            msg = "Config takes a dict of topology config keys"
            raise TopologyTypeError(msg, value=config, fix="pass Config({'key': value}) or Config()")
        self._api_config: dict[str, Any] = dict(config or {})

    def set_delivery_semantics(self, semantics: int) -> None:
        """Set the delivery semantics (``topology.reliability.mode``).

        From ``Config.ATMOST_ONCE`` / ``ATLEAST_ONCE`` / ``EFFECTIVELY_ONCE``.
        """
        mode = self._MODES.get(semantics) if not isinstance(semantics, bool) else None
        if mode is None:
            msg = "unknown delivery semantics"
            raise TopologyValueError(msg, value=semantics,
                                     kind="config", fix="pass Config.ATMOST_ONCE, "
                                     "Config.ATLEAST_ONCE or Config.EFFECTIVELY_ONCE")
        self._api_config[keys.TOPOLOGY_RELIABILITY_MODE] = mode

    def set_num_containers(self, ncontainers: int) -> None:
        """Set the number of containers (``topology.stmgrs``)."""
        self._api_config[keys.TOPOLOGY_STMGRS] = int(ncontainers)

    def set_container_resources(self, resources: Resources) -> None:
        """Record the CPU and RAM each container requests."""
        if not isinstance(resources, Resources):
            msg = "container resources must be a Resources"
            raise TopologyTypeError(msg, value=resources,
                                    fix="pass Resources().set_cpu(...).set_ram_in_mb(...)")
        self._api_config[keys.TOPOLOGY_CONTAINER_CPU_REQUESTED] = resources.get_cpu()
        self._api_config[keys.TOPOLOGY_CONTAINER_RAM_REQUESTED] = resources.get_ram()

    def set_user_config(self, key: str, value: Any) -> None:
        """Set any topology config key (every operator sees it in ``Context.get_config()``)."""
        self._api_config[key] = value

    def as_dict(self) -> dict[str, Any]:
        """Return a copy of the topology config keys (heron_spark)."""
        return dict(self._api_config)
