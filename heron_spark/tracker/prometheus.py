"""Write the tracker's ``/metrics``: every live topology's per-instance metrics, as Prometheus text.

Prometheus' text exposition format 0.0.4. One family per Heron metric name: ``heron_`` and the
name with every other character than a letter or digit made ``_`` (``__watermark-lag-ms`` ->
``heron_watermark_lag_ms``, ``__emit-count/default`` -> ``heron_emit_count_default``); each
sample is labelled ``topology``, ``component``, ``instance`` (``container_<i>_<component>_<task>``,
or ``stmgr-<i>``) and ``metric`` (the Heron name). Values are the instances' latest, as
published: counters cumulative since the process started, gauges as they are now. Each family's
``# TYPE`` is ``metrics.names.prometheus_type``'s (``untyped`` when the names folded into one
family disagree). Pure; any thread.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from heron_spark.metrics.names import prometheus_type

Row = Sequence  # [component, instance id, metric name, value]: ``TMaster.prometheus_view``


def family(metric: str) -> str:
    """Return the Prometheus family of Heron metric ``metric``, e.g. ``heron_watermark``."""
    return "heron_" + "".join(c if c.isalnum() else "_" for c in metric.strip("_")).strip("_")


def exposition(topologies: Iterable[tuple[str, Iterable[Row]]]) -> str:
    """Return the text of ``topologies`` ((topology name, its rows) pairs), families sorted."""
    samples: dict[str, list[str]] = {}
    types: dict[str, set[str]] = {}
    for name, rows in topologies:
        for component, instance, metric, value in rows:
            fam = family(metric)
            labels = ",".join(f'{k}="{_label(v)}"' for k, v in (
                ("topology", name), ("component", component), ("instance", instance),
                ("metric", metric)))
            samples.setdefault(fam, []).append(f"{fam}{{{labels}}} {_number(value)}")
            types.setdefault(fam, set()).add(prometheus_type(metric))
    lines = []
    for fam in sorted(samples):
        kinds = types[fam]
        lines.append(f"# TYPE {fam} {kinds.pop() if len(kinds) == 1 else 'untyped'}")
        lines.extend(samples[fam])
    return "\n".join(lines) + "\n"


def _number(value) -> str:
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    return repr(number)


def _label(value) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
