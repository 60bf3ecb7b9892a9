"""heronpy.api.global_metrics: heronpy's path to ``heron_spark.api.global_metrics``.

The same module object, not a copy of its names: the runtime swaps its ``metricsContainer``.
"""

import sys

from heron_spark.api import global_metrics

sys.modules[__name__] = global_metrics
