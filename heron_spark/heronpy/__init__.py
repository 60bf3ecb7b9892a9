"""heronpy, as shipped by heron_spark: Heron's Python API under its own module paths.

Installing heron_spark installs this package as top-level ``heronpy`` (setup.py maps it), so
topologies written for Heron import it unchanged wherever they run: ``heron-spark submit``, plain
``python``, ``spark-submit``, notebooks and Spark executors. Every module re-exports the
heron_spark implementation; there is no second copy of any class.
"""

__heron_spark__ = True
