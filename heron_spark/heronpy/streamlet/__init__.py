"""heronpy.streamlet: the Streamlet API (``heron_spark.streamlet``), plus heronpy's submodules."""

from heron_spark.streamlet import *  # noqa: F401,F403
