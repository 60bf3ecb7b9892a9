"""heronpy.api.custom_grouping: heronpy's path to ``heron_spark.api.custom_grouping``."""

from heron_spark.api.custom_grouping import *  # noqa: F401,F403
