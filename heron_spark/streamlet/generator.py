"""Sources of the streamlet API (heronpy's ``Generator``)."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, NamedTuple


class Timestamped(NamedTuple):
    """An element with its event time, as a ``Generator`` may return it (heron_spark).

    ``timestamp_ms``: int milliseconds since the epoch. A source marked with
    ``assign_timestamps()`` (no function) emits ``element`` with that event time; other
    sources emit ``element`` and drop the time.
    """

    element: Any
    timestamp_ms: int


class Generator:
    """A source of elements, one per ``get``; each partition (task) gets its own copy.

    ``setup(context)`` runs once in the task before the first ``get``. ``get()`` returns the
    next element, or None when there is nothing at the moment; it is called in a loop on
    the task's thread and should not block. heron_spark: raising ``StopIteration`` ends the
    source (a bounded stream; the topology ends once every source ended and all is processed).
    """

    @abstractmethod
    def setup(self, context) -> None:
        """Prepare the task (``context``: a ``Context``)."""
        msg = f"{type(self).__name__} does not implement setup()"
        raise NotImplementedError(msg)

    @abstractmethod
    def get(self) -> Any:
        """Return the next element, or None when there is none now."""
        msg = f"{type(self).__name__} does not implement get()"
        raise NotImplementedError(msg)


class IterableGenerator(Generator):
    """A generator of the elements of a list, once (heron_spark).

    Made by ``Builder.new_source(iterable)``; partition i of n emits elements i, i + n, i + 2n,
    ...
    """

    def __init__(self, items) -> None:
        self._items = list(items)
        self._next: Any = None

    def setup(self, context) -> None:
        """Take this partition's share."""
        share = self._items[context.get_partition_index()::context.get_num_partitions()]
        self._next = iter(share).__next__

    def get(self) -> Any:
        """Return the next element; ``StopIteration`` once all were returned."""
        return self._next()
