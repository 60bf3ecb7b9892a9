"""Connectors: spouts and bolts that move data between a topology and the outside world.

``FileSpout`` reads the lines of text files, replayably (``heron_spark.io.file_spout``). The
connectors run in Heron Instances; importing this package starts nothing.
"""

from heron_spark.io.file_spout import FileSpout

__all__ = ["FileSpout"]
