"""Heron's system metric names, and how the TMaster's history folds each one per minute.

The names and units are Heron's (``heron/instance/src/python/utils/metrics/metrics_helper.py``,
``heron/stmgr/src/cpp/manager/stmgr-server.cpp``): counts are tuples, latencies are the mean
over the publishing interval in **nanoseconds**, back pressure times are **milliseconds**.
Instances and stream managers publish counters as cumulative values since their process
started (a restarted process starts again from 0); latencies as the mean of the last
interval. Pure constants and functions: any thread.
"""

from __future__ import annotations

import enum

# ---- instances (per stream: ``<name>/<stream>``; bolts' inputs: ``<name>/<component>/<stream>``)
EMIT_COUNT = "__emit-count"
ACK_COUNT = "__ack-count"
FAIL_COUNT = "__fail-count"
TIMEOUT_COUNT = "__timeout-count"
COMPLETE_LATENCY = "__complete-latency"
FAIL_LATENCY = "__fail-latency"
NEXT_TUPLE_COUNT = "__next-tuple-count"
NEXT_TUPLE_LATENCY = "__next-tuple-latency"
EXECUTE_COUNT = "__execute-count"
EXECUTE_LATENCY = "__execute-latency"
PROCESS_LATENCY = "__process-latency"
EXECUTE_TIME_NS = "__execute-time-ns"

# ---- stream managers (Heron registers its server counters under ``__server``)
SERVER = "__server"
TUPLES_FROM_WORKERS = "__server/__tuples_from_workers"
BYTES_FROM_WORKERS = "__server/__bytes_from_workers"
TUPLES_TO_WORKERS = "__server/__tuples_to_workers"
BYTES_TO_WORKERS = "__server/__bytes_to_workers"
TUPLES_FROM_STMGRS = "__server/__tuples_from_stmgrs"
BYTES_FROM_STMGRS = "__server/__bytes_from_stmgrs"
TIME_SPENT_BACK_PRESSURE_INITIATED = "__server/__time_spent_back_pressure_initiated"
TIME_SPENT_BACK_PRESSURE_AGGR = "__server/__time_spent_back_pressure_aggr"
TIME_SPENT_BACK_PRESSURE_BY_COMPID = "__time_spent_back_pressure_by_compid"

STMGR_COMPONENT = "__stmgr__"  # the component name stream managers publish under


def scoped(name: str, *scopes: str) -> str:
    """Return ``name/<scope>/...``: Heron's multi-metric key, e.g. ``__emit-count/default``."""
    return "/".join((name, *scopes))


class MetricKind(enum.Enum):
    """How the TMaster folds a metric's samples into one value per minute (Heron's
    ``tmaster-metrics-type``): SUM of counter increments, AVG of samples, LAST sample."""

    SUM = "SUM"
    AVG = "AVG"
    LAST = "LAST"


# Cumulative counters: per-minute sums of their increments. Matched on the name before the
# first scope ('/'), or the whole ``__server/...`` name.
_COUNTERS = frozenset({
    EMIT_COUNT, ACK_COUNT, FAIL_COUNT, TIMEOUT_COUNT, NEXT_TUPLE_COUNT, EXECUTE_COUNT,
    EXECUTE_TIME_NS, TIME_SPENT_BACK_PRESSURE_BY_COMPID,
    # heron_spark's own cumulative counters (kept for handle.metrics())
    "__tuples-routed", "__tuples-dropped", "__backpressure-episodes", "__backpressure-secs",
    "__instances-lost", "__instances-reregistered", "__trees-acked", "__trees-failed",
    "__trees-expired", "__peer-frames-dropped", "__metrics-dropped",
    "__complete-latency-ms-total", "__restore-dropped-frames",
})
_AVERAGES = frozenset({COMPLETE_LATENCY, FAIL_LATENCY, NEXT_TUPLE_LATENCY, EXECUTE_LATENCY,
                       PROCESS_LATENCY})


def metric_kind(name: str) -> MetricKind:
    """Return how ``name`` folds per minute; user metrics (anything not Heron's) are LAST,
    since a user metric's value is already per bucket (``get_value_and_reset``)."""
    if name.startswith(SERVER + "/"):
        return MetricKind.SUM
    base = name.split("/", 1)[0]
    if base in _COUNTERS:
        return MetricKind.SUM
    if base in _AVERAGES:
        return MetricKind.AVG
    return MetricKind.LAST
