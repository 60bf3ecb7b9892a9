"""Custom groupings: user code that picks the target tasks of each tuple."""

from abc import ABC, abstractmethod


class ICustomGrouping(ABC):
    """Choose target tasks per tuple; runs in the emitting instance (heronpy's contract)."""

    @abstractmethod
    def prepare(self, context, component, stream, target_tasks):
        """Prepare the grouping: called once per emitting task with the subscriber's sorted task ids."""

    @abstractmethod
    def choose_tasks(self, values):
        """Return a list of task ids (each one of ``target_tasks``) for the tuple ``values``."""
