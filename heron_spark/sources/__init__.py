"""The old path of the built-in spouts, kept for code that imports it: use ``heron_spark.io``."""

from heron_spark.io import FileSpout  # noqa: F401 - re-exported from its old path
