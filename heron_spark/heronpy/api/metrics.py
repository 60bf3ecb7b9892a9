"""heronpy.api.metrics: heronpy's path to ``heron_spark.api.metrics``."""

from heron_spark.api.metrics import *  # noqa: F401,F403
