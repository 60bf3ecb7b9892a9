"""heron_spark: Apache Heron's stream-processing semantics as a Spark-native plugin.

The user API (heronpy-compatible) plus ``submit``; everything else is internal. Importing
this package starts nothing: no Spark, no processes.
"""

from heron_spark.api import (AssignableMetric, AssignableMetrics, BaseBolt, BaseSpout, BatchBolt,
                             BatchSpout, Bolt, CountMetric, GlobalStreamId, Grouping,
                             HeronComponentSpec, HeronTuple, ICustomGrouping, IHeronSerializer,
                             IMetric, IReducer, ITaskHook, MeanReducedMetric, MeanReducer,
                             MultiAssignableMetrics, MultiCountMetric, MultiMeanReducedMetric,
                             MultiReducedMetric, PythonSerializer, ReducedMetric,
                             SessionWindowBolt, SlidingWindowBolt, Spout, State, StatefulComponent, Stream,
                             Topology, TopologyBuilder, TopologyContext, TopologyReliabilityMode,
                             TumblingWindowBolt, Tuple, TupleHelper, TwoPhaseStatefulComponent,
                             WindowContext, api_constants, batch_source, global_metrics)
from heron_spark.errors import (AuthenticationError, ClusterCapacityError, ComponentClassError,
                                ComponentSpecError, ConfigError, ConnectorError,
                                ConnectExtrasError, DataSourceOptionError,
                                DuplicateMetricError, ExtrasError, HeronSparkError,
                                TopologyNotFoundError, TopologyRuntimeError,
                                TopologyStateError, TopologyTypeError, TopologyValueError,
                                WorkerEnvironmentError, WrongPlaceError)
from heron_spark._version import __version__
from heron_spark.heronpy_alias import install as install_heronpy_alias
from heron_spark.io import FileSpout
from heron_spark.io import FileSource, ParquetSink, from_dataframe
from heron_spark.io import KafkaSink, KafkaSpout
from heron_spark.io import DeltaSink
from heron_spark.sql import register_data_source


def submit(topology, spark=None, conf=None, name=None, master=None, deactivated=False):
    """Submit ``topology`` to Spark; return a ``TopologyHandle`` (driver only).

    See ``heron_spark.scheduler.submit.submit`` for the arguments.
    """
    from heron_spark.scheduler.submit import submit as _submit

    return _submit(topology, spark=spark, conf=conf, name=name, master=master,
                   deactivated=deactivated)


__all__ = [
    "AssignableMetric", "AssignableMetrics", "AuthenticationError", "BaseBolt", "BaseSpout",
    "BatchBolt", "BatchSpout", "Bolt", "ClusterCapacityError", "ComponentClassError",
    "ComponentSpecError", "ConfigError", "ConnectExtrasError", "ConnectorError",
    "CountMetric", "DataSourceOptionError",
    "DuplicateMetricError", "ExtrasError", "FileSpout",
    "FileSource", "ParquetSink", "from_dataframe",
    "KafkaSink", "KafkaSpout",
    "DeltaSink",
    "GlobalStreamId", "Grouping", "HeronComponentSpec", "HeronSparkError", "HeronTuple",
    "ICustomGrouping", "IHeronSerializer", "IMetric", "IReducer", "ITaskHook", "MeanReducedMetric",
    "MeanReducer", "MultiAssignableMetrics", "MultiCountMetric", "MultiMeanReducedMetric",
    "MultiReducedMetric", "PythonSerializer", "ReducedMetric", "SessionWindowBolt",
    "SlidingWindowBolt", "Spout",
    "State", "StatefulComponent", "Stream", "Topology", "TwoPhaseStatefulComponent",
    "TopologyBuilder", "TopologyContext", "TopologyNotFoundError", "TopologyReliabilityMode",
    "TopologyRuntimeError", "TopologyStateError", "TopologyTypeError", "TopologyValueError",
    "TumblingWindowBolt", "Tuple", "TupleHelper", "WindowContext",
    "WorkerEnvironmentError", "WrongPlaceError", "__version__",
    "api_constants", "batch_source", "global_metrics", "install_heronpy_alias",
    "register_data_source", "submit",
]
