"""How the TMaster's history folds each metric per minute (``metric_kind``).

The names themselves, Heron's and heron_spark's, and their units: ``contract.metric_names``
(both the processes that publish them and the readers import them from there). Pure
constants and functions: any thread.
"""

from __future__ import annotations

import enum

from heron_spark.contract import metric_names as m


class MetricKind(enum.Enum):
    """How the TMaster folds a metric's samples into one value per minute.

    Heron's ``tmaster-metrics-type``: SUM of counter increments, AVG of samples, LAST sample.
    """

    SUM = "SUM"
    AVG = "AVG"
    LAST = "LAST"


# Cumulative counters: per-minute sums of their increments. Matched on the name before the
# first scope ('/'), or the whole ``__server/...`` name.
_COUNTERS = frozenset({
    m.EMIT_COUNT, m.ACK_COUNT, m.FAIL_COUNT, m.TIMEOUT_COUNT, m.NEXT_TUPLE_COUNT,
    m.EXECUTE_COUNT, m.EXECUTE_TIME_NS, m.TIME_SPENT_BACK_PRESSURE_BY_COMPID,
    # heron_spark's own cumulative counters (kept for handle.metrics())
    m.TUPLES_ROUTED, m.TUPLES_DROPPED, m.BACKPRESSURE_EPISODES, m.BACKPRESSURE_SECS,
    m.INSTANCES_LOST, m.INSTANCES_REREGISTERED, m.TREES_ACKED, m.TREES_FAILED,
    m.TREES_EXPIRED, m.PEER_FRAMES_DROPPED, m.METRICS_DROPPED, m.COMPLETE_LATENCY_MS_TOTAL,
    m.RESTORE_DROPPED_FRAMES, m.CHECKPOINT_UPLOADED_BYTES_TOTAL,
})
_AVERAGES = frozenset({m.COMPLETE_LATENCY, m.FAIL_LATENCY, m.NEXT_TUPLE_LATENCY,
                       m.EXECUTE_LATENCY, m.PROCESS_LATENCY})


def metric_kind(name: str) -> MetricKind:
    """Return how ``name`` folds per minute.

    User metrics (anything not Heron's) are LAST, since a user metric's value is already per
    bucket (``get_value_and_reset``).
    """
    if name.startswith(m.SERVER + "/"):
        return MetricKind.SUM
    base = name.split("/", 1)[0]
    if base in _COUNTERS:
        return MetricKind.SUM
    if base in _AVERAGES:
        return MetricKind.AVG
    return MetricKind.LAST

