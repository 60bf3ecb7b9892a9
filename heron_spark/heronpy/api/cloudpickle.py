"""heronpy.api.cloudpickle: heronpy vendors cloudpickle here; we use the cloudpickle package."""

from cloudpickle import *  # noqa: F401,F403
from cloudpickle import CloudPickler, dumps, loads  # noqa: F401
