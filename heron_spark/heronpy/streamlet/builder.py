"""heronpy.streamlet.builder: heronpy's path to ``heron_spark.streamlet.builder``."""

from heron_spark.streamlet.builder import *  # noqa: F401,F403
