"""heronpy.streamlet.runner: heronpy's path to ``heron_spark.streamlet.runner``."""

from heron_spark.streamlet.runner import *  # noqa: F401,F403
