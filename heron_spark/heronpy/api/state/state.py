"""heronpy.api.state.state: heronpy's path to ``heron_spark.api.state``."""

from heron_spark.api.state import HashMapState, State  # noqa: F401
