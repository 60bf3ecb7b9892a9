"""The TMaster's stmgr liveness check, as a pure core with a fake clock (no sockets).

The end-to-end check (a whole container SIGSTOPped on Spark) is
``test_resilience.py::test_stopped_container_group_is_found_dead_by_the_tmaster``.
"""

from __future__ import annotations

import pytest

from heron_spark.config import TMASTER_STMGR_HEARTBEAT_TIMEOUT_SECS, build_system_config
from heron_spark.errors import ConfigError
from heron_spark.tmaster.liveness import StmgrLiveness


def test_a_silent_stmgr_is_dead_after_the_timeout_and_overdue_after_another():
    live = StmgrLiveness(3.0)
    live.beat(0, 100.0)
    live.beat(1, 100.0)
    assert live.check(102.9) == ([], [])
    live.beat(1, 102.9)
    assert live.check(103.1) == ([0], [])       # 0 silent for 3.1 s
    assert live.check(104.0) == ([], [])        # reported once
    assert live.ages(104.0) == {0: 4.0, 1: 1.1}
    live.beat(1, 105.0)
    live.beat(1, 106.0)
    assert live.check(106.2) == ([], [0])       # dead for 3.1 s: restart the stage
    live.beat(1, 107.0)
    assert live.check(110.0) == ([], [])        # asked once per generation


def test_a_stmgr_that_registers_again_is_alive():
    live = StmgrLiveness(3.0)
    live.beat(0, 0.0)
    assert live.check(3.5) == ([0], [])
    live.beat(0, 4.0)                           # reconnected and registered again
    assert live.dead_since == {}
    assert live.check(6.6) == ([], [])
    assert live.check(7.5) == ([0], [])         # silent again: dead again


def test_reset_starts_a_new_generation():
    live = StmgrLiveness(1.0)
    live.beat(0, 0.0)
    live.check(1.5)
    assert live.check(2.6) == ([], [0])
    live.reset()
    assert (live.last_beat, live.dead_since, live.recovery_asked) == ({}, {}, False)
    live.beat(0, 10.0)
    live.check(11.5)
    assert live.check(12.6) == ([], [0])


@pytest.mark.parametrize("value", [0, -1])
def test_the_timeout_must_be_positive(value):
    with pytest.raises(ConfigError) as info:
        build_system_config({TMASTER_STMGR_HEARTBEAT_TIMEOUT_SECS: value})
    assert info.value.key == TMASTER_STMGR_HEARTBEAT_TIMEOUT_SECS
