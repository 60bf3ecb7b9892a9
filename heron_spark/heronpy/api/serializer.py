"""heronpy.api.serializer: heronpy's path to ``heron_spark.api.serializer``."""

from heron_spark.api.serializer import *  # noqa: F401,F403
