"""``Builder``: where a streamlet computation starts, and how it becomes a topology."""

from __future__ import annotations

from collections import deque
from typing import Any

from heron_spark.api.topology import TopologyBuilder
from heron_spark.errors import TopologyTypeError, TopologyValueError
from heron_spark.streamlet._operators import Source
from heron_spark.streamlet.config import Config
from heron_spark.streamlet.generator import Generator, IterableGenerator
from heron_spark.streamlet.streamlet import Streamlet


class Builder:
    """Collects the sources of a streamlet computation (heronpy's ``Builder``)."""

    def __init__(self) -> None:
        self._sources: list[Streamlet] = []

    def new_source(self, source: Any) -> Streamlet:
        """Return a streamlet of ``source``'s elements.

        A ``Generator``, or a function called repeatedly (None results are skipped).
        heron_spark: a list (or any iterable that is neither) is a bounded source of its
        elements.
        """
        if not isinstance(source, Generator) and not callable(source):
            if isinstance(source, (str, bytes)) or not hasattr(source, "__iter__"):
                msg = "a source must be a Generator or a function"
                raise TopologyTypeError(msg, value=source, fix="pass a Generator, a function or a list")
            source = IterableGenerator(source)
        streamlet = Source(source)
        self._sources.append(streamlet)
        return streamlet

    def build(self, bldr: TopologyBuilder) -> TopologyBuilder:
        """Add every streamlet's component to ``bldr`` (heronpy's signature); return it."""
        if not isinstance(bldr, TopologyBuilder):
            msg = "Builder.build takes a TopologyBuilder"
            raise TopologyTypeError(msg, value=bldr,
                                    fix="pass TopologyBuilder(name), or use Builder.topology")
        order = self._ordered()
        taken = set(bldr._specs)
        for streamlet in order:
            name = streamlet.get_name()
            if name is None:
                index = 1
                while f"{streamlet._prefix}-{index}" in taken:
                    index += 1
                name = f"{streamlet._prefix}-{index}"
                streamlet.set_name(name)
            elif name in taken:
                msg = "two streamlets share this name"
                raise TopologyValueError(msg, component=name,
                                         kind="duplicate_name",
                                         fix="give each streamlet a unique set_name()")
            taken.add(name)
        for streamlet in order:
            streamlet._add_to(bldr)
        return bldr

    def topology(self, name: str, config: Config | dict | None = None) -> type:
        """Return the computation as a ``Topology`` class named ``name`` (heron_spark).

        For ``heron_spark.submit`` or ``heron_spark.testing.run_local``.
        """
        bldr = self.build(TopologyBuilder(name))
        if isinstance(config, Config):
            config = config.as_dict()
        elif config is not None and not isinstance(config, dict):
            msg = "topology() takes a Config or a dict"
            raise TopologyTypeError(msg, value=config, fix="pass Config() or a dict of topology config keys")
        bldr.set_config(dict(config or {}))
        return bldr.build()

    def _ordered(self) -> list[Streamlet]:
        """Return every streamlet reachable from the sources, parents before children."""
        if not self._sources:
            msg = "the builder has no source"
            raise TopologyValueError(msg, kind="inputs", fix="add one with builder.new_source(...)")
        waiting: dict[int, int] = {}
        ready = deque(self._sources)
        order: list[Streamlet] = []
        seen: dict[int, Streamlet] = {}
        while ready:
            streamlet = ready.popleft()
            order.append(streamlet)
            for child in streamlet._children:
                seen[id(child)] = child
                left = waiting.get(id(child), len(child._parents)) - 1
                waiting[id(child)] = left
                if left == 0:
                    ready.append(child)
        stuck = [s for key, s in seen.items() if waiting[key] > 0]
        if stuck:
            msg = "a streamlet reads a streamlet of another Builder"
            raise TopologyValueError(msg,
                                     component=stuck[0].get_name(), value=stuck[0],
                                     kind="inputs",
                                     fix="create every source with the same Builder")
        return order
