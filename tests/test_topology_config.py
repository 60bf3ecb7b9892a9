"""TopologyConfig: the topology keys the runtime acts on, read once, defaults written once."""

import pytest

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder, TopologyValueError
from heron_spark.api import api_constants as keys
from heron_spark.api.topology import TopologyType
from heron_spark.api.topology_config import TopologyConfig, default_topology_config
from heron_spark.api.window import _check_timeout
from heron_spark.plan.logical import build_logical_plan


class _Spout(Spout):
    outputs = ["w"]

    def next_tuple(self):
        pass


class _Bolt(Bolt):
    def process(self, tup):
        pass


def _plan(config=None, bolt_config=None):
    builder = TopologyBuilder("t")
    spout = builder.add_spout("s", _Spout, par=1)
    builder.add_bolt("b", _Bolt, par=1, inputs={spout: Grouping.SHUFFLE}, config=bolt_config)
    builder.set_config(config or {})
    return build_logical_plan(builder.build())


def test_an_empty_config_reads_as_the_defaults():
    assert TopologyConfig.from_config({}) == TopologyConfig()


def test_the_topology_classes_defaults_are_the_typed_defaults():
    """The defaults user code finds in its config come from TopologyConfig, not a copy."""
    assert TopologyType.DEFAULT_TOPOLOGY_CONFIG == default_topology_config()
    assert TopologyConfig.from_config(default_topology_config()) == TopologyConfig()
    assert _plan().topology_config == TopologyConfig()


@pytest.mark.parametrize("config, mode", [
    ({}, "ATMOST_ONCE"),
    ({keys.TOPOLOGY_ENABLE_ACKING: True}, "ATLEAST_ONCE"),
    ({keys.TOPOLOGY_ENABLE_ACKING: "TRUE"}, "ATLEAST_ONCE"),
    ({keys.TOPOLOGY_ENABLE_ACKING: "false"}, "ATMOST_ONCE"),
    # Heron's TopologyConfigHelper: the mode wins over the legacy flag
    ({keys.TOPOLOGY_RELIABILITY_MODE: "ATMOST_ONCE", keys.TOPOLOGY_ENABLE_ACKING: True},
     "ATMOST_ONCE"),
    ({keys.TOPOLOGY_RELIABILITY_MODE: "EFFECTIVELY_ONCE"}, "EFFECTIVELY_ONCE"),
])
def test_reliability_mode_has_one_reading(config, mode):
    settings = TopologyConfig.from_config(config)
    assert settings.reliability_mode == mode
    assert settings.at_least_once == (mode == "ATLEAST_ONCE")
    assert settings.effectively_once == (mode == "EFFECTIVELY_ONCE")


def test_strings_are_read_as_heron_passes_them():
    settings = TopologyConfig.from_config({
        keys.TOPOLOGY_MESSAGE_TIMEOUT_SECS: "12", keys.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: "False",
        keys.TOPOLOGY_MAX_SPOUT_PENDING: "300", keys.TOPOLOGY_TICK_TUPLE_FREQ_SECS: "0.05",
        keys.TOPOLOGY_BOLT_AUTO_ACK: "true", keys.TOPOLOGY_STMGRS: "2",
        keys.TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS: "2.5"})
    assert (settings.message_timeout_secs, settings.message_timeouts_enabled,
            settings.message_timeout_or_none_secs) == (12.0, False, None)
    assert (settings.max_spout_pending, settings.tick_tuple_freq_secs, settings.bolt_auto_ack,
            settings.stmgrs, settings.checkpoint_interval_secs) == (300, 0.05, True, 2, 2.5)


@pytest.mark.parametrize("value, pending", [(None, None), (0, None), (1, 1), (250.0, 250)])
def test_max_spout_pending_none_or_zero_means_no_cap(value, pending):
    assert TopologyConfig.from_config({keys.TOPOLOGY_MAX_SPOUT_PENDING: value}
                                      ).max_spout_pending == pending


@pytest.mark.parametrize("key, value", [
    (keys.TOPOLOGY_RELIABILITY_MODE, "SOMETIMES"),
    (keys.TOPOLOGY_ENABLE_ACKING, "yes please"),
    (keys.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 0),
    (keys.TOPOLOGY_MESSAGE_TIMEOUT_SECS, "soon"),
    (keys.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, "maybe"),
    (keys.TOPOLOGY_MAX_SPOUT_PENDING, -1),
    (keys.TOPOLOGY_MAX_SPOUT_PENDING, 2.5),
    (keys.TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS, 0),
    (keys.TOPOLOGY_TICK_TUPLE_FREQ_SECS, -1),
    (keys.TOPOLOGY_BOLT_AUTO_ACK, 3),
    (keys.TOPOLOGY_STMGRS, 0),
    (keys.TOPOLOGY_STMGRS, True),
])
def test_a_bad_value_names_the_key_the_value_and_the_fix(key, value):
    with pytest.raises(TopologyValueError) as caught:
        TopologyConfig.from_config({key: value}, component="c")
    error = caught.value
    assert (error.kind, error.value, error.component) == ("config", value, "c")
    assert key in error.problem and error.fix


def test_the_plan_holds_the_topology_view_and_one_view_per_component():
    plan = _plan({keys.TOPOLOGY_RELIABILITY_MODE: "ATLEAST_ONCE",
                  keys.TOPOLOGY_MAX_SPOUT_PENDING: 50},
                 bolt_config={keys.TOPOLOGY_TICK_TUPLE_FREQ_SECS: 2,
                              keys.TOPOLOGY_BOLT_AUTO_ACK: True})
    assert plan.topology_config.at_least_once
    assert plan.topology_config.max_spout_pending == 50
    assert plan.topology_config.tick_tuple_freq_secs == 0.0
    bolt = plan.components["b"].topology_config  # the component's keys win over the topology's
    assert (bolt.tick_tuple_freq_secs, bolt.bolt_auto_ack, bolt.max_spout_pending) == (2.0, True, 50)
    assert plan.components["s"].topology_config.tick_tuple_freq_secs == 0.0


def test_a_components_bad_value_is_refused_at_validation_naming_it():
    with pytest.raises(TopologyValueError) as caught:
        _plan(bolt_config={keys.TOPOLOGY_TICK_TUPLE_FREQ_SECS: "often"})
    assert (caught.value.kind, caught.value.component) == ("config", "b")


def test_a_window_longer_than_the_message_timeout_is_refused_only_under_at_least_once():
    held = 35.0  # duration + slide, seconds
    _check_timeout({}, held, "w")  # at most once: nothing times out
    _check_timeout({keys.TOPOLOGY_RELIABILITY_MODE: "ATLEAST_ONCE",
                    keys.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: "false"}, held, "w")
    _check_timeout({keys.TOPOLOGY_ENABLE_ACKING: "true",
                    keys.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 40}, held, "w")
    with pytest.raises(TopologyValueError) as caught:
        _check_timeout({keys.TOPOLOGY_ENABLE_ACKING: "true"}, held, "w")  # default 30 s
    assert (caught.value.value, caught.value.component) == (held, "w")
