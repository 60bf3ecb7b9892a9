"""heronpy.api.api_constants: heronpy's path to ``heron_spark.api.api_constants``."""

from heron_spark.api.api_constants import *  # noqa: F401,F403
