"""heronpy.streamlet.context: heronpy's path to ``heron_spark.streamlet.context``."""

from heron_spark.streamlet.context import *  # noqa: F401,F403
