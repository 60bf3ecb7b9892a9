"""Timers on Spark: real instance processes, a keyed bolt's timers fired by watermarks that cross
containers, and processing-time timers from a real task loop.

The same topologies and expectations as the in-process ``test_timers_topology``.
"""

from __future__ import annotations

import json

import pytest

from heron_spark.api.event_time import WATERMARK_MAX
from heron_spark.testing import run_local

from test_timers_topology import _scripts, _topology, expected_rounds, processing_topology

pytestmark = pytest.mark.spark


def test_event_time_timers_fire_per_key_across_containers(spark, tmp_path, hconf):
    scripts = _scripts()
    run = run_local(_topology("event-timers-spark", scripts).build(), spark=spark.session,
                    conf=hconf, collect_dir=tmp_path / "collect", timeout=240)
    assert run.status == "FINISHED"
    got = sorted(c.values for c in run.collected("sink"))
    assert got == expected_rounds(scripts)
    logs = [json.loads(p.read_text()) for p in (tmp_path / "collect").glob("fired-*.json")]
    assert len(logs) == 2 and sum(map(len, logs)) == len(got)
    for fired in logs:
        assert [ts for ts, _ in fired] == sorted(ts for ts, _ in fired)
        assert all(watermark >= ts for ts, watermark in fired)
    assert max(watermark for fired in logs for _, watermark in fired) == WATERMARK_MAX


def test_processing_time_timers_fire_from_a_real_task_loop(spark, tmp_path, hconf):
    collect = tmp_path / "collect"
    run = run_local(processing_topology("processing-timers-spark").build(), spark=spark.session,
                    conf=hconf, collect_dir=collect, timeout=240)
    assert run.status == "FINISHED"
    got = run.collected("sink")
    assert sorted(c.values[0] for c in got) == [f"k{i}" for i in range(10)]
    assert all(fired >= due for _, due, fired in (c.values for c in got))
