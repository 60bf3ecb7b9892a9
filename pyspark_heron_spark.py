"""The ``heron_spark`` Spark data source, where PySpark looks for Python data sources.

PySpark 4 imports every top-level module named ``pyspark_*`` on its workers' Python path and
registers its ``DefaultSource`` under ``DefaultSource.name()``: with heron_spark installed,
``spark.read.format("heron_spark")`` needs no registration. See ``heron_spark.sql.source``.
"""

from heron_spark.sql.source import HeronSparkDataSource as DefaultSource

__all__ = ["DefaultSource"]
