"""Event time on Spark: real instance and stmgr processes, watermarks across containers.

The same checks as the in-process ``test_event_time``: no tuple of a slow upstream task is
late when a fast one runs ahead, watermarks only go up, and each arrives after every tuple
sent before it, over real sockets between two containers.
"""

from __future__ import annotations

import pytest

from heron_spark.api.event_time import WATERMARK_MAX, WATERMARK_MIN
from heron_spark.testing import run_local

from test_event_time import _fast_and_slow, _logs

pytestmark = pytest.mark.spark


def test_watermarks_cross_containers_in_order_and_no_slow_tuple_is_late(spark, tmp_path, hconf):
    run = run_local(_fast_and_slow(0.05, 10_000).build(), spark=spark.session, conf=hconf,
                    collect_dir=tmp_path / "collect", timeout=240)
    assert run.status == "FINISHED"
    logs = _logs(tmp_path / "collect")
    assert len(logs) == 2
    tuples = [e for log in logs.values() for e in log if e[0] == "tuple"]
    assert len(tuples) == 800
    assert [e for e in tuples if e[1] < e[2]] == []
    assert max(e[2] for e in tuples) > 10_000  # the watermark moved while tuples came
    for log in logs.values():
        seen = WATERMARK_MIN
        for event in log:
            if event[0] == "watermark":
                assert event[1] > seen
                seen = event[1]
            elif event[0] == "tuple":
                assert event[1] >= seen
        assert seen == WATERMARK_MAX and log[-1] == ("end",)
