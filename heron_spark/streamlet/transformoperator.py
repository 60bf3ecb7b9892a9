"""Arbitrary per-element operators (heronpy's ``TransformOperator``)."""

from __future__ import annotations

from abc import abstractmethod


class TransformOperator:
    """An operator with setup and free emission; each partition (task) gets its own copy.

    ``setup(context)`` runs once in the task; ``transform(tup)`` runs per input tuple (the
    element is ``tup.values[0]``, as in heronpy) and emits any number of elements with
    ``context.emit(element)``.
    """

    @abstractmethod
    def setup(self, context) -> None:
        """Prepare the task; keep ``context`` to emit."""
        msg = f"{type(self).__name__} does not implement setup()"
        raise NotImplementedError(msg)

    @abstractmethod
    def transform(self, tup) -> None:
        """Handle one input tuple; emit through the context."""
        msg = f"{type(self).__name__} does not implement transform()"
        raise NotImplementedError(msg)
