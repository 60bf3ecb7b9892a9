"""Spark SQL reads of what topologies commit: the ``heron_spark`` data source.

``spark.read.format("heron_spark")`` / ``spark.readStream.format("heron_spark")`` with options
``topology`` + ``component`` (+ ``stream``, ``heron.statemgr``) or ``path``: see
``heron_spark.sql.source``. Importing this package imports neither pyspark nor anything that
starts; the source itself is in ``source`` (it subclasses pyspark's ``DataSource``).
"""

from __future__ import annotations

from typing import Any


def register_data_source(spark: Any) -> None:
    """Register ``format("heron_spark")`` with ``spark``, a classic or Spark Connect session.

    PySpark 4 already finds the source by itself where heron_spark is installed in the
    Python its workers run (module ``pyspark_heron_spark``); call this where it is not found,
    say when the workers get heron_spark only through ``PYTHONPATH`` set after the first
    Python data source was used. Driver (or Connect client) only.
    """
    from heron_spark.sql.source import HeronSparkDataSource

    spark.dataSource.register(HeronSparkDataSource)


__all__ = ["register_data_source"]
