"""heronpy.api.bolt.window_bolt: heronpy's path to ``heron_spark.api.window``."""

from heron_spark.api.window import *  # noqa: F401,F403
