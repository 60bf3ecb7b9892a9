"""Hold heron_spark's release version, in the bottom layer.

The scheduler stamps it on what it submits and checks it on the workers;
``heron_spark.__version__`` re-exports it.
"""

__version__ = "0.1.0"
