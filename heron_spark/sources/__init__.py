"""Built-in spouts."""

from heron_spark.sources.file_spout import FileSpout

__all__ = ["FileSpout"]
