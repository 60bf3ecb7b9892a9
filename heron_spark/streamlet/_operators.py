"""One ``Streamlet`` subclass per operation.

Its parents, checks, default partitions (as in heronpy) and the spout or bolt, inputs and
config it compiles to.
"""

from __future__ import annotations

from typing import Any

from heron_spark.api import api_constants as keys
from heron_spark.api.bolt import Bolt
from heron_spark.api.component import GlobalStreamId
from heron_spark.api.stream import Grouping
from heron_spark.api.window import SessionWindowBolt, SlidingWindowBolt, TumblingWindowBolt
from heron_spark.errors import TopologyTypeError, TopologyValueError
from heron_spark.streamlet import _components as parts
from heron_spark.streamlet import _event_windowed as event_windowed
from heron_spark.streamlet import _windowed as windowed
from heron_spark.streamlet.generator import Generator
from heron_spark.streamlet.streamlet import Streamlet
from heron_spark.streamlet.transformoperator import TransformOperator
from heron_spark.streamlet.windowconfig import (SESSION, SLIDING, EventTimeWindowConfig,
                                                WindowConfig)


def _callable(function: Any, operation: str) -> None:
    if not callable(function):
        msg = f"{operation}() takes a function"
        raise TopologyTypeError(msg, value=function, fix=f"pass a function or lambda to {operation}()")


def _streamlet(parent: Any, operation: str) -> None:
    if not isinstance(parent, Streamlet):
        msg = f"{operation}() takes a Streamlet"
        raise TopologyTypeError(msg, value=parent, fix="pass a streamlet built from the same Builder")


class Source(Streamlet):
    """``Builder.new_source``: a spout (one partition unless set)."""

    def __init__(self, source: Any) -> None:
        super().__init__()
        self._spout: type[parts.SourceSpout]
        if isinstance(source, Generator):
            self._prefix, self._spout, self._config = "generator", parts.GeneratorSpout, \
                {parts.GENERATOR: source}
        elif callable(source):
            self._prefix, self._spout, self._config = "supplier", parts.SupplierSpout, \
                {parts.FUNCTION: source}
        else:
            msg = "a source must be a Generator or a function"
            raise TopologyTypeError(msg, value=source,
                                    fix="pass a Generator, a function returning elements, or "
                                        "(heron_spark) a list")

        self._timestamps: tuple[Any, int] | None = None  # (function or None, max lag ms)

    def assign_timestamps(self, timestamp_function=None, max_lag_ms: int = 0) -> "Source":
        """Give each element the event time ``timestamp_function(element)`` (see Streamlet)."""
        if timestamp_function is not None:
            _callable(timestamp_function, "assign_timestamps")
        if isinstance(max_lag_ms, bool) or not isinstance(max_lag_ms, int):
            msg = "assign_timestamps(): max_lag_ms must be whole milliseconds (int)"
            raise TopologyTypeError(msg, component=self.get_name(), value=max_lag_ms,
                                    fix="pass max_lag_ms=0 or more, e.g. 2000")
        if max_lag_ms < 0:
            msg = "assign_timestamps(): max_lag_ms is negative"
            raise TopologyValueError(msg, component=self.get_name(), value=max_lag_ms,
                                     kind="config",
                                     fix="pass max_lag_ms=0 (in-order input) or the most "
                                         "milliseconds an element may arrive out of order")
        self._timestamps = (timestamp_function, max_lag_ms)
        return self

    def _has_timestamps(self) -> bool:
        return self._timestamps is not None

    def _add_to(self, builder) -> None:
        config: dict[str, Any] = dict(self._config)
        if self._timestamps is not None:
            function, lag = self._timestamps
            config[parts.TIMESTAMPS] = function if function is not None else parts.FROM_GENERATOR
            config[keys.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS] = lag
        builder.add_spout(self.get_name(), self._spout, par=self.get_num_partitions(),
                          config=config)


class _Bolt(Streamlet):
    """An operation run by a bolt reading its parents' elements."""

    _bolt: type = Bolt
    _sink = False

    def __init__(self, *parents: Streamlet, partitions: int | None = None) -> None:
        super().__init__()
        self._parents = list(parents)
        self.set_num_partitions(partitions or parents[0].get_num_partitions())

    def _grouping(self):
        return Grouping.SHUFFLE

    def _config(self) -> dict:
        return {}

    def _bolt_class(self) -> type:
        return self._bolt

    def _add_to(self, builder) -> None:
        inputs = {GlobalStreamId(parent.get_name(), parent._output): self._grouping()
                  for parent in self._parents}
        config = {parts.READS: ",".join(p._built_name() for p in self._parents),
                  **self._config()}
        builder.add_bolt(self.get_name(), self._bolt_class(), par=self.get_num_partitions(),
                         inputs=inputs, config=config)


class _FunctionBolt(_Bolt):
    def __init__(self, parent: Streamlet, function: Any) -> None:
        _streamlet(parent, self._prefix)
        _callable(function, self._prefix)
        super().__init__(parent)
        self._function = function

    def _config(self) -> dict:
        return {parts.FUNCTION: self._function}


class Map(_FunctionBolt):
    _prefix, _bolt = "map", parts.MapBolt


class FlatMap(_FunctionBolt):
    _prefix, _bolt = "flatmap", parts.FlatMapBolt


class Filter(_FunctionBolt):
    _prefix, _bolt = "filter", parts.FilterBolt


class Consume(_FunctionBolt):
    _prefix, _bolt, _sink = "consume", parts.ConsumeBolt, True


class Log(_Bolt):
    _prefix, _bolt, _sink = "log", parts.LogBolt, True


class Transform(_Bolt):
    _prefix, _bolt = "transform", parts.TransformBolt

    def __init__(self, parent: Streamlet, operator: Any) -> None:
        if not isinstance(operator, TransformOperator):
            msg = "transform() takes a TransformOperator"
            raise TopologyTypeError(msg, value=operator, fix="subclass TransformOperator (setup, transform)")
        super().__init__(parent)
        self._operator = operator

    def _config(self) -> dict:
        return {parts.OPERATOR: self._operator}


class Repartition(_Bolt):
    _prefix, _bolt = "repartition", parts.PassBolt

    def __init__(self, parent: Streamlet, partitions: int, function: Any) -> None:
        if function is not None:
            _callable(function, "repartition")
        super().__init__(parent, partitions=partitions)
        self.set_num_partitions(partitions)
        self._function = function

    def _grouping(self):
        if self._function is None:
            return Grouping.SHUFFLE
        return Grouping.custom(windowed.RepartitionGrouping(self._function))


class Union(_Bolt):
    _prefix, _bolt = "union", parts.PassBolt

    def __init__(self, left: Streamlet, right: Streamlet) -> None:
        _streamlet(right, "union")
        if left is right:
            msg = "a streamlet cannot be unioned with itself"
            raise TopologyValueError(msg, component=left.get_name(), fix="union it with a clone()")
        super().__init__(left, right)


class ToBolt(_Bolt):
    _prefix, _sink = "bolt", True

    def __init__(self, parent: Streamlet, bolt_class: type, par: int | None,
                 config: dict | None) -> None:
        if not (isinstance(bolt_class, type) and issubclass(bolt_class, Bolt)):
            msg = "to_bolt() takes a Bolt subclass"
            raise TopologyTypeError(msg, value=bolt_class, fix="pass a class deriving from heron_spark.Bolt")
        super().__init__(parent, partitions=par)
        self._bolt = bolt_class
        # a window bolt acks as tuples leave its windows: acking on receipt too would ack twice
        acks_later = issubclass(bolt_class,
                                (SlidingWindowBolt, TumblingWindowBolt, SessionWindowBolt))
        self._user_config = {**({} if acks_later else {keys.TOPOLOGY_BOLT_AUTO_ACK: True}),
                             **(config or {})}

    def _config(self) -> dict:
        return self._user_config


class _Windowed(_Bolt):
    """A windowed operation: a window bolt per its ``WindowConfig``.

    A sliding or tumbling processing-time window bolt, or (event-time configs) the event-time
    window bolt ``_event_time``.
    """

    _sliding: type = Bolt
    _tumbling: type = Bolt
    _event_time: type = Bolt

    def __init__(self, parents: list[Streamlet], window_config: Any, function: Any,
                 partitions: int | None = None) -> None:
        if not isinstance(window_config, WindowConfig):
            msg = f"{self._prefix}() takes a WindowConfig"
            raise TopologyTypeError(msg,
                                    value=window_config,
                                    fix="pass WindowConfig.create_sliding_window(...), "
                                        "create_tumbling_window(...) or an event-time one "
                                        "(WindowConfig.event_time_tumbling(size_ms), ...)")
        _callable(function, self._prefix)
        super().__init__(*parents, partitions=partitions)
        self._window = window_config
        self._function = function

    def _bolt_class(self) -> type:
        if self._window.is_event_time:
            return self._event_time
        return self._tumbling if self._window.is_tumbling else self._sliding

    def _config(self) -> dict:
        window = self._window
        if isinstance(window, EventTimeWindowConfig):
            settings: dict = {event_windowed.EVENT_WINDOW: (
                window.kind, window.gap_ms if window.kind == SESSION else window.size_ms,
                window.slide_ms if window.kind == SLIDING else None,
                window.allowed_lateness_ms)}
        elif window.is_tumbling:
            settings = {TumblingWindowBolt.WINDOW_DURATION_SECS: window.duration_secs}
        else:
            settings = {SlidingWindowBolt.WINDOW_DURATION_SECS: window.duration_secs,
                        SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS: window.slide_secs}
        return {**settings, parts.FUNCTION: self._function}

    def _add_to(self, builder) -> None:
        if self._window.is_event_time:
            self._check_timestamps()
        super()._add_to(builder)

    def _check_timestamps(self) -> None:
        """Refuse an event-time window over a source whose elements have no event time."""
        _, plain = self._event_time_sources()
        if plain:
            names = ", ".join(repr(source.get_name()) for source in plain)
            msg = (f"{self._prefix} windows by event time ({self._window!r}), but it reads "
                   f"source {names}, whose elements have no event time")
            raise TopologyValueError(msg, component=self.get_name(), value=names,
                                     kind="inputs",
                                     fix="call .assign_timestamps(function, max_lag_ms=...) on "
                                         "that source, or use a processing-time WindowConfig")


class ReduceByWindow(_Windowed):
    _prefix = "reducebywindow"
    _sliding, _tumbling = windowed.ReduceByWindowBolt, windowed.TumblingReduceByWindowBolt
    _event_time = event_windowed.EventTimeReduceByWindowBolt

    def __init__(self, parent: Streamlet, window_config: Any, function: Any) -> None:
        super().__init__([parent], window_config, function, partitions=1)

    def _grouping(self):
        return Grouping.GLOBAL

    def _add_to(self, builder) -> None:
        if self.get_num_partitions() != 1:
            msg = "reduce_by_window reduces the whole stream in one task"
            raise TopologyValueError(msg,
                                     component=self.get_name(), value=self.get_num_partitions(),
                                     fix="leave its partitions at 1, or key the elements and "
                                         "use reduce_by_key_and_window")
        super()._add_to(builder)


class ReduceByKeyAndWindow(_Windowed):
    _prefix = "reducebykeyandwindow"
    _sliding = windowed.ReduceByKeyAndWindowBolt
    _tumbling = windowed.TumblingReduceByKeyAndWindowBolt
    _event_time = event_windowed.EventTimeReduceByKeyAndWindowBolt

    def __init__(self, parent: Streamlet, window_config: Any, function: Any) -> None:
        super().__init__([parent], window_config, function, partitions=1)  # as heronpy

    def _grouping(self):
        return Grouping.custom(windowed.KeyGrouping("reduce_by_key_and_window"))


_JOIN_TYPES = {"inner": windowed.INNER, "left": windowed.OUTER_LEFT,
               "right": windowed.OUTER_RIGHT, "outer": windowed.OUTER}


class Join(_Windowed):
    _prefix = "join"
    _sliding, _tumbling = windowed.JoinBolt, windowed.TumblingJoinBolt
    _event_time = event_windowed.EventTimeJoinBolt

    def __init__(self, left: Streamlet, right: Streamlet, window_config: Any, function: Any,
                 kind: str) -> None:
        _streamlet(right, "join")
        if left is right:
            msg = "a streamlet cannot be joined with itself"
            raise TopologyValueError(msg, component=left.get_name(), fix="join it with a clone()")
        super().__init__([left, right], window_config, function)
        self._kind = _JOIN_TYPES[kind]

    def _grouping(self):
        return Grouping.custom(windowed.KeyGrouping("join"))

    def _config(self) -> dict:
        return {**super()._config(), windowed.JOIN_TYPE: self._kind,
                windowed.JOIN_RIGHT: self._parents[1].get_name()}
