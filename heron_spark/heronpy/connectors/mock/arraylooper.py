"""heronpy.connectors.mock.arraylooper: heronpy's path to ``heron_spark.connectors.mock.arraylooper``."""

from heron_spark.connectors.mock.arraylooper import *  # noqa: F401,F403
