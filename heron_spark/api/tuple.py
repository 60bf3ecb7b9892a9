"""The tuples delivered to ``Bolt.process``: heronpy's ``Tuple`` and ``HeronTuple`` namedtuples."""

from collections import namedtuple

Tuple = namedtuple("Tuple", "id component stream task values")
"""One tuple: ``id``, source ``component``, ``stream``, source ``task`` and ``values`` (a tuple
in declared field order)."""

# Tuple's fields, then two more (spelled out: type checkers need the literal list).
HeronTuple = namedtuple("HeronTuple", ("id", "component", "stream", "task", "values",
                                       "creation_time", "roots", "timestamp"),
                        defaults=(None,))
"""What bolts receive: a ``Tuple`` plus ``creation_time`` (seconds since the epoch, when the
instance received its batch), ``roots`` (the ids of the tuple trees it belongs to; empty
unless at-least-once) and ``timestamp`` (heron_spark: the tuple's event time in milliseconds
since the epoch, None when it has none; see ``heron_spark.api.event_time``). Under
at-least-once ``id`` is the tuple's 64-bit edge id."""


class TupleHelper:
    """Names of the system stream and component that carry tick tuples."""

    TICK_TUPLE_ID = "__tick"
    TICK_SOURCE_COMPONENT = "__system"
