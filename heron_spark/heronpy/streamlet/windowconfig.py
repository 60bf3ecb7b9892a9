"""heronpy.streamlet.windowconfig: heronpy's path to ``heron_spark.streamlet.windowconfig``."""

from heron_spark.streamlet.windowconfig import *  # noqa: F401,F403
