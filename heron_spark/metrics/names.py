"""Say how each metric folds: per minute, over a component's tasks, in Prometheus.

Per minute in the TMaster's history: ``metric_kind``; over a component's tasks
(``handle.metrics()``): ``component_fold``; its Prometheus type: ``prometheus_type``.

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
    m.RESTORE_DROPPED_FRAMES, m.CHECKPOINT_UPLOADED_BYTES_TOTAL, m.LATE_TUPLES,
})
_AVERAGES = frozenset({m.COMPLETE_LATENCY, m.FAIL_LATENCY, m.NEXT_TUPLE_LATENCY,
                       m.EXECUTE_LATENCY, m.PROCESS_LATENCY})
# Gauges: a value now, not a count since the process started (folded LAST per minute). The
# rest of the LAST names (user metrics, the I/O loops' counts) have no declared type.
_GAUGES = frozenset({
    m.PENDING_TREES, m.STATE_KEYS, m.STATE_BYTES, m.CHECKPOINT_PAUSE_MS,
    m.CHECKPOINT_UPLOAD_MS, m.CHECKPOINT_UPLOADED_BYTES, m.STATE_RESTORE_MS,
    m.WATERMARK, m.WATERMARK_LAG_MS, m.TREES_OPEN, m.CHECKPOINT_HELD_FRAMES, m.QUEUED_TUPLES,
    m.QUEUE_AGE_MAX_MS, m.CHECKPOINT_ALIGNMENT_MS,
})


class ComponentFold(enum.Enum):
    """How a component's value of a metric comes from its tasks' latest values."""

    SUM = "SUM"    # counts, and gauges that add up (keys, bytes, open trees)
    MEAN = "MEAN"  # latencies: the mean of the tasks' means
    MAX = "MAX"    # the worst task: ``*-max-*`` gauges, the watermark lag
    MIN = "MIN"    # the watermark: the component is as far as its slowest task


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



def component_fold(name: str) -> ComponentFold:
    """Return how ``name``'s latest values over a component's tasks make the component's.

    The watermark (ms since the epoch) is the minimum over the tasks and its lag the maximum:
    summing either means nothing. A ``*-max-*`` metric is the maximum, a Heron latency the
    mean; everything else is summed.
    """
    base = name.split("/", 1)[0]
    if base == m.WATERMARK:
        return ComponentFold.MIN
    if base == m.WATERMARK_LAG_MS or "-max-" in name:
        return ComponentFold.MAX
    if metric_kind(name) is MetricKind.AVG:
        return ComponentFold.MEAN
    return ComponentFold.SUM


def prometheus_type(name: str) -> str:
    """Return the Prometheus type of ``name``'s samples: ``counter``, ``gauge`` or ``untyped``.

    A SUM metric is a cumulative counter; a latency (a mean over the publishing interval) and
    the declared gauges are gauges; other names (user metrics among them) are ``untyped``.
    """
    kind = metric_kind(name)
    if kind is MetricKind.SUM:
        return "counter"
    if kind is MetricKind.AVG or name.split("/", 1)[0] in _GAUGES:
        return "gauge"
    return "untyped"
