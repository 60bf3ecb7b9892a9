"""``ArrayLooper``: a source that emits the items of a list over and over."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from heron_spark.errors import TopologyTypeError, TopologyValueError
from heron_spark.streamlet.generator import Generator


class ArrayLooper(Generator):
    """A source that emits the items of an iterable in order, forever or ``loops`` times.

    Emits ``user_iterable``'s items in order, forever (heronpy's), or ``loops`` times
    (heron_spark: then the source ends). ``sleep`` seconds separate two items; unlike heronpy's
    it does not block the task: ``get`` returns None until the item is due.
    """

    def __init__(self, user_iterable: Iterable, sleep: float | None = None, *,
                 loops: int | None = None) -> None:
        if not isinstance(user_iterable, Iterable):
            msg = "ArrayLooper takes an iterable"
            raise TopologyTypeError(msg, value=user_iterable, fix="pass a list of elements")
        if loops is not None and (not isinstance(loops, int) or loops < 1):
            msg = "loops must be an integer >= 1 (or None: forever)"
            raise TopologyValueError(msg, value=loops, fix="pass loops=1 or more")
        self._items = list(user_iterable)
        self._sleep = sleep
        self._loops = loops

    def setup(self, context) -> None:
        """Start at the first item."""
        self._position = 0
        self._done_loops = 0
        self._due = 0.0

    def get(self) -> Any:
        """Return the next item (None while ``sleep`` has not passed)."""
        if not self._items or (self._loops is not None and self._done_loops >= self._loops):
            raise StopIteration
        if self._sleep:
            now = time.monotonic()
            if now < self._due:
                return None
            self._due = now + self._sleep
        item = self._items[self._position]
        self._position += 1
        if self._position == len(self._items):
            self._position = 0
            self._done_loops += 1
        return item
