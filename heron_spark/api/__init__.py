"""The user API, heronpy-compatible. Importing it starts nothing (no Spark, no processes)."""

from heron_spark.api import api_constants
from heron_spark.api.api_constants import TopologyReliabilityMode
from heron_spark.api.batch import BatchBolt, BatchSpout, batch_source
from heron_spark.api.bolt import BaseBolt, Bolt
from heron_spark.api.component import GlobalStreamId, HeronComponentSpec
from heron_spark.api.context import TopologyContext
from heron_spark.api.custom_grouping import ICustomGrouping
from heron_spark.api.metrics import (AssignableMetric, CountMetric, IMetric, MeanReducedMetric,
                                     MultiCountMetric)
from heron_spark.api.spout import BaseSpout, Spout
from heron_spark.api.stream import Grouping, Stream
from heron_spark.api.topology import Topology, TopologyBuilder, TopologyType
from heron_spark.api.tuple import HeronTuple, Tuple, TupleHelper
from heron_spark.api.window import SlidingWindowBolt, TumblingWindowBolt, WindowContext

__all__ = [
    "AssignableMetric", "BaseBolt", "BaseSpout", "BatchBolt", "BatchSpout", "Bolt", "CountMetric",
    "GlobalStreamId",
    "Grouping", "HeronComponentSpec",
    "HeronTuple", "ICustomGrouping", "IMetric", "MeanReducedMetric", "MultiCountMetric",
    "SlidingWindowBolt", "Spout", "Stream", "Topology", "TopologyBuilder", "TopologyContext",
    "TopologyReliabilityMode", "TopologyType", "TumblingWindowBolt", "Tuple", "TupleHelper",
    "WindowContext", "api_constants", "batch_source",
]
