"""heronpy.api.component.component_spec: heronpy's path to ``heron_spark.api.component``."""

from heron_spark.api.component import *  # noqa: F401,F403
