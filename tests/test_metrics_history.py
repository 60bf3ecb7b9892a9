"""The TMaster's metrics history, exception log and views, I/O-free: an injected clock, the
samples instances would publish, and Heron's tracker response shapes."""

from __future__ import annotations

import pytest

from heron_spark import Grouping, TopologyBuilder
from heron_spark.errors import MetricsQueryError
from heron_spark.contract import metric_names as names
from heron_spark.metrics import aggregate
from heron_spark.metrics.names import MetricKind, metric_kind
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.tmaster import views
from heron_spark.tmaster.exception_log import ExceptionLog
from heron_spark.tmaster.metrics_cache import MetricsCache
from idle_components import Count, Words

T0 = 1_700_000_040  # a minute boundary


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _view() -> PlanView:
    builder = TopologyBuilder("hist")
    words = builder.add_spout("word", Words, par=2)
    builder.add_bolt("count", Count, par=2, inputs={words: Grouping.fields("word")})
    builder.set_config({"topology.stmgrs": 2})
    logical = build_logical_plan(builder.build())
    return PlanView(logical, pack(logical))


def test_metric_kinds_follow_heron():
    assert metric_kind("__emit-count/default") is MetricKind.SUM
    assert metric_kind("__execute-count/word/default") is MetricKind.SUM
    assert metric_kind(names.TUPLES_TO_WORKERS) is MetricKind.SUM
    assert metric_kind("__time_spent_back_pressure_by_compid/count") is MetricKind.SUM
    assert metric_kind("__execute-latency/word/default") is MetricKind.AVG
    assert metric_kind("__complete-latency/default") is MetricKind.AVG
    assert metric_kind("my-user-count") is MetricKind.LAST
    assert metric_kind(names.WATERMARK) is MetricKind.LAST
    assert metric_kind(names.WATERMARK_LAG_MS) is MetricKind.LAST
    assert metric_kind(names.LATE_TUPLES) is MetricKind.SUM


def test_counters_become_per_minute_sums_and_survive_a_restart_from_zero():
    clock = Clock()
    cache = MetricsCache(clock=clock)
    name = "__execute-count/word/default"
    for value in (10, 25, 40):       # minute 0: +10 +15 +15
        cache.add("count", 3, {name: value})
        clock.now += 10
    clock.now = T0 + 60
    cache.add("count", 3, {name: 55})  # minute 1: +15
    cache.add("count", 3, {name: 5})   # the instance restarted: its counter starts again
    cache.add("count", 3, {name: 12})  # +7
    assert cache.timeline("count", 3, name, T0, T0 + 60) == {T0: 40.0, T0 + 60: 27.0}
    assert cache.over("count", 3, name, 0) == 67.0
    assert cache.over("count", 3, name, 30) == 67.0  # minute 0 ends within the last 30 s
    clock.now = T0 + 100
    assert cache.over("count", 3, name, 30) == 27.0  # only the current minute


def test_latencies_are_per_minute_means_and_other_metrics_keep_the_last_sample():
    clock = Clock()
    cache = MetricsCache(clock=clock)
    cache.add("count", 3, {"__execute-latency/word/default": 100.0, "user": 1.0})
    cache.add("count", 3, {"__execute-latency/word/default": 300.0, "user": 7.0})
    assert cache.timeline("count", 3, "__execute-latency/word/default", T0, T0) == {T0: 200.0}
    assert cache.over("count", 3, "user", 0) == 7.0
    assert cache.over("count", 3, "missing", 0) is None


def test_a_repeated_publish_is_folded_once():
    cache = MetricsCache(clock=Clock())
    cache.add("count", 3, {"__execute-latency/a/b": 100.0}, timestamp_ms=5)
    cache.add("count", 3, {"__execute-latency/a/b": 100.0}, timestamp_ms=5)  # forwarded again
    cache.add("count", 3, {"__execute-latency/a/b": 400.0}, timestamp_ms=6)
    assert cache.over("count", 3, "__execute-latency/a/b", 0) == 250.0


def test_memory_is_bounded_in_buckets_and_in_series():
    clock = Clock()
    cache = MetricsCache(bucket_secs=60, retention_secs=600, max_series=3, clock=clock)
    for minute in range(50):
        clock.now = T0 + 60 * minute
        cache.add("count", 3, {"__emit-count/default": minute * 10})
    series = cache.timeline("count", 3, "__emit-count/default", 0, clock.now)
    assert len(series) == 11  # retention / bucket + the current bucket
    assert min(series) == clock.now - 600
    cache.add("count", 4, {"a": 1, "b": 2, "c": 3})
    assert cache.series_count == 3 and cache.dropped_samples == 1
    assert cache.names("count", 4) == ["a", "b"]


def test_bad_history_settings_are_refused():
    with pytest.raises(ValueError):
        MetricsCache(bucket_secs=60, retention_secs=30)


def test_handle_metrics_averages_latencies_over_tasks_and_sums_counts():
    per_task = {("count", 3): {"__execute-count/word/default": 5, "__execute-latency/w/d": 100},
                ("count", 4): {"__execute-count/word/default": 7, "__execute-latency/w/d": 300}}
    totals = aggregate.by_component(per_task, {}, {3: "count", 4: "count"})["count"]
    assert totals == {"__execute-count/word/default": 12, "__execute-latency/w/d": 200}



def test_event_time_metrics_fold_per_minute_as_gauges_and_a_counter():
    """Each instance's watermark and lag are its last samples (per minute and over any
    interval); its late tuples a counter: per-minute increments, their sum over the interval."""
    view, clock = _view(), Clock()
    cache = MetricsCache(clock=clock)
    first, second = view.component_tasks["count"]
    base = 1_764_000_000_000  # ms since the epoch
    for i, (mark, lag, late) in enumerate([(base, 900.0, 2), (base + 500, 1400.0, 5)]):
        cache.add("count", first, {names.WATERMARK: mark, names.WATERMARK_LAG_MS: lag,
                                   names.LATE_TUPLES: late}, timestamp_ms=i + 1)
        clock.now += 10
    cache.add("count", second, {names.WATERMARK: base - 3_000}, timestamp_ms=1)
    clock.now = T0 + 60
    cache.add("count", first, {names.WATERMARK: base + 800, names.WATERMARK_LAG_MS: 700.0,
                               names.LATE_TUPLES: 9}, timestamp_ms=3)
    one, two = view.instance_id(first), view.instance_id(second)
    out = views.metrics_view(view, cache, clock.now, "count", [names.WATERMARK,
                             names.WATERMARK_LAG_MS, names.LATE_TUPLES], None, -1)["metrics"]
    assert out == {names.WATERMARK: {one: repr(float(base + 800)), two: repr(float(base - 3_000))},
                   names.WATERMARK_LAG_MS: {one: "700.0"}, names.LATE_TUPLES: {one: "9.0"}}
    timeline = views.timeline_view(view, cache, "count", [names.WATERMARK, names.LATE_TUPLES],
                                   [one], T0, T0 + 60)["timeline"]
    assert timeline == {
        names.WATERMARK: {one: {str(T0): repr(float(base + 500)),
                                str(T0 + 60): repr(float(base + 800))}},
        names.LATE_TUPLES: {one: {str(T0): "5.0", str(T0 + 60): "4.0"}}}


def test_handle_metrics_takes_the_slowest_tasks_watermark_and_sums_late_tuples():
    per_task = {("count", 3): {names.WATERMARK: 5_000, names.WATERMARK_LAG_MS: 100.0,
                               names.LATE_TUPLES: 2, names.STATE_KEYS: 10},
                ("count", 4): {names.WATERMARK: 3_000, names.WATERMARK_LAG_MS: 2_100.0,
                               names.LATE_TUPLES: 5, names.STATE_KEYS: 7},
                ("count", 5): {names.WATERMARK: 4_000, names.WATERMARK_LAG_MS: 1_100.0}}
    totals = aggregate.by_component(per_task, {}, {3: "count", 4: "count", 5: "count"})["count"]
    assert totals == {names.WATERMARK: 3_000, names.WATERMARK_LAG_MS: 2_100.0,
                      names.LATE_TUPLES: 7, names.STATE_KEYS: 17}

def _history(view: PlanView, clock: Clock) -> MetricsCache:
    cache = MetricsCache(clock=clock)
    for i, task in enumerate(view.component_tasks["count"]):
        cache.add("count", task, {"__execute-count/word/default": 100 * (i + 1),
                                  "__execute-latency/word/default": 1000.0 * (i + 1)})
    clock.now += 60
    for i, task in enumerate(view.component_tasks["count"]):
        cache.add("count", task, {"__execute-count/word/default": 150 * (i + 1)})
    cache.add("__stmgr__", -1, {names.TUPLES_TO_WORKERS: 42})
    return cache


def test_metrics_and_timeline_views_have_herons_shapes():
    view, clock = _view(), Clock()
    cache = _history(view, clock)
    first, second = (view.instance_id(t) for t in view.component_tasks["count"])
    assert first.startswith("container_") and first.endswith(f"_count_{view.component_tasks['count'][0]}")
    out = views.metrics_view(view, cache, clock.now, "count", ["__execute-count/word/default"],
                             None, -1)
    assert out == {"component": "count", "interval": 60, "metrics": {
        "__execute-count/word/default": {first: "150.0", second: "300.0"}}}
    clock.now += 40  # 40 s into the second minute: the last 30 s are in it alone
    recent = views.metrics_view(view, cache, clock.now, "count",
                                ["__execute-count/word/default"], [second], 30)
    assert recent["metrics"] == {"__execute-count/word/default": {second: "100.0"}}
    assert recent["interval"] == 30
    everything = views.metrics_view(view, cache, clock.now, "count", None, None, -1)
    assert set(everything["metrics"]) == {"__execute-count/word/default",
                                          "__execute-latency/word/default"}
    timeline = views.timeline_view(view, cache, "count", ["__execute-count/word/default"],
                                   [first], T0, T0 + 60)
    assert timeline == {"starttime": T0, "endtime": T0 + 60, "component": "count", "timeline": {
        "__execute-count/word/default": {first: {str(T0): "100.0", str(T0 + 60): "50.0"}}}}
    stmgr = views.metrics_view(view, cache, clock.now, "__stmgr__", [names.TUPLES_TO_WORKERS],
                               None, -1)
    assert stmgr["metrics"][names.TUPLES_TO_WORKERS] == {"stmgr-0": "42.0"}


@pytest.mark.parametrize("component, instances, token", [
    ("nope", None, "nope"), ("*", None, "*"), ("", None, ""),
    ("count", ["container_9_count_9"], "container_9_count_9")])
def test_views_name_an_unknown_component_or_instance(component, instances, token):
    view, clock = _view(), Clock()
    with pytest.raises(MetricsQueryError) as info:
        views.metrics_view(view, _history(view, clock), clock.now, component, None, instances, -1)
    assert info.value.token == token and info.value.fix


def test_query_view_evaluates_over_the_history():
    view, clock = _view(), Clock()
    cache = _history(view, clock)
    out = views.query_view(view, cache, "SUM(TS(count,*,__execute-count/word/default))",
                           T0, T0 + 60)
    assert out == [{"instance": None, "data": {str(T0): "300.0", str(T0 + 60): "150.0"}}]
    with pytest.raises(MetricsQueryError) as info:
        views.query_view(view, cache, "TS(nope,*,x)", T0, T0 + 60)
    assert info.value.token == "nope" and info.value.position == 3


def test_exceptions_views_keep_distinct_traces_per_instance_bounded():
    view = _view()
    log = ExceptionLog(max_per_task=2)
    task, other = view.component_tasks["count"]
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad word'
    log.record(task, "count", "host-a", trace, "/logs/count-3.log", T0)
    log.record(task, "count", "host-a", trace, "/logs/count-3.log", T0 + 5)
    log.record(other, "count", "host-b", "KeyError: 'w'", "/logs/count-4.log", T0 + 7)
    out = views.exceptions_view(view, log, "count", None)
    assert [(e["instance_id"], e["count"], e["hostname"], e["logging"]) for e in out] == [
        (view.instance_id(task), "2", "host-a", "/logs/count-3.log"),
        (view.instance_id(other), "1", "host-b", "/logs/count-4.log")]
    assert out[0]["stacktrace"] == trace
    assert out[0]["firsttime"] == "2023-11-14T22:14:00Z" and out[0]["lasttime"].endswith(":05Z")
    assert views.exceptions_view(view, log, "*", [view.instance_id(other)])[0]["count"] == "1"
    assert views.exceptions_view(view, log, "word", None) == []
    summary = views.exception_summary_view(view, log, "", None)
    assert [(s["class_name"], s["count"]) for s in summary] == [("KeyError", "1"),
                                                                ("ValueError", "2")]
    for n in range(3):  # bounded: the least recently seen trace goes first
        log.record(task, "count", "host-a", f"RuntimeError: {n}", "", T0 + 10 + n)
    assert [e["stacktrace"] for e in views.exceptions_view(view, log, "count",
                                                           [view.instance_id(task)])] == [
        "RuntimeError: 1", "RuntimeError: 2"]
