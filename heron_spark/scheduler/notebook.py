"""How a topology handle shows itself: one line for ``repr``, a small table for notebooks.

Pure functions from the TMaster's status and per-component metrics to text; no I/O, any
thread. Every value that reaches the HTML goes through ``html.escape`` (component names and
failure details are user text).
"""

from __future__ import annotations

import dataclasses
import html
from typing import Mapping

from heron_spark.contract import metric_names
from heron_spark.contract.topology_view import TopologyStatus

# Metric families summed per component. A name is the family alone (``__execute-count``) or the
# family and a stream / source (``__emit-count/default``, ``__execute-count/split/default``).
EMIT, EXECUTE, ACK, FAIL = (metric_names.EMIT_COUNT, metric_names.EXECUTE_COUNT,
                             metric_names.ACK_COUNT, metric_names.FAIL_COUNT)


@dataclasses.dataclass(frozen=True)
class ComponentRow:
    """One component's totals and its mean rates since the topology started (per second)."""

    name: str
    kind: str                 # "spout" or "bolt"
    parallelism: int
    emitted: float
    executed: float
    acked: float
    failed: float
    emit_rate: float | None   # None before the topology runs
    execute_rate: float | None


@dataclasses.dataclass(frozen=True)
class HandleView:
    """What ``repr`` and ``_repr_html_`` show of a topology."""

    name: str
    state: str
    detail: str
    registered: int
    containers: int
    generation: int
    link: str | None
    components: tuple[ComponentRow, ...]


def family_total(values: Mapping[str, float], family: str) -> float:
    """Sum the metrics of ``family`` over its streams.

    A family published both per stream and as a whole (an instance's ``__execute-count``
    next to its ``__execute-count/<component>/<stream>``) is counted once: the per-stream
    values when there are any, else the whole.
    """
    scoped = [value for metric, value in values.items() if metric.startswith(family + "/")]
    return sum(scoped) if scoped else float(values.get(family, 0.0))


def build_view(status: TopologyStatus, metrics: Mapping[str, Mapping[str, float]],
               components: Mapping[str, tuple[bool, int]], elapsed_secs: float | None,
               link: str | None) -> HandleView:
    """Make the view from the TMaster's status and metrics.

    The inputs are the TMaster's ``status()``, ``metrics_by_component()``, the components
    (name -> (is spout, parallelism)) and the seconds since the topology started running.
    """
    rows = []
    for name, (is_spout, parallelism) in components.items():
        values = metrics.get(name, {})
        emitted, executed = family_total(values, EMIT), family_total(values, EXECUTE)
        per_sec = (lambda total: total / elapsed_secs) if elapsed_secs else (lambda total: None)
        rows.append(ComponentRow(name, "spout" if is_spout else "bolt", parallelism, emitted,
                                 executed, family_total(values, ACK), family_total(values, FAIL),
                                 per_sec(emitted), per_sec(executed)))
    return HandleView(status.name, status.state, status.detail, len(status.registered),
                      status.containers, status.generation, link, tuple(rows))


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}/s"


def _count(value: float) -> str:
    return f"{value:,.0f}"


def text(view: HandleView) -> str:
    """One line: name, state, containers registered/total, generation, rates."""
    rates = ", ".join(f"{row.name}: emit {_rate(row.emit_rate)} execute {_rate(row.execute_rate)}"
                      for row in view.components)
    return (f"TopologyHandle(name={view.name!r}, state={view.state}, "
            f"containers={view.registered}/{view.containers}, generation={view.generation}, "
            f"rates=[{rates}])")


def html_table(view: HandleView) -> str:
    """Render a small HTML table for notebooks; every value escaped."""
    e = lambda value: html.escape(str(value), quote=True)
    head = (f"<div class='heron-spark-topology'><b>heron_spark topology {e(view.name)}</b>"
            f"<br>state <b>{e(view.state)}</b>"
            + (f" ({e(view.detail)})" if view.detail else "")
            + f" &middot; containers {view.registered}/{view.containers} registered"
            f" &middot; generation {view.generation}")
    if view.link:
        head += f" &middot; <a href='{e(view.link)}' target='_blank'>UI {e(view.link)}</a>"
    columns = ("component", "kind", "parallelism", "emitted", "emit rate", "executed",
               "execute rate", "acked", "failed")
    rows = "".join(
        "<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in (
            row.name, row.kind, row.parallelism, _count(row.emitted), _rate(row.emit_rate),
            _count(row.executed), _rate(row.execute_rate), _count(row.acked),
            _count(row.failed))) + "</tr>"
        for row in view.components)
    return (head + "<table><thead><tr>" + "".join(f"<th>{e(c)}</th>" for c in columns)
            + f"</tr></thead><tbody>{rows}</tbody></table>"
            "<small>rates: mean per second since the topology started</small></div>")
