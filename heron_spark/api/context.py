"""The topology context given to ``initialize``: where this task sits in the topology."""

from __future__ import annotations

from abc import ABC, abstractmethod


class TopologyContext(ABC):
    """Read-only facts about the running task (heronpy's interface, plus parallelism)."""

    @abstractmethod
    def get_task_id(self) -> int:
        """Return this task's id (unique in the topology)."""

    @abstractmethod
    def get_component_id(self) -> str:
        """Return this task's component name."""

    @abstractmethod
    def get_cluster_config(self) -> dict:
        """Return the merged, auto-typed configuration of this component."""

    @abstractmethod
    def get_topology_name(self) -> str:
        """Return the topology's name."""

    @abstractmethod
    def register_metric(self, name: str, metric, time_bucket_in_sec: int) -> None:
        """Publish ``metric`` (an ``IMetric``) every ``time_bucket_in_sec`` seconds under
        ``name`` (a dict value as ``<name>/<key>``); a name may be registered once per task."""

    @abstractmethod
    def get_sources(self, component_id: str) -> dict | None:
        """Return {GlobalStreamId: grouping} of the inputs of ``component_id``."""

    def get_this_sources(self) -> dict | None:
        """Return the inputs of this component."""
        return self.get_sources(self.get_component_id())

    @abstractmethod
    def get_component_tasks(self, component_id: str) -> list[int] | None:
        """Return the sorted task ids of ``component_id``."""

    @abstractmethod
    def get_component_parallelism(self, component_id: str) -> int | None:
        """Return the number of tasks of ``component_id``."""

    def get_task_index(self) -> int:
        """Return this task's index within its component, from 0."""
        return self.get_component_tasks(self.get_component_id()).index(self.get_task_id())

    @abstractmethod
    def add_task_hook(self, task_hook) -> None:
        """Register ``task_hook`` (an ``ITaskHook``): it is told of this task's emits, acks,
        fails and executes from now on (see ``heron_spark.api.task_hook``)."""
