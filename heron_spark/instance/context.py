"""The ``TopologyContext`` handed to ``initialize``, and heron's auto-typing of config values."""

from __future__ import annotations

from heron_spark.api.component import GlobalStreamId
from heron_spark.api.context import TopologyContext
from heron_spark.api.stream import Grouping
from heron_spark.api.task_hook import ITaskHook
from heron_spark.errors import TopologyTypeError, TopologyValueError
from heron_spark.plan.view import PlanView
from heron_spark.proto.topology_pb2 import GroupingType


def auto_typed(config: dict) -> dict:
    """Return ``config`` with "true"/"false" and numeric strings converted, as Heron does."""
    out = {}
    for key, value in config.items():
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in ("true", "false"):
                value = lowered == "true"
            else:
                for cast in (int, float):
                    try:
                        value = cast(value)
                        break
                    except ValueError:
                        continue
        out[key] = value
    return out


class InstanceContext(TopologyContext):
    """Context of one running task. Used on the task-execution thread only."""

    def __init__(self, plan: PlanView, task_id: int) -> None:
        self._plan = plan
        self._task_id = task_id
        self._component = plan.task_component[task_id]
        self._config = auto_typed(plan.logical.components[self._component].config)
        self.metrics: list[tuple[str, object, float]] = []
        self.task_hooks: list = []
        self.on_task_hook = None  # the executor's: called after each add_task_hook

    def get_task_id(self) -> int:
        return self._task_id

    def get_component_id(self) -> str:
        return self._component

    def get_cluster_config(self) -> dict:
        return dict(self._config)

    def get_topology_name(self) -> str:
        return self._plan.logical.name

    def register_metric(self, name: str, metric, time_bucket_in_sec: int) -> None:
        if any(registered == name for registered, _, _ in self.metrics):
            raise TopologyValueError("a metric of this name is registered already",
                                     component=self._component, value=name, kind="metric",
                                     fix="register each metric once, under its own name")
        self.metrics.append((name, metric, float(time_bucket_in_sec)))

    def get_sources(self, component_id: str) -> dict | None:
        decl = self._plan.logical.components.get(component_id)
        if decl is None:
            return None
        out = {}
        for sub in decl.inputs:
            if sub.grouping == GroupingType.FIELDS:
                grouping = Grouping.fields(list(sub.fields))
            elif sub.grouping == GroupingType.CUSTOM:
                grouping = Grouping.custom_serialized(sub.custom)
            else:
                grouping = sub.grouping
            out[GlobalStreamId(sub.component, sub.stream)] = grouping
        return out

    def get_component_tasks(self, component_id: str) -> list[int] | None:
        tasks = self._plan.component_tasks.get(component_id)
        return None if tasks is None else list(tasks)

    def get_component_parallelism(self, component_id: str) -> int | None:
        decl = self._plan.logical.components.get(component_id)
        return None if decl is None else decl.parallelism

    def add_task_hook(self, task_hook) -> None:
        if not isinstance(task_hook, ITaskHook):
            raise TopologyTypeError("add_task_hook takes an ITaskHook instance",
                                    component=self._component, value=task_hook,
                                    fix="subclass heronpy.api.task_hook.ITaskHook")
        self.task_hooks.append(task_hook)
        if self.on_task_hook is not None:
            self.on_task_hook()
