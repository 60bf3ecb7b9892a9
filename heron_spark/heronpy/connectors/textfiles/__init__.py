"""heronpy.connectors.textfiles: heronpy's path to ``heron_spark.connectors.textfiles``."""

from heron_spark.connectors.textfiles import *  # noqa: F401,F403
