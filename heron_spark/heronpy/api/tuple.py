"""heronpy.api.tuple: heronpy's path to ``heron_spark.api.tuple``."""

from heron_spark.api.tuple import *  # noqa: F401,F403
