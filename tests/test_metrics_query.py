"""Heron's metrics query language: parsing, each operator's semantics, and errors that name
the bad token. Evaluated over a fixed table of per-minute values (no TMaster)."""

from __future__ import annotations

import pytest

from heron_spark.errors import MetricsQueryError
from heron_spark.tmaster.metrics_query import Call, Evaluator, parse

M = 60
T = 1_700_000_040  # a minute boundary
DATA = {  # component -> metric -> instance -> {minute: value}
    "count": {
        "__execute-count/split/default": {"i1": {T: 10.0, T + M: 20.0, T + 2 * M: 40.0},
                                          "i2": {T: 30.0, T + M: 0.0}},
        "__execute-latency/split/default": {"i1": {T: 2.0, T + M: 4.0, T + 2 * M: 5.0},
                                            "i2": {T: 5.0, T + M: 10.0, T + 2 * M: 1.0}},
    },
    "split": {"__emit-count/default": {"s1": {T - M: 1.0, T: 3.0, T + M: 6.0, T + 2 * M: 10.0}}},
}


def fetch(component, instance, metric, start, end):
    if component not in DATA:
        raise MetricsQueryError(f"unknown component {component!r}", token=component)
    per = DATA[component].get(metric, {})
    return {inst: {t: v for t, v in tl.items() if start <= t <= end}
            for inst, tl in per.items() if instance is None or inst == instance}


def run(query, start=T, end=T + 2 * M):
    out = Evaluator(fetch, M).run(query, start, end)
    return {s["instance"]: {int(t): float(v) for t, v in s["data"].items()} for s in out}


def test_parse_builds_the_operator_tree():
    tree = parse("SUM(TS(count, *, __execute-count/split/default), 2)")
    assert tree == Call("SUM", [Call("TS", ["count", "*", "__execute-count/split/default"], 4),
                                2.0], 0)
    assert parse("rate(TS(a,b,c))").name == "RATE"  # operators in any case, as Heron


def test_ts_returns_one_series_per_instance_within_the_range():
    assert run("TS(count,*,__execute-count/split/default)") == {
        "i1": {T: 10, T + M: 20, T + 2 * M: 40}, "i2": {T: 30, T + M: 0}}
    assert run("TS(count,i2,__execute-count/split/default)", T + M, T + 2 * M) == {
        "i2": {T + M: 0}}


def test_default_fills_missing_and_zero_minutes():
    assert run("DEFAULT(7, TS(count,i2,__execute-count/split/default))") == {
        "i2": {T: 30, T + M: 7, T + 2 * M: 7}}


def test_sum_max_and_percentile_aggregate_per_minute():
    ts = "TS(count,*,__execute-latency/split/default)"
    assert run(f"SUM({ts})") == {None: {T: 7, T + M: 14, T + 2 * M: 6}}
    assert run(f"SUM({ts}, 100)") == {None: {T: 107, T + M: 114, T + 2 * M: 106}}
    assert run(f"MAX({ts})") == {None: {T: 5, T + M: 10, T + 2 * M: 5}}
    assert run(f"PERCENTILE(0, {ts})") == {None: {T: 2, T + M: 4, T + 2 * M: 1}}
    assert run(f"PERCENTILE(100, {ts})") == run(f"MAX({ts})")


def test_binary_operators_match_instances_or_broadcast_a_single_series():
    count = "TS(count,*,__execute-count/split/default)"
    latency = "TS(count,*,__execute-latency/split/default)"
    assert run(f"MULTIPLY({count}, {latency})") == {
        "i1": {T: 20, T + M: 80, T + 2 * M: 200}, "i2": {T: 150, T + M: 0}}
    assert run(f"DIVIDE({latency}, {count})") == {  # a zero denominator drops the minute
        "i1": {T: 0.2, T + M: 0.2, T + 2 * M: 0.125}, "i2": {T: 5 / 30}}
    assert run(f"SUBTRACT({count}, 10)") == {"i1": {T: 0, T + M: 10, T + 2 * M: 30},
                                              "i2": {T: 20, T + M: -10}}
    assert run(f"DIVIDE(SUM({count}), 2)") == {None: {T: 20, T + M: 10, T + 2 * M: 20}}


def test_rate_is_the_change_from_the_minute_before():
    assert run("RATE(TS(split,*,__emit-count/default))") == {
        "s1": {T: 2, T + M: 3, T + 2 * M: 4}}


@pytest.mark.parametrize("query, token, position", [
    ("", "", 0),
    ("TS(count,*", "TS", 0),
    ("FOO(TS(a,b,c))", "FOO", 0),
    ("SUM(TS(a,b,c)) extra", "extra", 15),
    ("TS(a,b)", "TS", 0),
    ("SUM(TS(a,b,c),,)", ",", 14),
    ("DIVIDE(TS(a,b,c), 0)", "DIVIDE", 0),
    ("PERCENTILE(101, TS(a,b,c))", "PERCENTILE", 0),
    ("RATE(5)", "RATE", 0),
    ("count", "count", 0),
])
def test_malformed_queries_name_the_bad_token(query, token, position):
    with pytest.raises(MetricsQueryError) as info:
        Evaluator(fetch, M).run(query, T, T + M)
    assert (info.value.token, info.value.position) == (token, position)
    assert info.value.fix and info.value.query == query


def test_start_after_end_is_an_error():
    with pytest.raises(MetricsQueryError):
        Evaluator(fetch, M).run("TS(count,*,x)", T + M, T)
