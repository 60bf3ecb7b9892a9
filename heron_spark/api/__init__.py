"""The user API, heronpy-compatible. Importing it starts nothing (no Spark, no processes)."""

from heron_spark.api import api_constants, global_metrics
from heron_spark.api.api_constants import TopologyReliabilityMode
from heron_spark.api.batch import BatchBolt, BatchSpout, batch_source
from heron_spark.api.bolt import BaseBolt, Bolt
from heron_spark.api.component import GlobalStreamId, HeronComponentSpec
from heron_spark.api.context import TopologyContext
from heron_spark.api.custom_grouping import ICustomGrouping
from heron_spark.api.metrics import (AssignableMetric, AssignableMetrics, CountMetric, IMetric,
                                     IReducer, MeanReducedMetric, MeanReducer,
                                     MultiAssignableMetrics, MultiCountMetric,
                                     MultiMeanReducedMetric, MultiReducedMetric, ReducedMetric)
from heron_spark.api.serializer import IHeronSerializer, PythonSerializer, default_serializer
from heron_spark.api.spout import BaseSpout, Spout
from heron_spark.api.state import (HashMapState, State, StatefulComponent,
                                   TwoPhaseStatefulComponent)
from heron_spark.api.stream import Grouping, Stream
from heron_spark.api.task_hook import (BoltAckInfo, BoltExecuteInfo, BoltFailInfo, EmitInfo,
                                       ITaskHook, SpoutAckInfo, SpoutFailInfo)
from heron_spark.api.topology import Topology, TopologyBuilder, TopologyType
from heron_spark.api.tuple import HeronTuple, Tuple, TupleHelper
from heron_spark.api.window import (SessionWindowBolt, SlidingWindowBolt, TumblingWindowBolt,
                                    WindowContext)

__all__ = [
    "AssignableMetric", "AssignableMetrics", "BaseBolt", "BaseSpout", "BatchBolt", "BatchSpout",
    "Bolt", "BoltAckInfo", "BoltExecuteInfo", "BoltFailInfo", "CountMetric", "EmitInfo",
    "GlobalStreamId", "Grouping", "HeronComponentSpec", "HeronTuple", "ICustomGrouping",
    "IHeronSerializer", "IMetric", "IReducer", "ITaskHook", "MeanReducedMetric", "MeanReducer",
    "MultiAssignableMetrics", "MultiCountMetric", "MultiMeanReducedMetric", "MultiReducedMetric",
    "PythonSerializer", "ReducedMetric", "SessionWindowBolt", "SlidingWindowBolt", "Spout", "SpoutAckInfo",
    "SpoutFailInfo", "HashMapState", "State", "StatefulComponent", "Stream",
    "Topology", "TopologyBuilder", "TopologyContext", "TopologyReliabilityMode", "TopologyType",
    "TumblingWindowBolt", "TwoPhaseStatefulComponent", "Tuple", "TupleHelper", "WindowContext",
    "api_constants",
    "batch_source", "default_serializer", "global_metrics",
]
