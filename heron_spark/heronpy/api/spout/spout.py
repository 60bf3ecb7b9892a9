"""heronpy.api.spout.spout: heronpy's path to ``heron_spark.api.spout``."""

from heron_spark.api.spout import *  # noqa: F401,F403
