"""heronpy.api.topology: heronpy's path to ``heron_spark.api.topology``."""

from heron_spark.api.topology import *  # noqa: F401,F403
