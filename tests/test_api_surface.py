"""The public surface is declared in one place, and importing it starts nothing."""

import subprocess
import sys

import heron_spark

EXPECTED = {
    "AssignableMetric", "AuthenticationError", "BatchBolt", "BatchSpout", "Bolt",
    "ClusterCapacityError", "ConfigError",
    "CountMetric", "GlobalStreamId", "Grouping", "HeronComponentSpec", "HeronSparkError",
    "HeronTuple", "ICustomGrouping", "IMetric", "MeanReducedMetric", "MultiCountMetric", "Spout",
    "Stream", "Topology", "TopologyBuilder", "TopologyContext", "TopologyNotFoundError",
    "TopologyReliabilityMode", "TopologyRuntimeError", "TopologyStateError", "TopologyTypeError",
    "TopologyValueError", "Tuple", "TupleHelper", "WorkerEnvironmentError", "WrongPlaceError",
    "__version__",
    "api_constants", "batch_source", "install_heronpy_alias", "submit",
}


def test_exported_names():
    assert set(heron_spark.__all__) == EXPECTED
    for name in EXPECTED:
        assert hasattr(heron_spark, name), name


def test_errors_inherit_matching_builtins():
    assert issubclass(heron_spark.TopologyValueError, ValueError)
    assert issubclass(heron_spark.TopologyTypeError, TypeError)
    assert issubclass(heron_spark.TopologyRuntimeError, RuntimeError)
    assert issubclass(heron_spark.TopologyNotFoundError, LookupError)


def test_importing_the_api_starts_no_spark():
    code = ("import sys, heron_spark, heron_spark.api;"
            "assert 'pyspark' not in sys.modules, 'pyspark imported';"
            "assert 'pyarrow' not in sys.modules, 'pyarrow imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
