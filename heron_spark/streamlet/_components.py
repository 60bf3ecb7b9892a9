"""The spouts and per-element bolts streamlet operations compile to.

Every streamlet component emits one field, ``_output_`` (the element), on stream ``output``,
as heronpy's do. Under at-least-once the sources emit with message ids (and replay failed
elements) and the bolts auto-ack: each emit is anchored to the input it came from, which is
acked when ``process`` returns. The operator's function or object travels in the component
config (pickled with the topology); objects with state (generators, transform operators)
are copied per task. These classes run in the operator's tasks only.
"""

from __future__ import annotations

import copy
import functools
from collections import deque
from typing import Any, Callable

from heron_spark.api.bolt import Bolt
from heron_spark.api.spout import Spout
from heron_spark.api.stream import Stream
from heron_spark.api.topology_config import TopologyConfig
from heron_spark.errors import TopologyTypeError
from heron_spark.streamlet.context import TaskContext
from heron_spark.streamlet.generator import Timestamped

OUTPUT = "output"
OUTPUT_FIELD = "_output_"
OUTPUTS = [Stream(fields=[OUTPUT_FIELD], name=OUTPUT)]

FUNCTION = "streamlet.function"
GENERATOR = "streamlet.generator"
OPERATOR = "streamlet.operator"
READS = "streamlet.reads"  # the name of the streamlet(s) an operator reads (Context)
TIMESTAMPS = "streamlet.timestamps"  # a source's timestamp function, or FROM_GENERATOR
FROM_GENERATOR = "generator"  # the source's generator returns Timestamped elements


class SourceSpout(Spout):
    """A streamlet source: emits what ``_produce`` returns.

    ``_produce`` returns None for nothing now and raises ``StopIteration`` when the source
    ended. At-least-once: keeps each element until acked and emits failed ones again before
    anything new. With timestamps (``assign_timestamps``), each element is emitted with its
    event time, and the end of a bounded source moves the task's watermark to the end of
    event time (an element replayed after that is late).
    """

    outputs = OUTPUTS

    def initialize(self, config: dict, context) -> None:
        self._reliable = TopologyConfig.from_config(config).at_least_once
        self._component = context.get_component_id()
        stamps = config.get(TIMESTAMPS)
        self._timestamped = stamps is not None
        self._stamp: Callable[[Any], tuple[Any, int | None]] = (
            _unstamped if stamps is None else
            self._from_generator if stamps == FROM_GENERATOR else
            functools.partial(self._from_function, stamps))
        self._pending: dict[int, tuple[Any, int | None]] = {}
        self._replay: deque = deque()
        self._next_id = 0
        self._ended = False
        self._produce = self._source(config, context)

    def _source(self, config: dict, context) -> Callable[[], Any]:
        """Return the function producing the next element (subclasses)."""
        raise NotImplementedError

    def next_tuple(self) -> None:
        if self._replay:
            tup_id = self._replay.popleft()
            element, timestamp = self._pending[tup_id]
            self.emit([element], tup_id=tup_id, stream=OUTPUT, timestamp=timestamp)
            return
        if self._ended:
            self.declare_exhausted()
            return
        try:
            element = self._produce()
        except StopIteration:
            self._ended = True
            self.declare_exhausted()  # its watermark goes to WATERMARK_MAX at once
            return
        if element is None:
            return
        element, timestamp = self._stamp(element)
        if self._reliable:
            tup_id = self._next_id
            self._next_id += 1
            self._pending[tup_id] = (element, timestamp)
            self.emit([element], tup_id=tup_id, stream=OUTPUT, timestamp=timestamp)
        else:
            self.emit([element], stream=OUTPUT, timestamp=timestamp)

    def _from_function(self, function: Callable[[Any], Any], element: Any) -> tuple[Any, int]:
        """Return ``element`` and its event time ``function(element)``."""
        if isinstance(element, Timestamped):
            element = element.element
        return element, _event_time(function(element), element, self._component)

    def _from_generator(self, element: Any) -> tuple[Any, int]:
        """Return a ``Timestamped`` element's element and event time."""
        if not isinstance(element, Timestamped):
            msg = ("assign_timestamps() without a function takes the event times from the "
                   "generator, which returned an element without one")
            raise TopologyTypeError(msg, component=self._component, value=element,
                                    fix="return Timestamped(element, timestamp_ms) from the "
                                        "generator's get(), or pass assign_timestamps a "
                                        "function of the element")
        return element.element, _event_time(element.timestamp_ms, element.element,
                                            self._component)

    def ack(self, tup_id) -> None:
        self._pending.pop(tup_id, None)

    def fail(self, tup_id) -> None:
        if tup_id in self._pending:
            self._replay.append(tup_id)


def _unstamped(element: Any) -> tuple[Any, None]:
    """Return ``element`` without an event time (a source without timestamps)."""
    if isinstance(element, Timestamped):
        return element.element, None
    return element, None


def _event_time(timestamp: Any, element: Any, component: str) -> int:
    """Return ``timestamp`` when it is int milliseconds; raise ``TopologyTypeError`` if not."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        msg = f"an element's event time must be int milliseconds since the epoch; {element!r} has"
        raise TopologyTypeError(msg, component=component, value=timestamp,
                                fix="return int(seconds * 1000) from the timestamp function "
                                    "(or as Timestamped's timestamp_ms)")
    return timestamp


class GeneratorSpout(SourceSpout):
    """``Builder.new_source(generator)``: this task's copy of the ``Generator``."""

    def _source(self, config: dict, context) -> Callable[[], Any]:
        generator = copy.deepcopy(config[GENERATOR])
        generator.setup(TaskContext(context, self, context.get_component_id()))
        return generator.get


class SupplierSpout(SourceSpout):
    """``Builder.new_source(function)``: emits what the function returns, call after call."""

    def _source(self, config: dict, context) -> Callable[[], Any]:
        return config[FUNCTION]


class _ElementBolt(Bolt):
    """A per-element operator: ``_on(element)``; auto-acked and anchored (at-least-once)."""

    outputs = OUTPUTS
    auto_ack = True
    _function: Callable[[Any], Any]  # map's, flat_map's, filter's and consume's function

    def initialize(self, config: dict, context) -> None:
        if FUNCTION in config:
            self._function = config[FUNCTION]

    def process(self, tup) -> None:
        self._on(tup.values[0])

    def _on(self, element: Any) -> None:
        raise NotImplementedError


class MapBolt(_ElementBolt):
    """``map``: emits ``function(element)``."""

    def _on(self, element: Any) -> None:
        self.emit([self._function(element)], stream=OUTPUT)


class FlatMapBolt(_ElementBolt):
    """``flat_map``: emits every item of ``function(element)``."""

    def _on(self, element: Any) -> None:
        for item in self._function(element):
            self.emit([item], stream=OUTPUT)


class FilterBolt(_ElementBolt):
    """``filter``: emits the elements for which ``function`` is true."""

    def _on(self, element: Any) -> None:
        if self._function(element):
            self.emit([element], stream=OUTPUT)


class PassBolt(_ElementBolt):
    """``union``, ``repartition`` and ``clone``: emits every element (the grouping into it does the work)."""

    def _on(self, element: Any) -> None:
        self.emit([element], stream=OUTPUT)


class LogBolt(_ElementBolt):
    """``log``: writes every element to the task's log at info level."""

    outputs: list = []

    def _on(self, element: Any) -> None:
        self.logger.info(str(element))


class ConsumeBolt(_ElementBolt):
    """``consume``: calls ``function(element)``; emits nothing."""

    outputs: list = []

    def _on(self, element: Any) -> None:
        self._function(element)


class TransformBolt(Bolt):
    """``transform``: runs a ``TransformOperator`` on each input tuple.

    This task's copy of the ``TransformOperator``; ``transform(tup)`` per input tuple, emitting
    through its context (anchored to that input).
    """

    outputs = OUTPUTS
    auto_ack = True

    def initialize(self, config: dict, context) -> None:
        self._operator = copy.deepcopy(config[OPERATOR])
        self._operator.setup(TaskContext(context, self, str(config.get(READS, ""))))

    def process(self, tup) -> None:
        self._operator.transform(tup)
