"""Connectors: spouts and bolts that move data between a topology and the outside world.

``FileSpout`` reads the lines of text files, replayably (``heron_spark.io.file_spout``). The
connectors run in Heron Instances; importing this package starts nothing.

``KafkaSpout`` and ``KafkaSink`` read and write Kafka topics (``kafka_spout``, ``kafka_sink``;
keys in ``kafka_config``; offsets in ``kafka_offsets``). They need ``confluent-kafka``
(``pip install 'heron_spark[kafka]'``), imported only when a task starts.
"""

from heron_spark.io.file_spout import FileSpout
from heron_spark.io.kafka_sink import KafkaSink
from heron_spark.io.kafka_spout import KafkaSpout

__all__ = ["FileSpout", "KafkaSink", "KafkaSpout"]
