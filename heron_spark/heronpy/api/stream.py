"""heronpy.api.stream: heronpy's path to ``heron_spark.api.stream``."""

from heron_spark.api.stream import *  # noqa: F401,F403
