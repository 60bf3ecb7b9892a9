"""The tracker's Prometheus text (``tracker.prometheus``), I/O-free: rows as a TMaster's
``prometheus_view`` answers them, parsed back with the exposition format's own rules."""

from __future__ import annotations

import re

from heron_spark.contract import metric_names as names
from heron_spark.tracker.prometheus import exposition

SAMPLE = re.compile(r'^(?P<family>[a-zA-Z_:][a-zA-Z0-9_:]*)\{topology="(?P<topology>[^"]*)",'
                    r'component="(?P<component>[^"]*)",instance="(?P<instance>[^"]*)",'
                    r'metric="(?P<metric>[^"]*)"\} (?P<value>\S+)$')
TYPE = re.compile(r"^# TYPE (?P<family>\S+) (?P<type>counter|gauge|untyped)$")
SPOUT, BOLT = "container_0_events_1", "container_1_late_3"
WATERMARK_MS = 1_764_000_000_000


def _parse(text: str) -> tuple[dict[str, str], dict[tuple[str, str], float]]:
    """Return (family -> type, (family, instance) -> value); every line must be one or the other,
    and each family's samples must follow its TYPE line."""
    types: dict[str, str] = {}
    samples: dict[tuple[str, str], float] = {}
    current = None
    for line in text.splitlines():
        typed, sample = TYPE.match(line), SAMPLE.match(line)
        assert typed or sample, line
        if typed:
            assert typed["family"] not in types, f"{typed['family']} typed twice"
            current = typed["family"]
            types[current] = typed["type"]
        else:
            assert sample["family"] == current, line
            samples[(sample["family"], sample["instance"])] = float(sample["value"])
    return types, samples


def test_event_time_metrics_are_typed_gauges_and_a_counter_per_instance():
    rows = [["events", SPOUT, names.WATERMARK, float(WATERMARK_MS)],
            ["events", SPOUT, names.WATERMARK_LAG_MS, 2_345.5],
            ["events", SPOUT, "__emit-count/default", 200.0],
            ["late", BOLT, names.WATERMARK, float(WATERMARK_MS - 1_000)],
            ["late", BOLT, names.WATERMARK_LAG_MS, 3_345.5],
            ["late", BOLT, names.LATE_TUPLES, 20.0],
            ["late", BOLT, "__execute-latency/events/default", 1200.0],
            ["late", BOLT, "my-user-metric", 3.0],
            ["__stmgr__", "stmgr-0", names.TUPLES_TO_WORKERS, 400.0]]
    types, samples = _parse(exposition([("clicks", rows)]))
    assert types == {"heron_watermark": "gauge", "heron_watermark_lag_ms": "gauge",
                     "heron_late_tuples": "counter", "heron_emit_count_default": "counter",
                     "heron_execute_latency_events_default": "gauge",
                     "heron_my_user_metric": "untyped",
                     "heron_server___tuples_to_workers": "counter"}
    assert samples[("heron_watermark", SPOUT)] == WATERMARK_MS  # exact: below 2**53
    assert samples[("heron_watermark", BOLT)] == WATERMARK_MS - 1_000
    assert samples[("heron_watermark_lag_ms", BOLT)] == 3_345.5
    assert samples[("heron_late_tuples", BOLT)] == 20
    assert ("heron_late_tuples", SPOUT) not in samples  # a task that counted none publishes none


def test_labels_are_escaped_and_odd_values_spelled_as_prometheus_reads_them():
    end_of_input = 2**63 - 1  # WATERMARK_MAX: a task whose input ended
    rows = [["we\"ird\\", SPOUT, names.WATERMARK, float(end_of_input)],
            ["c", BOLT, names.WATERMARK_LAG_MS, float("nan")],
            ["c", BOLT, "x-y", float("inf")], ["c", BOLT, "x_y", 1.0]]
    text = exposition([("t", rows)])
    assert 'component="we\\"ird\\\\"' in text
    assert text.splitlines()[-3:] == [
        "# TYPE heron_x_y untyped",  # two names folded into one family, of no declared type
        f'heron_x_y{{topology="t",component="c",instance="{BOLT}",metric="x-y"}} +Inf',
        f'heron_x_y{{topology="t",component="c",instance="{BOLT}",metric="x_y"}} 1.0']
    assert f'metric="{names.WATERMARK_LAG_MS}"}} NaN' in text
    assert float(re.search(r'heron_watermark\{.*\} (\S+)', text)[1]) == float(end_of_input)


def test_a_family_whose_names_disagree_on_their_type_is_untyped():
    rows = [["c", BOLT, "__late-tuples", 1.0], ["c", BOLT, "__late_tuples", 2.0]]
    types, _ = _parse(exposition([("t", rows)]))
    assert types == {"heron_late_tuples": "untyped"}
