"""``python -m heron_spark.metrics``: run a container's Metrics Manager."""

import sys

from heron_spark.metrics.manager import main

sys.exit(main())
