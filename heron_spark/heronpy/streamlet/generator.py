"""heronpy.streamlet.generator: heronpy's path to ``heron_spark.streamlet.generator``."""

from heron_spark.streamlet.generator import *  # noqa: F401,F403
