"""The topology context given to ``initialize``: where this task sits in the topology.

The answers follow Heron's Python instance (``TopologyContextImpl``), not only heronpy's
docstrings: ``get_sources`` is keyed by ``StreamId(id, component_name)`` namedtuples and its
values are grouping type numbers; ``get_component_tasks`` of an unknown component is ``[]``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple


class StreamId(NamedTuple):
    """A stream of a component, as Heron keys ``get_sources``: ``(id, component_name)``.

    Heron builds these namedtuples from its protobuf ``StreamId`` message (fields ``id`` and
    ``component_name``); user code reads ``key.component_name`` and ``key.id``. Hashable, and
    equal to the plain tuple ``(id, component_name)``.
    """

    id: str
    component_name: str


class TopologyContext(ABC):
    """Read-only facts about the running task (heronpy's interface, plus parallelism).

    Where it runs: inside an instance, on its task-execution thread (handed to ``initialize``).
    """

    @abstractmethod
    def get_task_id(self) -> int:
        """Return this task's id (unique in the topology)."""

    @abstractmethod
    def get_component_id(self) -> str:
        """Return this task's component name."""

    @abstractmethod
    def get_cluster_config(self) -> dict:
        """Return the merged, auto-typed configuration of this component.

        As in Heron, this is the very dict ``initialize`` received, not a copy.
        """

    @abstractmethod
    def get_topology_name(self) -> str:
        """Return the topology's name."""

    @abstractmethod
    def register_metric(self, name: str, metric, time_bucket_in_sec: int) -> None:
        """Publish ``metric`` under ``name`` every ``time_bucket_in_sec`` seconds.

        Publish ``metric`` (an ``IMetric``) every ``time_bucket_in_sec`` seconds under ``name``
        (a dict value as ``<name>/<key>``); a name may be registered once per task.
        """

    @abstractmethod
    def get_sources(self, component_id: str) -> dict[StreamId, int] | None:
        """Return the grouping type of each input of ``component_id``.

        Return ``{StreamId(id, component_name): grouping type}`` of the inputs of
        ``component_id``: ``{}`` for a spout, ``None`` for an unknown component.

        The values are the grouping type numbers (``Grouping.SHUFFLE``, ``Grouping.ALL``, ...;
        a fields grouping gives ``GroupingType.FIELDS``, a custom one ``GroupingType.CUSTOM``),
        as Heron returns them.
        """

    def get_this_sources(self) -> dict[StreamId, int] | None:
        """Return the inputs of this component (see ``get_sources``)."""
        return self.get_sources(self.get_component_id())

    @abstractmethod
    def get_component_tasks(self, component_id: str) -> list[int]:
        """Return the task ids of ``component_id`` in ascending order (``[]`` if unknown)."""

    @abstractmethod
    def get_component_parallelism(self, component_id: str) -> int | None:
        """Return the number of tasks of ``component_id`` (heron_spark extra; None if unknown)."""

    def get_component_output_fields(self, component_id: str,
                                    stream_id: str = "default") -> tuple[str, ...] | None:
        """Return the fields ``component_id`` declares on ``stream_id`` (None if unknown).

        A heron_spark extra (Heron's Java context has ``getComponentOutputFields``); connectors
        such as ``KafkaSink`` read their input's field names with it.
        """
        return None

    def get_task_index(self) -> int:
        """Return this task's index within its component, from 0 (heron_spark extra)."""
        return self.get_component_tasks(self.get_component_id()).index(self.get_task_id())

    def get_current_watermark(self) -> int:
        """Return this task's watermark in ms since the epoch (heron_spark; see ``event_time``).

        ``event_time.WATERMARK_MIN`` before any. A bolt's is its input watermark.
        """
        raise NotImplementedError

    def record_late_tuples(self, count: int = 1) -> None:
        """Count ``count`` tuples this task found late (heron_spark: ``__late-tuples``)."""
        raise NotImplementedError

    @abstractmethod
    def add_task_hook(self, task_hook) -> None:
        """Register ``task_hook`` for this task's emits, acks, fails and executes.

        Register ``task_hook`` (an ``ITaskHook``): it is told of this task's emits, acks, fails
        and executes from now on (see ``heron_spark.api.task_hook``).
        """

    # ---- timers of a keyed bolt (instance.timers); the runtime's context implements them ----
    def register_event_time_timer(self, key, ts_ms: int) -> None:
        """Call the bolt's ``on_timer(key, ts_ms, "event")`` once the input watermark reaches ``ts_ms``.

        ``key``: the value the bolt's fields grouping routes by (a tuple for several fields),
        so the timer follows its key's state on a rescale; ``ts_ms``: event time, int ms since
        the epoch. The same (key, ts_ms) registered twice is one timer. A time the watermark
        has already reached fires at the next watermark advance (at once when registered from
        ``on_timer``). Bolts only, whose class overrides ``Bolt.on_timer``; task thread only.
        """
        self._no_timers()

    def register_processing_time_timer(self, key, ts_ms: int) -> None:
        """Call the bolt's ``on_timer(key, ts_ms, "processing")`` once the wall clock reaches ``ts_ms``.

        ``ts_ms``: wall-clock time, int ms since the epoch (``int(time.time() * 1000) + delay``).
        Otherwise as ``register_event_time_timer``.
        """
        self._no_timers()

    def delete_event_time_timer(self, key, ts_ms: int) -> None:
        """Delete the event-time timer of ``key`` at ``ts_ms`` (nothing when there is none)."""
        self._no_timers()

    def delete_processing_time_timer(self, key, ts_ms: int) -> None:
        """Delete the processing-time timer of ``key`` at ``ts_ms`` (nothing when there is none)."""
        self._no_timers()

    def _no_timers(self) -> None:
        from heron_spark.errors import TopologyTypeError

        msg = f"{type(self).__name__} keeps no timers"
        raise TopologyTypeError(msg, component=self.get_component_id(),
                                fix="register timers from a running bolt task's context")
