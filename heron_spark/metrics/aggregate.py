"""Per-component totals of per-task metrics.

This is the one rule the TMaster and the in-process runner use for ``handle.metrics()``.
Pure functions; any thread.
"""

from __future__ import annotations

from typing import Mapping

from heron_spark.contract import metric_names
from heron_spark.metrics.names import MetricKind, metric_kind


def by_component(per_task: Mapping[tuple[str, int], Mapping[str, float]],
                 failures: Mapping[int, int],
                 task_component: Mapping[int, str]) -> dict[str, dict[str, float]]:
    """Sum every metric of ``per_task`` ((component, task id) -> values) over each component's tasks.

    A ``*-max-*`` metric is the maximum over tasks, not a total, and a Heron latency
    (``__execute-latency/...``, ns) the mean of the tasks' latest means. Each task's
    ``failures`` are added as ``__instance-failures`` of its component.
    """
    out: dict[str, dict[str, float]] = {}
    averaged: dict[tuple[str, str], int] = {}  # (component, AVG metric) -> tasks reporting it
    for (component, _task), values in per_task.items():
        totals = out.setdefault(component, {})
        for name, value in values.items():
            if "-max-" in name:
                totals[name] = max(totals.get(name, 0.0), value)
            else:
                totals[name] = totals.get(name, 0.0) + value
                if metric_kind(name) is MetricKind.AVG:
                    averaged[(component, name)] = averaged.get((component, name), 0) + 1
    for (component, name), tasks in averaged.items():
        out[component][name] /= tasks
    for task, count in failures.items():
        totals = out.setdefault(task_component[task], {})
        totals[metric_names.INSTANCE_FAILURES] = totals.get(metric_names.INSTANCE_FAILURES, 0.0) + count
    return out
