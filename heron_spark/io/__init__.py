"""Connectors: spouts and bolts that move data between a topology and the outside world.

``FileSpout`` reads the lines of text files, replayably (``heron_spark.io.file_spout``).
``ParquetSink`` writes a stream as Parquet files committed to Spark's file-sink log so Spark
reads each row exactly once (``parquet_sink``); ``DeltaSink`` appends a stream to a Delta Lake
table, one commit per checkpoint under effectively once (``delta_sink``; the table through
``deltalake``, ``pip install 'heron_spark[delta]'``, imported only when a task starts:
``delta_table``). ``FileSource`` reads a folder of Parquet, CSV,
JSON-lines or text files as they arrive (``file_source``); ``from_dataframe`` turns a Spark
DataFrame into a replayable spout (``dataframe``). ``KafkaSpout`` and ``KafkaSink`` read and
write Kafka topics (``kafka_spout``, ``kafka_sink``; keys in ``kafka_config``; offsets in
``kafka_offsets``); they need ``confluent-kafka`` (``pip install 'heron_spark[kafka]'``),
imported only when a task starts. The connectors run in Heron Instances;
importing this package starts nothing.
"""

from heron_spark.io.dataframe import from_dataframe
from heron_spark.io.delta_sink import DeltaSink
from heron_spark.io.file_source import FileSource
from heron_spark.io.file_spout import FileSpout
from heron_spark.io.kafka_sink import KafkaSink
from heron_spark.io.kafka_spout import KafkaSpout
from heron_spark.io.parquet_sink import ParquetSink

__all__ = ["DeltaSink", "FileSource", "FileSpout", "KafkaSink", "KafkaSpout", "ParquetSink", "from_dataframe"]
