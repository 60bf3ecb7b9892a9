"""Per-component totals of per-task metrics.

This is the one rule the TMaster and the in-process runner use for ``handle.metrics()``.
Pure functions; any thread.
"""

from __future__ import annotations

from typing import Mapping

from heron_spark.contract import metric_names
from heron_spark.metrics.names import ComponentFold, component_fold


def by_component(per_task: Mapping[tuple[str, int], Mapping[str, float]],
                 failures: Mapping[int, int],
                 task_component: Mapping[int, str]) -> dict[str, dict[str, float]]:
    """Fold each metric of ``per_task`` ((component, task id) -> values) over a component's tasks.

    By ``names.component_fold``: counts are summed, a ``*-max-*`` metric and the watermark lag
    are the maximum over tasks, the watermark (``__watermark``, ms) the minimum, a Heron latency
    (``__execute-latency/...``, ns) the mean of the tasks' latest means. Each task's
    ``failures`` are added as ``__instance-failures`` of its component.
    """
    out: dict[str, dict[str, float]] = {}
    averaged: dict[tuple[str, str], int] = {}  # (component, MEAN metric) -> tasks reporting it
    for (component, _task), values in per_task.items():
        totals = out.setdefault(component, {})
        for name, value in values.items():
            fold = component_fold(name)
            seen = totals.get(name)
            if seen is None:
                totals[name] = float(value)
            elif fold is ComponentFold.MAX:
                totals[name] = max(seen, value)
            elif fold is ComponentFold.MIN:
                totals[name] = min(seen, value)
            else:
                totals[name] = seen + value
            if fold is ComponentFold.MEAN:
                averaged[(component, name)] = averaged.get((component, name), 0) + 1
    for (component, name), tasks in averaged.items():
        out[component][name] /= tasks
    for task, count in failures.items():
        totals = out.setdefault(task_component[task], {})
        totals[metric_names.INSTANCE_FAILURES] = totals.get(metric_names.INSTANCE_FAILURES, 0.0) + count
    return out
