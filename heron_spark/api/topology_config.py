"""The topology config keys the runtime acts on, read once into a typed ``TopologyConfig``.

A topology's config is a dict of heronpy keys (``topology.message.timeout.secs``, ...) that user
code sees as is. The runtime does not read that dict by key: ``TopologyConfig.from_config``
parses and checks the keys it acts on once, and every role reads the typed fields. Each default
is written here and nowhere else; ``Topology`` classes put ``default_topology_config()`` into
their config so user code sees the same values.

Two views exist. The logical plan builds the topology's (``LogicalPlan.topology_config``) and
one per component from the component's merged config, topology keys overridden by the
component's own (``ComponentDecl.topology_config``): a bolt's tick frequency and auto-ack, a
spout's max pending trees and message timeout come from its component's view (a component's
config may override them, as in Heron; the stmgr keeps a spout's trees by the same view,
``stmgr.ack_routing.tree_lifetimes``). Reliability mode, checkpoint interval and container count are
topology-wide: read them from the topology's view.

Imports only ``api_constants`` and ``errors``, so every package (the user API included) may
import it. Usable on the driver and in tasks; instances are immutable.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from heron_spark.api import api_constants as keys
from heron_spark.contract.key_groups import MAX_KEY_GROUPS
from heron_spark.errors import TopologyValueError

Mode = keys.TopologyReliabilityMode
RELIABILITY_MODES = (Mode.ATMOST_ONCE, Mode.ATLEAST_ONCE, Mode.EFFECTIVELY_ONCE)
WATERMARK_INTERVAL_MIN_MS = 10


@dataclasses.dataclass(frozen=True)
class TopologyConfig:
    """The typed topology settings: the defaults below, overridden by the config's keys."""

    # topology.reliability.mode; without it, topology.enable.acking: true means ATLEAST_ONCE
    # (Heron's TopologyConfigHelper: the mode wins when both are set)
    reliability_mode: str = Mode.ATMOST_ONCE
    # topology.message.timeout.secs: a tuple tree still open this long fails (heronpy: 30)
    message_timeout_secs: float = 30.0
    # topology.enable.message.timeouts: false means trees never time out
    message_timeouts_enabled: bool = True
    # topology.max.spout.pending: open trees per spout task at most; None (or 0): no cap
    max_spout_pending: int | None = 100
    # topology.stateful.checkpoint.interval.seconds: effectively once, between checkpoints
    checkpoint_interval_secs: float = 5.0
    # topology.tick.tuple.freq.secs: a bolt gets a tick tuple this often; 0: no ticks
    tick_tuple_freq_secs: float = 0.0
    # topology.bolt.auto.ack: each input is acked after process() returns (at-least-once)
    bolt_auto_ack: bool = False
    # topology.stmgrs: the number of containers (one stream manager each)
    stmgrs: int = 1
    # topology.debug: heronpy's flag; user code may read it
    debug: bool = False
    # topology.max.parallelism: the number of key groups (contract.key_groups): a fields-grouped
    # key's task and a stateful task's share of keyed state; >= every component's parallelism,
    # and fixed for the topology's life (a rescale moves whole key groups)
    max_parallelism: int = 128
    # Event time (a spout's view): topology.bolts.tuple.timestamp.field.name, the output field
    # holding each tuple's event time in ms (None: only emit(timestamp=) gives one)
    timestamp_field: str | None = None
    # topology.bolts.tuple.timestamp.max.lag.ms: the watermark trails the newest timestamp by this
    watermark_lag_ms: int = 0
    # topology.bolts.watermark.event.interval.ms: a spout task sends its watermark this often
    watermark_interval_ms: int = 1000
    # heron.watermark.idle.ms: no event-time tuple this long (not backpressured): idle; 0: never
    watermark_idle_ms: int = 5000

    @property
    def at_least_once(self) -> bool:
        """True under ``ATLEAST_ONCE``: spouts' trees are tracked, acked and failed."""
        return self.reliability_mode == Mode.ATLEAST_ONCE

    @property
    def effectively_once(self) -> bool:
        """True under ``EFFECTIVELY_ONCE``: task state is checkpointed and rolled back."""
        return self.reliability_mode == Mode.EFFECTIVELY_ONCE

    @property
    def message_timeout_or_none_secs(self) -> float | None:
        """Return the message timeout in seconds, None when timeouts are turned off."""
        return self.message_timeout_secs if self.message_timeouts_enabled else None

    @classmethod
    def from_config(cls, config: Mapping[str, Any],
                    component: str | None = None) -> "TopologyConfig":
        """Read a topology's or a component's merged config into a ``TopologyConfig``.

        Values may be strings, as Heron passes them. A value the runtime cannot use raises
        ``TopologyValueError`` (kind ``"config"``) naming the key, the value and the fix;
        ``component`` names the component in that error.
        """
        default = cls()
        mode = config.get(keys.TOPOLOGY_RELIABILITY_MODE)
        if mode is None:
            acking = _bool(config, keys.TOPOLOGY_ENABLE_ACKING, False, component)
            mode = Mode.ATLEAST_ONCE if acking else default.reliability_mode
        if mode not in RELIABILITY_MODES:  # Heron refuses it too
            raise _error(keys.TOPOLOGY_RELIABILITY_MODE, mode, component, "unknown reliability mode",
                         f"set {keys.TOPOLOGY_RELIABILITY_MODE} to one of {RELIABILITY_MODES}")
        return cls(
            reliability_mode=mode,
            message_timeout_secs=_seconds(config, keys.TOPOLOGY_MESSAGE_TIMEOUT_SECS,
                                          default.message_timeout_secs, component),
            message_timeouts_enabled=_bool(config, keys.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS,
                                           default.message_timeouts_enabled, component),
            max_spout_pending=_max_pending(config, default.max_spout_pending, component),
            checkpoint_interval_secs=_seconds(
                config, keys.TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS,
                default.checkpoint_interval_secs, component),
            tick_tuple_freq_secs=_seconds(config, keys.TOPOLOGY_TICK_TUPLE_FREQ_SECS,
                                          default.tick_tuple_freq_secs, component, zero_ok=True),
            bolt_auto_ack=_bool(config, keys.TOPOLOGY_BOLT_AUTO_ACK, default.bolt_auto_ack,
                                component),
            stmgrs=_stmgrs(config, default.stmgrs, component),
            debug=_bool(config, keys.TOPOLOGY_DEBUG, default.debug, component),
            max_parallelism=_max_parallelism(config, default.max_parallelism, component),
            timestamp_field=_field_name(config, keys.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME,
                                        component),
            watermark_lag_ms=_millis(config, keys.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS,
                                     default.watermark_lag_ms, 0, component),
            watermark_interval_ms=_millis(config, keys.TOPOLOGY_BOLTS_WATERMARK_EVENT_INTERVAL_MS,
                                          default.watermark_interval_ms, WATERMARK_INTERVAL_MIN_MS,
                                          component),
            watermark_idle_ms=_millis(config, keys.HERON_WATERMARK_IDLE_MS,
                                      default.watermark_idle_ms, 0, component),
        )


def default_topology_config() -> dict[str, Any]:
    """Return the defaults user code finds in a ``Topology``'s config, under heronpy's keys.

    These are heronpy's ``TopologyType.DEFAULT_TOPOLOGY_CONFIG``.
    """
    default = TopologyConfig()
    return {
        keys.TOPOLOGY_DEBUG: default.debug,
        keys.TOPOLOGY_STMGRS: default.stmgrs,
        keys.TOPOLOGY_MESSAGE_TIMEOUT_SECS: default.message_timeout_secs,
        keys.TOPOLOGY_MAX_SPOUT_PENDING: default.max_spout_pending,
        keys.TOPOLOGY_RELIABILITY_MODE: default.reliability_mode,
        keys.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: default.message_timeouts_enabled,
    }


def _error(key: str, value: Any, component: str | None, problem: str,
           fix: str) -> TopologyValueError:
    return TopologyValueError(f"{key}: {problem}", component=component, value=value,
                              kind="config", fix=fix)


def _bool(config: Mapping[str, Any], key: str, default: bool, component: str | None) -> bool:
    """Read a bool, or the strings "true"/"false" in any case (Heron's config values are strings)."""
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise _error(key, value, component, "not a boolean", f"set {key} to true or false")


def _number(value: Any) -> float | None:
    """Return ``value`` as a finite float (numbers and numeric strings), else None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _seconds(config: Mapping[str, Any], key: str, default: float, component: str | None,
             zero_ok: bool = False) -> float:
    """Read a positive number of seconds (``zero_ok``: or 0, meaning off); None means the default."""
    value = config.get(key)
    if value is None:
        return default
    number = _number(value)
    if number is None or number < 0 or (number == 0 and not zero_ok):
        least = "0 or more (0: off)" if zero_ok else "a positive number of seconds"
        raise _error(key, value, component, "not a usable number of seconds",
                     f"set {key} to {least}, e.g. {default or 1:g}")
    return number


def _whole(value: Any) -> int | None:
    """Return ``value`` as an int when it is a whole number (or its string), else None."""
    number = _number(value)
    if number is None or number != int(number):
        return None
    return int(number)


def _max_pending(config: Mapping[str, Any], default: int | None,
                 component: str | None) -> int | None:
    key = keys.TOPOLOGY_MAX_SPOUT_PENDING
    if key not in config:
        return default
    value = config[key]
    if value is None:  # explicitly no cap
        return None
    count = _whole(value)
    if count is None or count < 0:
        raise _error(key, value, component, "not a usable number of tuple trees",
                     f"set {key} to a whole number >= 1, or None for no cap")
    return count or None  # 0: no cap, as before


def _stmgrs(config: Mapping[str, Any], default: int, component: str | None) -> int:
    key = keys.TOPOLOGY_STMGRS
    value = config.get(key, default)
    count = _whole(value)
    if count is None or count < 1:  # Heron parses it as the container count
        raise _error(key, value, component, "must be an integer >= 1",
                     "set it to the number of containers")
    return count


def _max_parallelism(config: Mapping[str, Any], default: int, component: str | None) -> int:
    key = keys.TOPOLOGY_MAX_PARALLELISM
    value = config.get(key, default)
    count = _whole(value)
    if count is None or not 1 <= count <= MAX_KEY_GROUPS:
        raise _error(key, value, component, f"must be an integer from 1 to {MAX_KEY_GROUPS}",
                     f"set it to at least the largest parallelism the topology will ever have "
                     f"(default {default})")
    return count


def _millis(config: Mapping[str, Any], key: str, default: int, least: int,
            component: str | None) -> int:
    """Read a whole number of milliseconds, at least ``least``; None means the default."""
    value = config.get(key)
    if value is None:
        return default
    count = _whole(value)
    if count is None or count < least:
        raise _error(key, value, component, f"must be a whole number of milliseconds >= {least}",
                     f"set {key} to milliseconds >= {least}, e.g. {default or 1000}")
    return count


def _field_name(config: Mapping[str, Any], key: str, component: str | None) -> str | None:
    value = config.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _error(key, value, component, "must name a field",
                     f"set {key} to the name of the field holding the event time in ms")
    return value
