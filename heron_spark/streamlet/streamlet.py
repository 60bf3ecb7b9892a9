"""``Streamlet``: a stream of elements and the operations on it.

A streamlet is possibly unbounded; this is heronpy's streamlet API.

Operations only describe the computation; ``Builder.build`` / ``Runner.run`` compile it to
ordinary spouts and bolts (one component per streamlet, named ``<operation>-<n>`` unless
``set_name`` was called, e.g. ``map-1``, ``reducebykeyandwindow-1``), so a streamlet runs on
the same runtime, groupings, acking and metrics as any topology.
"""

from __future__ import annotations

from typing import Any, Callable

from heron_spark.errors import HeronSparkError, TopologyTypeError, TopologyValueError


class Streamlet:
    """A stream of elements; every operation returns a new streamlet (sinks return None)."""

    _prefix = "streamlet"

    def __init__(self) -> None:
        self._name: str | None = None
        self._num_partitions = 1
        self._children: list[Streamlet] = []
        self._parents: list[Streamlet] = []
        self._output = "output"

    # ---- naming and partitions -------------------------------------------------------------
    def set_name(self, name: str) -> "Streamlet":
        """Name this streamlet's component (default ``<operation>-<n>``)."""
        if not isinstance(name, str) or not name:
            msg = "a streamlet name must be a non-empty str"
            raise TopologyTypeError(msg, value=name, fix="pass a name such as 'split-words'")
        self._name = name
        return self

    def get_name(self) -> str | None:
        """Return the name (None until set or built)."""
        return self._name

    def _built_name(self) -> str:
        """Return the name ``Builder.build`` gave every streamlet before adding any to a topology."""
        if self._name is None:
            msg = (f"a {self._prefix} streamlet has no name while its topology is built: "
                   f"Builder.build names every streamlet first")
            raise HeronSparkError(msg)
        return self._name

    def set_num_partitions(self, num_partitions: int) -> "Streamlet":
        """Run this streamlet's operation on ``num_partitions`` tasks."""
        if not isinstance(num_partitions, int) or isinstance(num_partitions, bool) or \
                num_partitions < 1:
            msg = "the number of partitions must be an integer >= 1"
            raise TopologyValueError(msg, component=self._name, value=num_partitions, fix="pass 1 or more")
        self._num_partitions = num_partitions
        return self

    def get_num_partitions(self) -> int:
        """Return the number of partitions (tasks)."""
        return self._num_partitions

    # ---- event time (heron_spark) ---------------------------------------------------------------
    def assign_timestamps(self, timestamp_function: Callable[[Any], int] | None = None,
                          max_lag_ms: int = 0) -> "Streamlet":
        """Give each element of this source the event time ``timestamp_function(element)``.

        Event times are int milliseconds since the epoch. Only a source streamlet (from
        ``Builder.new_source``) takes timestamps: its spout emits each element with its event
        time and sends watermarks ``max_lag_ms`` behind the largest event time it emitted
        (elements may arrive up to ``max_lag_ms`` out of order without being late).
        Without ``timestamp_function`` the source's ``Generator`` gives them: its ``get``
        returns ``Timestamped(element, timestamp_ms)``. Every operation downstream (``map``,
        ``filter``, ``flat_map``, ``union``, ...) keeps its input's event time, so any
        streamlet read from timestamped sources can be windowed by event time
        (``WindowConfig.event_time_tumbling`` / ``_sliding`` / ``_session``). When a bounded
        source runs out, its tasks' watermark moves to the end of event time (the last windows
        fire). Returns this streamlet.
        """
        msg = "assign_timestamps() applies to a source streamlet only"
        raise TopologyValueError(msg, component=self._name, value=self,
                                 fix="call it on the source: builder.new_source(...)"
                                     ".assign_timestamps(function, max_lag_ms=...)")

    def _event_time_sources(self) -> tuple[list["Streamlet"], list["Streamlet"]]:
        """Return (sources with timestamps, sources without) this streamlet reads from."""
        stamped: list[Streamlet] = []
        plain: list[Streamlet] = []
        seen: set[int] = set()
        todo: list[Streamlet] = [self]
        while todo:
            streamlet = todo.pop()
            if id(streamlet) in seen:
                continue
            seen.add(id(streamlet))
            if not streamlet._parents:
                (stamped if streamlet._has_timestamps() else plain).append(streamlet)
            todo.extend(streamlet._parents)
        return stamped, plain

    def _has_timestamps(self) -> bool:
        """Return whether this source's elements carry event times (sources override)."""
        return False

    # ---- per-element operations ------------------------------------------------------------
    def map(self, map_function: Callable[[Any], Any]) -> "Streamlet":
        """Return the streamlet of ``map_function(element)`` for every element."""
        from heron_spark.streamlet._operators import Map

        return self._adopt(Map(self, map_function))

    def flat_map(self, flatmap_function: Callable[[Any], Any]) -> "Streamlet":
        """Return the streamlet of every item of ``flatmap_function(element)``."""
        from heron_spark.streamlet._operators import FlatMap

        return self._adopt(FlatMap(self, flatmap_function))

    def filter(self, filter_function: Callable[[Any], bool]) -> "Streamlet":
        """Return the streamlet of the elements for which ``filter_function`` is true."""
        from heron_spark.streamlet._operators import Filter

        return self._adopt(Filter(self, filter_function))

    def repartition(self, num_partitions: int, repartition_function=None) -> "Streamlet":
        """Return this streamlet on ``num_partitions`` tasks.

        ``repartition_function(element, num_partitions)`` picks each element's partition (or a
        list of them); without it elements are shuffled.
        """
        from heron_spark.streamlet._operators import Repartition

        return self._adopt(Repartition(self, num_partitions, repartition_function))

    def clone(self, num_clones: int) -> list["Streamlet"]:
        """Return ``num_clones`` streamlets, each with every element of this one."""
        if not isinstance(num_clones, int) or num_clones < 1:
            msg = "clone() needs a number of clones >= 1"
            raise TopologyValueError(msg, value=num_clones, component=self._name, fix="pass 1 or more")
        return [self.repartition(self.get_num_partitions()) for _ in range(num_clones)]

    def union(self, other_streamlet: "Streamlet") -> "Streamlet":
        """Return the streamlet of the elements of this one and of ``other_streamlet``."""
        from heron_spark.streamlet._operators import Union

        union = Union(self, other_streamlet)
        other_streamlet._children.append(union)
        return self._adopt(union)

    def transform(self, transform_operator) -> "Streamlet":
        """Return the streamlet a ``TransformOperator`` emits.

        ``setup`` runs once per task, then ``transform(tup)`` per input tuple.
        """
        from heron_spark.streamlet._operators import Transform

        return self._adopt(Transform(self, transform_operator))

    def log(self) -> None:
        """Write every element to the log of the task that receives it."""
        from heron_spark.streamlet._operators import Log

        self._adopt(Log(self))

    def consume(self, consume_function: Callable[[Any], Any]) -> None:
        """Call ``consume_function(element)`` for every element."""
        from heron_spark.streamlet._operators import Consume

        self._adopt(Consume(self, consume_function))

    # ---- windowed operations ---------------------------------------------------------------
    def reduce_by_window(self, window_config, reduce_function) -> "Streamlet":
        """Return one ``(Window, reduction)`` per window.

        The window's elements folded with ``reduce_function(a, b)``. Runs on one task (the
        whole stream's windows).
        """
        from heron_spark.streamlet._operators import ReduceByWindow

        return self._adopt(ReduceByWindow(self, window_config, reduce_function))

    def reduce_by_key_and_window(self, window_config, reduce_function) -> "Streamlet":
        """Return one ``(KeyedWindow(key, Window), reduction)`` per key and window.

        From ``(key, value)`` elements whose values are folded with ``reduce_function(a, b)``.
        """
        from heron_spark.streamlet._operators import ReduceByKeyAndWindow

        return self._adopt(ReduceByKeyAndWindow(self, window_config, reduce_function))

    def join(self, join_streamlet: "Streamlet", window_config, join_function) -> "Streamlet":
        """Return the inner join with ``join_streamlet``, per key and window.

        Inner join of ``(key, value)`` elements with ``join_streamlet``'s, per window:
        ``(KeyedWindow, join_function(left, right))`` for every pair with equal keys.
        """
        return self._join(join_streamlet, window_config, join_function, "inner")

    def outer_left_join(self, join_streamlet: "Streamlet", window_config,
                        join_function) -> "Streamlet":
        """``join``, plus ``join_function(left, None)`` for keys only this side has."""
        return self._join(join_streamlet, window_config, join_function, "left")

    def outer_right_join(self, join_streamlet: "Streamlet", window_config,
                         join_function) -> "Streamlet":
        """``join``, plus ``join_function(None, right)`` for keys only the other side has."""
        return self._join(join_streamlet, window_config, join_function, "right")

    def outer_join(self, join_streamlet: "Streamlet", window_config,
                   join_function) -> "Streamlet":
        """``join``, plus both outer joins' unmatched values."""
        return self._join(join_streamlet, window_config, join_function, "outer")

    def _join(self, other: "Streamlet", window_config, function, kind: str) -> "Streamlet":
        from heron_spark.streamlet._operators import Join

        join = Join(self, other, window_config, function, kind)
        other._children.append(join)
        return self._adopt(join)

    # ---- heron_spark -------------------------------------------------------------------------
    def to_bolt(self, bolt_class: type, name: str | None = None, par: int | None = None,
                config: dict | None = None) -> None:
        """Feed every element to an ordinary ``Bolt``.

        The bolt's input field is ``_output_`` on stream ``output``, shuffled over ``par``
        tasks (default this streamlet's partitions). Under at-least-once the bolt auto-acks
        (``topology.bolt.auto.ack``), except window bolts (they ack as tuples leave their
        windows); pass ``config={"topology.bolt.auto.ack": False}`` for a bolt that acks its
        inputs later itself.
        """
        from heron_spark.streamlet._operators import ToBolt

        sink = ToBolt(self, bolt_class, par, config)
        if name is not None:
            sink.set_name(name)
        self._adopt(sink)

    # ---- building ----------------------------------------------------------------------------
    def _adopt(self, child: "Streamlet") -> "Streamlet":
        self._children.append(child)
        return child

    def _add_to(self, builder) -> None:
        """Add this streamlet's component to ``builder`` (a ``TopologyBuilder``)."""
        msg = f"{type(self).__name__} cannot be built"
        raise NotImplementedError(msg)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r}, partitions={self._num_partitions})"
