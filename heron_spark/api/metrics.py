"""User metrics (heronpy's ``heronpy.api.metrics``), registered with ``context.register_metric``.

A metric lives on the task-execution thread of one instance; the runtime calls
``get_value_and_reset`` every ``time_bucket_in_sec`` seconds and publishes the value: a number
under the metric's name, a dict as one metric per key, named ``<name>/<key>``. ``None`` (a
reducer that saw no value) publishes nothing, and the previous value stays.

The family, with heronpy's names and semantics:

- counters: ``CountMetric`` (``incr``), ``MultiCountMetric`` (``incr(key)``, ``add_key``);
  reset to 0 on each sample.
- gauges: ``AssignableMetrics`` (``update``; ``AssignableMetric`` is the same class),
  ``MultiAssignableMetrics`` (``update(key, value)``); never reset.
- reductions: ``ReducedMetric(reducer_cls)`` folds the values given to ``update`` with an
  ``IReducer`` (``init``/``reduce``/``extract``) and starts again on each sample;
  ``MultiReducedMetric(reducer_cls)`` does so per key. ``MeanReducer`` averages;
  ``MeanReducedMetric()`` and ``MultiMeanReducedMetric()`` are the reductions with it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable


class IMetric(ABC):
    """A value the runtime samples and resets periodically."""

    @abstractmethod
    def get_value_and_reset(self):
        """Return the current value (a number, a dict of numbers, or None) and reset."""


class CountMetric(IMetric):
    """A counter, back to 0 after each sample."""

    def __init__(self) -> None:
        self.value = 0

    def incr(self, to_add: int = 1) -> None:
        """Add ``to_add``."""
        self.value += to_add

    def get_value_and_reset(self):
        """Return the count and reset it to 0."""
        value, self.value = self.value, 0
        return value


class MultiCountMetric(IMetric):
    """Counters by key; a key once seen is published (as 0) after every later sample."""

    def __init__(self) -> None:
        self.value: dict = {}

    def add_key(self, key) -> None:
        """Start counting ``key`` at zero (so it is published even before its first ``incr``)."""
        self.value.setdefault(key, 0)

    def incr(self, key, to_add: int = 1) -> None:
        """Add ``to_add`` to ``key``."""
        self.value[key] = self.value.get(key, 0) + to_add

    def get_value_and_reset(self):
        """Return the counts by key and reset each to 0 (keys stay)."""
        value, self.value = self.value, dict.fromkeys(self.value, 0)
        return value


class IReducer(ABC):
    """Folds the values of one sampling period into one (heronpy's reducer interface)."""

    @abstractmethod
    def init(self) -> None:
        """Start a new period (called at creation and after each ``extract``)."""

    @abstractmethod
    def reduce(self, value) -> None:
        """Fold one value in."""

    @abstractmethod
    def extract(self):
        """Return the period's result (None: nothing to publish)."""


class MeanReducer(IReducer):
    """The mean of the period's values, a float; None when there were none."""

    def init(self) -> None:
        """Start a new period with no values."""
        self.sum = 0.0
        self.count = 0

    def reduce(self, value) -> None:
        """Add ``value`` to the period's sum."""
        self.sum += float(value)
        self.count += 1

    def extract(self):
        """Return the period's mean, or None when it had no values."""
        return self.sum / self.count if self.count else None


class ReducedMetric(IMetric):
    """The values given to ``update`` in a period, folded by a reducer of ``reducer_cls``."""

    def __init__(self, reducer_cls: Callable[[], IReducer]) -> None:
        self.reducer = reducer_cls()
        self.reducer.init()

    def update(self, value) -> None:
        """Fold ``value`` into this period's result."""
        self.reducer.reduce(value)

    def get_value_and_reset(self):
        """Return this period's result and start a new period."""
        value = self.reducer.extract()
        self.reducer.init()
        return value


class MultiReducedMetric(IMetric):
    """A ``ReducedMetric`` per key, each with its own reducer of ``reducer_cls``."""

    def __init__(self, reducer_cls: Callable[[], IReducer]) -> None:
        self.value: dict[Any, ReducedMetric] = {}
        self.reducer = reducer_cls

    def add_key(self, key) -> None:
        """Track ``key`` before its first ``update`` (it publishes nothing until then)."""
        if key not in self.value:
            self.value[key] = ReducedMetric(self.reducer)

    def update(self, key, value) -> None:
        """Fold ``value`` into ``key``'s result for this period."""
        metric = self.value.get(key)
        if metric is None:
            metric = self.value[key] = ReducedMetric(self.reducer)
        metric.update(value)

    def get_value_and_reset(self):
        """Return each key's result for this period and start a new one."""
        return {key: metric.get_value_and_reset() for key, metric in self.value.items()}


class MeanReducedMetric(ReducedMetric):
    """The mean of the values given to ``update`` since the last sample (None if none)."""

    def __init__(self) -> None:
        super().__init__(MeanReducer)


class MultiMeanReducedMetric(MultiReducedMetric):
    """Per key, the mean of the values given to ``update(key, value)`` since the last sample."""

    def __init__(self) -> None:
        super().__init__(MeanReducer)


class AssignableMetrics(IMetric):
    """A gauge: the last value given to ``update`` (sampling does not reset it)."""

    def __init__(self, init_val=0) -> None:
        self.value = init_val

    def update(self, value) -> None:
        """Set the gauge."""
        self.value = value

    def get_value_and_reset(self):
        """Return the gauge's value (not reset)."""
        return self.value


AssignableMetric = AssignableMetrics
"""Another name of ``AssignableMetrics`` (the same class)."""


class MultiAssignableMetrics(IMetric):
    """Gauges by key: each key's last value given to ``update``."""

    def __init__(self) -> None:
        self.map: dict[Any, AssignableMetrics] = {}

    def update(self, key, value) -> None:
        """Set ``key``'s gauge."""
        gauge = self.map.get(key)
        if gauge is None:
            self.map[key] = AssignableMetrics(value)
        else:
            gauge.update(value)

    def get_value_and_reset(self):
        """Return each key's gauge value (not reset)."""
        return {key: gauge.get_value_and_reset() for key, gauge in self.map.items()}


__all__ = [
    "AssignableMetric", "AssignableMetrics", "CountMetric", "IMetric", "IReducer", "MeanReducedMetric",
    "MeanReducer", "MultiAssignableMetrics", "MultiCountMetric", "MultiMeanReducedMetric",
    "MultiReducedMetric", "ReducedMetric",
]
