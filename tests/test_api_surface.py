"""The public surface is declared in one place, and importing it starts nothing."""

import subprocess
import sys

import heron_spark

EXPECTED = {
    "AssignableMetric", "AuthenticationError", "BaseBolt", "BaseSpout", "BatchBolt", "BatchSpout",
    "Bolt",
    "ClusterCapacityError", "ComponentClassError", "ComponentSpecError", "ConfigError",
    "ConnectExtrasError", "ConnectorError",
    "CountMetric", "DataSourceOptionError", "DuplicateMetricError", "FileSpout",
    "FileSource", "ParquetSink", "from_dataframe",  # connectors (issue 19)
    "GlobalStreamId", "Grouping", "HeronComponentSpec", "HeronSparkError",
    "HeronTuple", "ICustomGrouping", "IMetric", "MeanReducedMetric", "MultiCountMetric",
    "SessionWindowBolt", "SlidingWindowBolt", "Spout",
    # metrics family, serializers, task hooks, global metrics (heronpy's names)
    "AssignableMetrics", "IReducer", "MeanReducer", "MultiAssignableMetrics",
    "MultiMeanReducedMetric", "MultiReducedMetric", "ReducedMetric", "IHeronSerializer",
    "PythonSerializer", "ITaskHook", "global_metrics",
    "Stream", "Topology", "TopologyBuilder", "TopologyContext", "TopologyNotFoundError",
    "TopologyReliabilityMode", "TopologyRuntimeError", "TopologyStateError", "TopologyTypeError",
    "TopologyValueError", "TumblingWindowBolt", "Tuple", "TupleHelper", "WindowContext",
    "WorkerEnvironmentError", "WrongPlaceError",
    "__version__",
    "ExtrasError", "KafkaSink", "KafkaSpout",  # heron_spark.io's Kafka connectors
    "DeltaSink",  # heron_spark.io's Delta Lake sink
    "api_constants", "batch_source", "install_heronpy_alias", "register_data_source",
    "submit",
    "State", "StatefulComponent", "TwoPhaseStatefulComponent",  # stateful processing (issue 33)
}


def test_exported_names():
    assert set(heron_spark.__all__) == EXPECTED
    for name in EXPECTED:
        assert hasattr(heron_spark, name), name


def test_file_spout_is_exported_from_io():
    from heron_spark.io import FileSpout

    assert heron_spark.FileSpout is FileSpout


def test_errors_inherit_matching_builtins():
    assert issubclass(heron_spark.TopologyValueError, ValueError)
    assert issubclass(heron_spark.TopologyTypeError, TypeError)
    assert issubclass(heron_spark.TopologyRuntimeError, RuntimeError)
    assert issubclass(heron_spark.TopologyNotFoundError, LookupError)
    assert issubclass(heron_spark.ComponentSpecError, AssertionError)  # heronpy's spec asserts
    assert issubclass(heron_spark.ComponentClassError, ImportError)


def test_importing_the_api_starts_no_spark():
    code = ("import sys, heron_spark, heron_spark.api, heron_spark.streamlet, heron_spark.connectors"
            ".mock, heron_spark.connectors.textfiles;"
            "assert 'pyspark' not in sys.modules, 'pyspark imported';"
            "assert 'pyarrow' not in sys.modules, 'pyarrow imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# heronpy's public modules, each with names user code imports from it
HERONPY_MODULES = {
    "heronpy.api.api_constants": ["TopologyReliabilityMode", "TOPOLOGY_RELIABILITY_MODE"],
    "heronpy.api.bolt.bolt": ["Bolt"],
    "heronpy.api.bolt.base_bolt": ["BaseBolt"],
    "heronpy.api.spout.spout": ["Spout"],
    "heronpy.api.spout.base_spout": ["BaseSpout"],
    "heronpy.api.component.component_spec": ["HeronComponentSpec", "GlobalStreamId"],
    "heronpy.api.component.base_component": ["BaseComponent"],
    "heronpy.api.custom_grouping": ["ICustomGrouping"],
    "heronpy.api.metrics": ["CountMetric", "MultiCountMetric", "MeanReducedMetric", "IMetric",
                            "AssignableMetrics", "MultiAssignableMetrics", "IReducer",
                            "MeanReducer", "ReducedMetric", "MultiReducedMetric",
                            "MultiMeanReducedMetric"],
    "heronpy.api.global_metrics": ["incr", "safe_incr", "init"],
    "heronpy.api.serializer": ["IHeronSerializer", "PythonSerializer", "default_serializer"],
    "heronpy.api.task_hook": ["ITaskHook", "EmitInfo", "SpoutAckInfo", "SpoutFailInfo",
                              "BoltExecuteInfo", "BoltAckInfo", "BoltFailInfo"],
    "heronpy.api.stream": ["Grouping", "Stream"],
    "heronpy.api.topology": ["Topology", "TopologyBuilder"],
    "heronpy.api.topology_context": ["TopologyContext", "StreamId"],
    "heronpy.proto.topology_pb2": ["Grouping", "StreamId"],
    "heronpy.api.tuple": ["Tuple", "TupleHelper"],
    "heronpy.api.cloudpickle": ["dumps", "loads"],
    "heronpy.api.state.state": ["State", "HashMapState"],
    "heronpy.api.state.stateful_component": ["StatefulComponent"],
    "heronpy.api.bolt.window_bolt": ["SessionWindowBolt", "SlidingWindowBolt", "TumblingWindowBolt",
                                     "WindowContext"],
    "heronpy.streamlet": ["Builder", "Config", "Runner", "WindowConfig", "KeyedWindow"],
    "heronpy.streamlet.builder": ["Builder"],
    "heronpy.streamlet.runner": ["Runner"],
    "heronpy.streamlet.config": ["Config"],
    "heronpy.streamlet.generator": ["Generator"],
    "heronpy.streamlet.context": ["Context"],
    "heronpy.streamlet.transformoperator": ["TransformOperator"],
    "heronpy.streamlet.windowconfig": ["WindowConfig"],
    "heronpy.streamlet.keyedwindow": ["KeyedWindow"],
    "heronpy.streamlet.window": ["Window"],
    "heronpy.streamlet.streamlet": ["Streamlet"],
    "heronpy.streamlet.resources": ["Resources"],
    "heronpy.connectors.mock.arraylooper": ["ArrayLooper"],
    "heronpy.connectors.textfiles.textfilesgenerator": ["TextFileGenerator"],
}


def test_heronpy_imports_in_a_fresh_interpreter_without_touching_heron_spark():
    """Installing heron_spark installs ``heronpy``: no alias call, no heron_spark import first."""
    script = "\n".join(
        [f"from {module} import {', '.join(names)}" for module, names in HERONPY_MODULES.items()]
        + ["import heronpy, heronpy.api.bolt.bolt as b, heron_spark.api.bolt as ours",
           "assert b.Bolt is ours.Bolt and heronpy.__heron_spark__",
           "print('ok')"])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd="/", timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
