"""``format("heron_spark")`` in a real Spark session, over a real file-sink commit log.

The log's producer is Spark's own file sink (``spark_source_support.Producer``), which writes
the format a ``ParquetSink`` writes, compaction included (batch 9 is ``9.compact``). A
streaming query into a memory sink must see every committed row exactly once, including rows
committed after it started; a batch read the same rows as ``spark.read.parquet``.
"""

from __future__ import annotations

import time

import pytest
from spark_source_support import ROWS_PER_FILE, SCHEMA, Producer, expected_rows

from heron_spark import register_data_source
from heron_spark.testing import wait_until

pytestmark = pytest.mark.spark
WAIT_SECS = 300  # generous: the test machine may be loaded


def _rows(spark, table: str, query=None) -> list[tuple]:
    if query is not None and query.exception() is not None:
        raise AssertionError(f"the streaming query failed: {query.exception()}")
    return sorted(tuple(row) for row in spark.sql(f"SELECT n, word, bucket FROM {table}")
                  .collect())


def test_streaming_and_batch_reads_see_each_committed_row_once(spark, tmp_path):
    register_data_source(spark)
    producer = Producer(spark, tmp_path)
    producer.produce(12)                                   # batches 0..11, 9.compact among them
    assert (producer.out / "_spark_metadata" / "9.compact").exists()

    batch = spark.read.format("heron_spark").load(str(producer.out))
    assert sorted(batch.columns) == ["bucket", "n", "word"]
    assert sorted(tuple(r) for r in batch.select("n", "word", "bucket").collect()) == \
        expected_rows(12)
    assert batch.count() == spark.read.parquet(str(producer.out)).count()

    stream = (spark.readStream.format("heron_spark").option("path", str(producer.out)).load()
              .select("n", "word", "bucket"))
    query = (stream.writeStream.format("memory").queryName("heron_spark_stream")
             .option("checkpointLocation", str(tmp_path / "reader-checkpoint")).start())
    try:
        wait_until(lambda: _rows(spark, "heron_spark_stream", query) == expected_rows(12),
                   WAIT_SECS, message=lambda: f"12 batches' rows ({query.lastProgress})")
        latencies = []
        for _ in range(2):                                 # batches 12..14, then 15..17
            producer.produce(3)
            committed = time.monotonic()
            wait_until(lambda: len(_rows(spark, "heron_spark_stream", query)) >= producer.written
                       * ROWS_PER_FILE, WAIT_SECS, message="the rows committed after the query started")
            latencies.append(time.monotonic() - committed)
        assert _rows(spark, "heron_spark_stream", query) == expected_rows(18)
        print(f"committed batch visible in the streaming query after {latencies} s")
        assert query.exception() is None
    finally:
        query.stop()


def test_a_user_schema_reads_a_sink_with_nothing_committed_yet(spark, tmp_path):
    register_data_source(spark)
    out = tmp_path / "out"
    stream = spark.readStream.format("heron_spark").schema(SCHEMA).load(str(out))
    query = (stream.writeStream.format("memory").queryName("heron_spark_empty")
             .option("checkpointLocation", str(tmp_path / "reader-checkpoint")).start())
    try:
        query.processAllAvailable()
        assert _rows(spark, "heron_spark_empty", query) == []
        producer = Producer(spark, tmp_path)
        producer.produce(2)
        wait_until(lambda: _rows(spark, "heron_spark_empty", query) == expected_rows(2), WAIT_SECS,
                   message="rows of the first batches")
    finally:
        query.stop()
    with pytest.raises(Exception, match="option .path. = .*no rows are committed"):
        spark.read.format("heron_spark").load(str(tmp_path / "empty"))
