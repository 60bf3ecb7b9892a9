"""Metric and exception views in the shapes of Heron's tracker responses.

The TMaster's ``metrics_view``, ``timeline_view``, ``query_view``, ``exceptions_view`` and
``exception_summary_view`` call these with its plan, metrics history (``MetricsCache``) and
``ExceptionLog``; the tracker serves their results as JSON. Shapes (Heron's; metric values and
counts are strings, as Heron's tracker returns them):

- metrics: ``{"metrics": {metric: {instance id: value}}, "interval": secs, "component": c}``
- timeline: ``{"starttime", "endtime", "component", "timeline": {metric: {instance id:
  {"<minute secs>": value}}}}``
- query: ``[{"instance": id or None, "data": {"<minute secs>": value}}]``
- exceptions: ``[{"hostname", "lasttime", "firsttime", "count", "stacktrace", "logging",
  "instance_id"}]``; summary: ``[{"class_name", "lasttime", "firsttime", "count"}]``

Instances are named ``container_<index>_<component>_<task>`` (``plan.view.instance_id``);
the stream managers (component ``__stmgr__``) ``stmgr-<container index>``. A metrics view of an
unknown component or instance, or of component ``*``/empty, raises ``MetricsQueryError``
(Heron's TMaster answers those with an error too); the exceptions views take ``*``/empty as
every component. I/O-free and pure; the TMaster calls them under its lock.
"""

from __future__ import annotations

from heron_spark.errors import MetricsQueryError
from heron_spark.metrics import names
from heron_spark.plan.view import PlanView
from heron_spark.tmaster.exception_log import ExceptionLog, format_time
from heron_spark.tmaster.metrics_cache import MetricsCache
from heron_spark.tmaster.metrics_query import Evaluator

ALL = ("", "*")


def stmgr_id(container_index: int) -> str:
    """Return the instance id of a container's stream manager in the views."""
    return f"stmgr-{container_index}"


def instance_ids(plan: PlanView, component: str) -> dict[str, int]:
    """Return instance id -> task id of ``component`` (``__stmgr__``: the stream managers)."""
    if component == names.STMGR_COMPONENT:
        return {stmgr_id(i): -1 - i for i in range(plan.container_count)}
    return {plan.instance_id(task): task for task in plan.component_tasks[component]}


def _known(plan: PlanView) -> list[str]:
    return sorted(plan.component_tasks) + [names.STMGR_COMPONENT]


def resolve(plan: PlanView, component: str, instances: list[str] | None,
            what: str = "metrics") -> dict[str, int]:
    """Return instance id -> task of ``instances`` (None/empty: all) of ``component``; raise
    MetricsQueryError for a component or instance the topology does not have."""
    if component in ALL:
        raise MetricsQueryError(f"the {what} view needs one component", token=component,
                                fix=f"name one of {_known(plan)}")
    if component not in plan.component_tasks and component != names.STMGR_COMPONENT:
        raise MetricsQueryError(f"unknown component {component!r}", token=component,
                                fix=f"name one of {_known(plan)}")
    ids = instance_ids(plan, component)
    if not instances:
        return ids
    unknown = [i for i in instances if i not in ids]
    if unknown:
        raise MetricsQueryError(f"component {component!r} has no instance {unknown[0]!r}",
                                token=unknown[0], fix=f"use one of {sorted(ids)}")
    return {i: ids[i] for i in instances}


def _names(cache: MetricsCache, component: str, tasks, metrics: list[str] | None) -> list[str]:
    if metrics:
        return list(metrics)
    return sorted({n for task in tasks for n in cache.names(component, task)})


def metrics_view(plan: PlanView, cache: MetricsCache, now: float, component: str,
                 metrics: list[str] | None, instances: list[str] | None,
                 interval_secs: int) -> dict:
    """Each metric of each instance over the last ``interval_secs`` (<= 0: all kept): a
    counter's sum, a latency's mean, another metric's last value. ``metrics`` None/empty:
    every metric the component published."""
    ids = resolve(plan, component, instances)
    out: dict[str, dict[str, str]] = {}
    for metric in _names(cache, component, ids.values(), metrics):
        values = {}
        for instance, task in ids.items():
            value = cache.over(component, task, metric, interval_secs)
            if value is not None:
                values[instance] = repr(float(value))
        out[metric] = values
    if interval_secs > 0:
        interval = int(interval_secs)
    else:
        oldest = cache.oldest_bucket()
        interval = 0 if oldest is None else max(0, int(now - oldest))
    return {"metrics": out, "interval": interval, "component": component}


def timeline_view(plan: PlanView, cache: MetricsCache, component: str,
                  metrics: list[str] | None, instances: list[str] | None,
                  start_secs: int, end_secs: int) -> dict:
    """Each metric of each instance per minute, for the minutes starting in [start, end]."""
    if start_secs > end_secs:
        raise MetricsQueryError("starttime is after endtime", token=str(start_secs),
                                fix="pass starttime <= endtime (epoch seconds)")
    ids = resolve(plan, component, instances, "timeline")
    timeline: dict[str, dict[str, dict[str, str]]] = {}
    for metric in _names(cache, component, ids.values(), metrics):
        per_instance = {}
        for instance, task in ids.items():
            points = cache.timeline(component, task, metric, start_secs, end_secs)
            if points:
                per_instance[instance] = {str(t): repr(float(v)) for t, v in sorted(points.items())}
        timeline[metric] = per_instance
    return {"starttime": start_secs, "endtime": end_secs, "component": component,
            "timeline": timeline}


def query_view(plan: PlanView, cache: MetricsCache, query: str, start_secs: int,
               end_secs: int) -> list:
    """Evaluate Heron's metrics query language (``metrics_query``) over the history."""
    def fetch(component: str, instance: str | None, metric: str, start: int, end: int):
        try:
            ids = resolve(plan, component, [instance] if instance else None, "query")
        except MetricsQueryError as exc:
            raise MetricsQueryError(exc.problem, query=query, token=exc.token,
                                    position=max(0, query.find(exc.token)), fix=exc.fix) from None
        return {inst: cache.timeline(component, task, metric, start, end)
                for inst, task in ids.items()}

    return Evaluator(fetch, cache.bucket_secs).run(query, int(start_secs), int(end_secs))


def _exception_tasks(plan: PlanView, component: str, instances: list[str] | None) -> set[int] | None:
    if component in ALL:
        if not instances:
            return None
        ids = {plan.instance_id(t): t for t in plan.task_component}
        unknown = [i for i in instances if i not in ids]
        if unknown:
            raise MetricsQueryError(f"the topology has no instance {unknown[0]!r}",
                                    token=unknown[0], fix=f"use one of {sorted(ids)}")
        return {ids[i] for i in instances}
    return set(resolve(plan, component, instances, "exceptions").values())


def exceptions_view(plan: PlanView, log: ExceptionLog, component: str,
                    instances: list[str] | None) -> list:
    """Each distinct exception of each instance, oldest first per instance."""
    return [{"hostname": e.hostname, "lasttime": format_time(e.lasttime),
             "firsttime": format_time(e.firsttime), "count": str(e.count),
             "stacktrace": e.stacktrace, "logging": e.logging,
             "instance_id": plan.instance_id(e.task_id)}
            for e in log.entries(_exception_tasks(plan, component, instances))]


def exception_summary_view(plan: PlanView, log: ExceptionLog, component: str,
                           instances: list[str] | None) -> list:
    """The exceptions grouped by class name, over the instances asked for."""
    grouped: dict[str, list] = {}
    for e in log.entries(_exception_tasks(plan, component, instances)):
        group = grouped.get(e.class_name)
        if group is None:
            grouped[e.class_name] = [e.firsttime, e.lasttime, e.count]
        else:
            group[0] = min(group[0], e.firsttime)
            group[1] = max(group[1], e.lasttime)
            group[2] += e.count
    return [{"class_name": name, "firsttime": format_time(first), "lasttime": format_time(last),
             "count": str(count)} for name, (first, last, count) in sorted(grouped.items())]
