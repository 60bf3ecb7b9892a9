"""The metrics collector a task's context hands out (``context.get_metrics_collector()``).

Heron's Python instance gives user code a ``MetricsCollector`` whose ``register_metric`` is what
``context.register_metric`` calls; this is ours. It only records the registrations; the task's
executor samples them (``TaskExecutor.gather_user_metrics``). Used on the task-execution thread
only.
"""

from __future__ import annotations

from typing import Any

from heron_spark.errors import DuplicateMetricError


class MetricsCollector:
    """The user metrics registered by one task, in registration order."""

    def __init__(self, component: str, task_id: int) -> None:
        self._component = component
        self._task_id = task_id
        self.registered: list[tuple[str, Any, float]] = []  # (name, IMetric, bucket in s)
        self.metrics_map: dict[str, Any] = {}                # name -> IMetric, as Heron's

    def register_metric(self, name: str, metric, time_bucket_in_sec: float) -> None:
        """Sample ``metric`` every ``time_bucket_in_sec`` seconds and publish it as ``name``.

        Raises ``DuplicateMetricError`` (a ``RuntimeError``, as Heron raises) when ``name`` is
        already registered by this task.
        """
        if name in self.metrics_map:
            raise DuplicateMetricError(name, component=self._component, task_id=self._task_id)
        self.metrics_map[name] = metric
        self.registered.append((name, metric, float(time_bucket_in_sec)))
