"""The TMaster's metrics history: one value per minute per (component, task, metric), 3 hours.

Like Heron's TMaster metrics cache: every sample an instance or stream manager publishes is
folded into the bucket of the minute it arrived in (``bucket_secs``, default 60), by the
metric's kind (``metrics.names.metric_kind``):

- SUM: a cumulative counter (tuples since the process started). The bucket holds the sum of
  its increments. A value below the previous one means the process restarted from 0: the
  whole value is the increment.
- AVG: a per-interval mean (latencies, ns). The bucket holds the mean of its samples.
- LAST: anything else (user metrics, gauges). The bucket holds the last sample.

Bounded memory: each series keeps at most ``retention_secs / bucket_secs + 1`` buckets (older
ones are dropped as new minutes start), and at most ``max_series`` series exist (samples of a
new series past that are counted in ``dropped_samples`` and dropped). Bucket timestamps are
wall-clock seconds (the start of the minute), as Heron's timelines are.

I/O-free: the clock is passed in. Not thread-safe: the TMaster calls it under its lock.
"""

from __future__ import annotations

import collections
import time
from typing import Callable, Iterable, Mapping

from heron_spark.metrics.names import MetricKind, metric_kind


class _Series:
    """One metric of one task: its last raw counter value and its buckets, oldest first."""

    __slots__ = ("kind", "last_raw", "buckets")

    def __init__(self, kind: MetricKind, max_buckets: int) -> None:
        self.kind = kind
        self.last_raw: float | None = None
        # [bucket start secs, sum, samples]; AVG = sum / samples, SUM = sum, LAST = sum
        self.buckets: collections.deque = collections.deque(maxlen=max_buckets)

    def add(self, bucket: int, value: float) -> None:
        if self.kind is MetricKind.SUM:
            last, self.last_raw = self.last_raw, value
            value = value if last is None or value < last else value - last
        buckets = self.buckets
        if not buckets or buckets[-1][0] != bucket:
            if buckets and buckets[-1][0] > bucket:
                return  # the clock went back: keep the history ordered
            buckets.append([bucket, 0.0, 0])
        entry = buckets[-1]
        if self.kind is MetricKind.LAST:
            entry[1], entry[2] = value, 1
        else:
            entry[1] += value
            entry[2] += 1

    def value(self, entry: list) -> float:
        return entry[1] / entry[2] if self.kind is MetricKind.AVG else entry[1]


class MetricsCache:
    """See the module docstring."""

    def __init__(self, bucket_secs: int = 60, retention_secs: int = 3 * 3600,
                 max_series: int = 200_000, clock: Callable[[], float] = time.time) -> None:
        if bucket_secs < 1 or retention_secs < bucket_secs:
            msg = (f"bucket_secs ({bucket_secs}) must be >= 1 and <= retention_secs "
                   f"({retention_secs})")
            raise ValueError(msg)
        self.bucket_secs = int(bucket_secs)
        self.retention_secs = int(retention_secs)
        self.max_series = max_series
        self.max_buckets = self.retention_secs // self.bucket_secs + 1
        self._clock = clock
        self._series: dict[tuple[str, int, str], _Series] = {}
        self._by_task: dict[tuple[str, int], dict[str, _Series]] = {}
        self._last_stamp: dict[tuple[str, int], int] = {}
        self.dropped_samples = 0

    def bucket_of(self, secs: float) -> int:
        """Return the start (wall-clock secs) of the bucket holding ``secs``."""
        return int(secs) // self.bucket_secs * self.bucket_secs

    def add(self, component: str, task_id: int, values: Mapping[str, float] | Iterable[tuple[str, float]],
            timestamp_ms: int = 0) -> None:
        """Fold one publish of ``component``'s ``task_id`` into the current bucket.

        The publish maps metric name -> value, or pairs. A publish whose non-zero
        ``timestamp_ms`` is not newer than the task's last one is a repeat (a metrics manager
        forwards the latest each interval) and is ignored.
        """
        task_key = (component, task_id)
        if timestamp_ms:
            if self._last_stamp.get(task_key, -1) >= timestamp_ms:
                return
            self._last_stamp[task_key] = timestamp_ms
        bucket = self.bucket_of(self._clock())
        per_task = self._by_task.setdefault(task_key, {})
        items: Iterable[tuple[str, float]] = values.items() if isinstance(values, Mapping) else values
        for name, value in items:
            series = per_task.get(name)
            if series is None:
                if len(self._series) >= self.max_series:
                    self.dropped_samples += 1
                    continue
                series = per_task[name] = self._series[(component, task_id, name)] = \
                    _Series(metric_kind(name), self.max_buckets)
            series.add(bucket, float(value))

    # ---- reading ---------------------------------------------------------------------------
    def components(self) -> set[str]:
        """Return every component with a sample."""
        return {component for component, _ in self._by_task}

    def tasks(self, component: str) -> list[int]:
        """Return the tasks of ``component`` with a sample, in order."""
        return sorted(task for comp, task in self._by_task if comp == component)

    def names(self, component: str, task_id: int) -> list[str]:
        """Return the metric names ``component``'s ``task_id`` published."""
        return sorted(self._by_task.get((component, task_id), {}))

    @property
    def series_count(self) -> int:
        """How many (component, task, metric) series are kept."""
        return len(self._series)

    def _live(self, series: _Series, start: int, end: float):
        oldest = self.bucket_of(self._clock()) - self.retention_secs
        lo = max(start, oldest)
        return [entry for entry in series.buckets if lo <= entry[0] <= end]

    def timeline(self, component: str, task_id: int, metric: str, start_secs: float,
                 end_secs: float) -> dict[int, float]:
        """Return bucket start -> value for the buckets starting in [start, end]."""
        series = self._by_task.get((component, task_id), {}).get(metric)
        if series is None:
            return {}
        return {entry[0]: series.value(entry)
                for entry in self._live(series, int(start_secs), end_secs)}

    def over(self, component: str, task_id: int, metric: str,
             interval_secs: float) -> float | None:
        """Return the metric over the last ``interval_secs`` (<= 0: everything kept).

        That is the sum of a SUM, the mean of an AVG's samples, the last LAST; None without
        a sample.
        """
        series = self._by_task.get((component, task_id), {}).get(metric)
        if series is None:
            return None
        now = self._clock()
        start = -1 << 62 if interval_secs <= 0 else self.bucket_of(now - interval_secs)
        entries = self._live(series, start, now)
        if not entries:
            return None
        if series.kind is MetricKind.LAST:
            return entries[-1][1]
        total = sum(entry[1] for entry in entries)
        if series.kind is MetricKind.AVG:
            return total / sum(entry[2] for entry in entries)
        return total

    def oldest_bucket(self) -> int | None:
        """Return the start of the oldest bucket kept, over every series (None: empty)."""
        starts = [s.buckets[0][0] for s in self._series.values() if s.buckets]
        return min(starts) if starts else None
