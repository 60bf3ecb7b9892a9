"""heronpy.api.cloudpickle: heronpy vendors cloudpickle here; we use PySpark's copy of it."""

from pyspark.cloudpickle import *  # noqa: F401,F403
from pyspark.cloudpickle import CloudPickler, dumps, loads  # noqa: F401
