"""heronpy.api.spout: spouts."""

from heron_spark.api.spout import BaseSpout, Spout  # noqa: F401
