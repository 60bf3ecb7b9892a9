"""The live views a TMaster answers, by path: the one table the TMaster and the tracker share.

The tracker forwards the ``TRACKER`` paths (Heron's tracker paths, with Heron's query
parameters) to the topology's TMaster (``tmaster.client.query_view``); the TMaster answers
every ``LivePath`` (``tmaster.live_queries``). ``STATUS``, ``PROMETHEUS``, ``HANDLE`` and
``UI_LINK`` are asked by the tracker's own pages, its Prometheus endpoint and a topology's
handle, never forwarded as such.
"""

from __future__ import annotations

import enum


class LivePath(str, enum.Enum):
    """A live view of a running topology, answered by its TMaster."""

    METRICS = "/topologies/metrics"
    TIMELINE = "/topologies/metrics/timeline"
    QUERY = "/topologies/metrics/query"
    EXCEPTIONS = "/topologies/exceptions"
    EXCEPTION_SUMMARY = "/topologies/exceptionsummary"
    RUNTIME_STATE = "/topologies/runtimestate"
    PID = "/topologies/pid"
    FILE_DATA = "/topologies/container/filedata"
    FILE_STATS = "/topologies/container/filestats"
    STATUS = "/topologies/status"
    PROMETHEUS = "prometheus"
    HANDLE = "handle"
    UI_LINK = "ui_link"


# What the tracker forwards to the TMaster as they come (GET /topologies/...).
TRACKER = (LivePath.METRICS, LivePath.TIMELINE, LivePath.QUERY, LivePath.EXCEPTIONS,
           LivePath.EXCEPTION_SUMMARY, LivePath.RUNTIME_STATE, LivePath.PID,
           LivePath.FILE_DATA, LivePath.FILE_STATS)
TRACKER_PATHS = frozenset(path.value for path in TRACKER)

# Heron's pre-0.20.5 names of two of them.
ALIASES = {"/topologies/metricstimeline": LivePath.TIMELINE.value,
           "/topologies/metricsquery": LivePath.QUERY.value}
