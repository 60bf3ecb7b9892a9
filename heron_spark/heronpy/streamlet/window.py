"""heronpy.streamlet.window: heronpy's path to ``heron_spark.streamlet.window``."""

from heron_spark.streamlet.window import *  # noqa: F401,F403
