"""heronpy.streamlet.resources: heronpy's path to ``heron_spark.streamlet.resources``."""

from heron_spark.streamlet.resources import *  # noqa: F401,F403
