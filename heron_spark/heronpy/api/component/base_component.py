"""heronpy.api.component.base_component: heronpy's path to ``heron_spark.api.component``."""

from heron_spark.api.component import *  # noqa: F401,F403
