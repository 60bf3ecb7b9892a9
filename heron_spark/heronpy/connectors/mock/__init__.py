"""heronpy.connectors.mock: heronpy's path to ``heron_spark.connectors.mock``."""

from heron_spark.connectors.mock import *  # noqa: F401,F403
