"""heronpy's path to ``heron_spark.connectors.textfiles.textfilesgenerator``."""

from heron_spark.connectors.textfiles.textfilesgenerator import *  # noqa: F401,F403
