"""The tuple delivered to ``Bolt.process``: heronpy's ``Tuple`` namedtuple, field for field."""

from collections import namedtuple

Tuple = namedtuple("Tuple", "id component stream task values")
"""One tuple: ``id`` (None unless acking), source ``component``, ``stream``, source ``task``
and ``values`` (a tuple in declared field order)."""

HeronTuple = Tuple


class TupleHelper:
    """Names of the system stream and component that carry tick tuples."""

    TICK_TUPLE_ID = "__tick"
    TICK_SOURCE_COMPONENT = "__system"
