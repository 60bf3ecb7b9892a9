"""``python -m heron_spark.cli``."""

import sys

from heron_spark.cli.main import main

sys.exit(main())
