"""heronpy.api.task_hook: heronpy's path to ``heron_spark.api.task_hook``."""

from heron_spark.api.task_hook import *  # noqa: F401,F403
