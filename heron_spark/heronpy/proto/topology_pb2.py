"""heronpy.proto.topology_pb2: the names of Heron's topology protobuf that user code reads.

- ``Grouping``: the grouping enum (``Grouping.Value("FIELDS")``, ``Grouping.Name(2)``), with
  Heron's numbers; ``context.get_sources()`` values are these numbers.
- ``StreamId``: what ``context.get_sources()`` is keyed by. In Heron that key is a namedtuple
  copied from this protobuf message; here it is that namedtuple, with the same fields
  (``id``, ``component_name``) and keyword construction.
"""

from heron_spark.api.context import StreamId
from heron_spark.proto.topology_pb2 import GroupingType as Grouping

__all__ = ["Grouping", "StreamId"]
