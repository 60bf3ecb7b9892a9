"""heronpy.api.bolt.bolt: heronpy's path to ``heron_spark.api.bolt``."""

from heron_spark.api.bolt import *  # noqa: F401,F403
