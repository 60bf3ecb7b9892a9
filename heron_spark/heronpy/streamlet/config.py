"""heronpy.streamlet.config: heronpy's path to ``heron_spark.streamlet.config``."""

from heron_spark.streamlet.config import *  # noqa: F401,F403
