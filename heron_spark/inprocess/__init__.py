"""The in-process runner: a whole topology on one thread of this process.

No Spark, no processes (``runner.InProcessTopology``); what ``heron_spark.testing.run_local``
uses.
"""

from heron_spark.inprocess.runner import InProcessTopology

__all__ = ["InProcessTopology"]
