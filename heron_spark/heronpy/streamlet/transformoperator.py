"""heronpy.streamlet.transformoperator: heronpy's path to ``heron_spark.streamlet.transformoperator``."""

from heron_spark.streamlet.transformoperator import *  # noqa: F401,F403
