"""heronpy.api: the names of ``heron_spark.api``, plus heronpy's submodules."""

from heron_spark.api import *  # noqa: F401,F403
