"""The ``TopologyContext`` handed to ``initialize``, and heron's auto-typing of config values."""

from __future__ import annotations

from typing import Any, Callable

from heron_spark.api.context import StreamId, TopologyContext
from heron_spark.api.task_hook import ITaskHook
from heron_spark.errors import TopologyTypeError
from heron_spark.instance.metrics_collector import MetricsCollector
from heron_spark.instance.timers import EVENT, PROCESSING, KeyedTimers
from heron_spark.plan.view import PlanView


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
        self._metrics_collector = MetricsCollector(self._component, task_id)
        self.metrics = self._metrics_collector.registered  # read by the executor
        self.task_hooks: list = []
        self.on_task_hook: Callable[[], None] | None = None  # the executor's: called after each add_task_hook
        self.timers: KeyedTimers | None = None  # set by the executor of a bolt with on_timer
        # the executor (set by it): this task's watermark and late-tuple count
        self.event_time: Any = None

    def get_task_id(self) -> int:
        """Return this task's id."""
        return self._task_id

    def get_component_id(self) -> str:
        """Return the name of this task's component."""
        return self._component

    def get_cluster_config(self) -> dict:
        """Return the config ``initialize`` got."""
        return self._config  # the dict initialize() got, as Heron hands out

    def get_topology_name(self) -> str:
        """Return the topology's name."""
        return self._plan.logical.name

    def register_metric(self, name: str, metric, time_bucket_in_sec: float) -> None:
        """Publish ``metric`` as ``name`` every ``time_bucket_in_sec`` seconds."""
        self._metrics_collector.register_metric(name, metric, time_bucket_in_sec)

    def get_metrics_collector(self) -> MetricsCollector:
        """Return this task's metrics collector (Heron's instance exposes it too)."""
        return self._metrics_collector

    def get_topology_pex_path(self) -> str:
        """Return the file the topology was defined in, on the submitting machine ("" if unknown).

        Heron returns its pex; heron_spark ships the code by value instead.
        """
        return self._plan.logical.source_path

    def get_sources(self, component_id: str) -> dict[StreamId, int] | None:
        """Return the grouping type of each input of ``component_id`` (None if unknown)."""
        return self._plan.logical.sources(component_id)

    def get_component_tasks(self, component_id: str) -> list[int]:
        """Return the task ids of ``component_id`` (empty if unknown)."""
        return list(self._plan.component_tasks.get(component_id, ()))

    def get_component_parallelism(self, component_id: str) -> int | None:
        """Return the number of tasks of ``component_id`` (None if unknown)."""
        decl = self._plan.logical.components.get(component_id)
        return None if decl is None else decl.parallelism

    def get_component_output_fields(self, component_id: str,
                                    stream_id: str = "default") -> tuple[str, ...] | None:
        """Return the fields ``component_id`` declares on ``stream_id`` (None if unknown)."""
        decl = self._plan.logical.components.get(component_id)
        stream = None if decl is None else decl.outputs.get(stream_id)
        return None if stream is None else tuple(stream.fields)

    # ---- event time
    def get_current_watermark(self) -> int:
        """Return this task's watermark in ms since the epoch (``WATERMARK_MIN`` before any).

        A bolt's is its input watermark: every tuple still to come has a timestamp >= it.
        """
        return self.event_time.current_watermark()

    def record_late_tuples(self, count: int = 1) -> None:
        """Count ``count`` tuples this task found late (the ``__late-tuples`` metric)."""
        self.event_time.record_late_tuples(count)

    # ---- task hooks
    def add_task_hook(self, task_hook) -> None:
        """Add ``task_hook`` (an ``ITaskHook``): it sees this task's events from now on."""
        if not isinstance(task_hook, ITaskHook):
            msg = "add_task_hook takes an ITaskHook instance"
            raise TopologyTypeError(msg, component=self._component, value=task_hook,
                                    fix="subclass heronpy.api.task_hook.ITaskHook")
        self.task_hooks.append(task_hook)
        if self.on_task_hook is not None:
            self.on_task_hook()

    # ---- timers (instance.timers; the executor fires them)
    def register_event_time_timer(self, key, ts_ms: int) -> None:
        """Fire ``on_timer(key, ts_ms, "event")`` once the input watermark reaches ``ts_ms``."""
        self._timers().register(EVENT, key, ts_ms)

    def register_processing_time_timer(self, key, ts_ms: int) -> None:
        """Fire ``on_timer(key, ts_ms, "processing")`` once the wall clock (ms) reaches ``ts_ms``."""
        self._timers().register(PROCESSING, key, ts_ms)

    def delete_event_time_timer(self, key, ts_ms: int) -> None:
        """Delete the event-time timer of ``key`` at ``ts_ms`` (nothing when there is none)."""
        self._timers().delete(EVENT, key, ts_ms)

    def delete_processing_time_timer(self, key, ts_ms: int) -> None:
        """Delete the processing-time timer of ``key`` at ``ts_ms`` (nothing when there is none)."""
        self._timers().delete(PROCESSING, key, ts_ms)

    def _timers(self) -> KeyedTimers:
        if self.timers is not None:
            return self.timers
        decl = self._plan.logical.components[self._component]
        if decl.is_spout:
            msg = "a spout has no timers: only a bolt's on_timer is called"
            fix = "register timers in a bolt downstream, fields-grouped by the timers' key"
        else:
            msg = (f"the bolt registers a timer but its class "
                   f"{decl.component_class.__name__} does not override Bolt.on_timer")
            fix = "define on_timer(self, key, ts_ms, kind) on the bolt's class"
        raise TopologyTypeError(msg, component=self._component, fix=fix)
