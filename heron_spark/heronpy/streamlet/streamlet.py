"""heronpy.streamlet.streamlet: heronpy's path to ``heron_spark.streamlet.streamlet``."""

from heron_spark.streamlet.streamlet import *  # noqa: F401,F403
