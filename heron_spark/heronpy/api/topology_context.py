"""heronpy.api.topology_context: heronpy's path to ``heron_spark.api.context``."""

from heron_spark.api.context import *  # noqa: F401,F403
