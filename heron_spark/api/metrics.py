"""User metrics (heronpy's ``heronpy.api.metrics``), registered with ``context.register_metric``.

A metric lives on the task-execution thread of one instance; the runtime calls
``get_value_and_reset`` every ``time_bucket_in_sec`` seconds and publishes the value.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class IMetric(ABC):
    """A value the runtime samples and resets periodically."""

    @abstractmethod
    def get_value_and_reset(self):
        """Return the current value (a number or a dict of numbers) and reset."""


class CountMetric(IMetric):
    """A counter."""

    def __init__(self) -> None:
        self.value = 0

    def incr(self, to_add: int = 1) -> None:
        """Add ``to_add``."""
        self.value += to_add

    def get_value_and_reset(self):
        value, self.value = self.value, 0
        return value


class MultiCountMetric(IMetric):
    """Counters by key."""

    def __init__(self) -> None:
        self.value: dict = {}

    def add_key(self, key) -> None:
        """Start counting ``key`` at zero."""
        self.value.setdefault(key, 0)

    def incr(self, key, to_add: int = 1) -> None:
        """Add ``to_add`` to ``key``."""
        self.value[key] = self.value.get(key, 0) + to_add

    def get_value_and_reset(self):
        value, self.value = self.value, {k: 0 for k in self.value}
        return value


class MeanReducedMetric(IMetric):
    """The mean of the values given to ``update`` since the last sample (None if none)."""

    def __init__(self) -> None:
        self._sum = 0.0
        self._count = 0

    def update(self, value) -> None:
        """Add one observation."""
        self._sum += value
        self._count += 1

    def get_value_and_reset(self):
        value = self._sum / self._count if self._count else None
        self._sum, self._count = 0.0, 0
        return value


class AssignableMetric(IMetric):
    """A gauge: the last value given to ``update``."""

    def __init__(self, value=0) -> None:
        self.value = value

    def update(self, value) -> None:
        """Set the gauge."""
        self.value = value

    def get_value_and_reset(self):
        return self.value
