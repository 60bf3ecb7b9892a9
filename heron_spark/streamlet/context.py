"""What an operator sees of its task (heronpy's streamlet ``Context``)."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any


class Context:
    """Runtime facts for ``Generator.setup`` and ``TransformOperator.setup``."""

    @abstractmethod
    def get_task_id(self) -> int:
        """Return the task id of this operator instance."""

    @abstractmethod
    def get_config(self) -> dict:
        """Return the configuration of the operator (topology keys included)."""

    @abstractmethod
    def get_stream_name(self) -> str:
        """Return the name of the streamlet this operator reads (a source: its own)."""

    @abstractmethod
    def get_num_partitions(self) -> int:
        """Return the number of partitions (tasks) of this operator."""

    @abstractmethod
    def get_partition_index(self) -> int:
        """Return this task's partition, from 0."""

    @abstractmethod
    def get_state(self) -> Any:
        """Return the operator's saved state (None: stateful processing is not supported)."""

    @abstractmethod
    def emit(self, values: Any) -> None:
        """Emit ``values`` as one element of the operator's output streamlet."""


class TaskContext(Context):
    """The ``Context`` of a streamlet operator's task (runs in that task only)."""

    def __init__(self, topology_context, component, stream_name: str) -> None:
        self._context = topology_context
        self._component = component
        self._stream_name = stream_name

    def get_task_id(self) -> int:
        """Return the task id of this operator instance."""
        return self._context.get_task_id()

    def get_config(self) -> dict:
        """Return the topology's config as this task sees it."""
        return self._context.get_cluster_config()

    def get_stream_name(self) -> str:
        """Return the name of the streamlet this operator reads."""
        return self._stream_name

    def get_num_partitions(self) -> int:
        """Return the number of tasks of this operator's component."""
        return len(self._context.get_component_tasks(self._context.get_component_id()))

    def get_partition_index(self) -> int:
        """Return this task's index among its component's tasks, from 0."""
        return self._context.get_task_index()

    def get_state(self) -> Any:
        """Return None: stateful streamlet operators are not supported."""
        return None

    def emit(self, values: Any) -> None:
        """Emit ``values`` as one element on the operator's ``output`` stream."""
        self._component.emit([values], stream="output")
