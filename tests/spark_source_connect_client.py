"""A Spark Connect client reading a topology's stream: ``spark_source_connect_client.py URL DIR``.

Run by ``tests/test_spark_source_connect.py`` in its own process (a Connect session only, no
SparkContext). It stores a topology whose ``ParquetSink``-configured bolt (``parquet.path``)
subscribes to a spout's stream, in a state manager folder under DIR, the way ``submit`` stores
it; commits 12 batches to that folder with Spark's file sink (the same commit log); reads
``format("heron_spark")`` by topology, component and stream, without registering the source
(the server finds ``pyspark_heron_spark`` on its workers' path), into a memory sink; commits 3
more batches; prints one JSON object: rows seen (before / after), the expected counts, and
seconds from the later commit to its rows in the query.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from spark_source_support import ROWS_PER_FILE, Producer, expected_rows

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.plan.logical import build_logical_plan
from heron_spark.scheduler.update import topology_proto
from heron_spark.statemgr import LocalFileStateManager
from heron_spark.testing import wait_until


class Numbers(Spout):
    """Declares the stream the sink writes (never runs here)."""

    outputs = ["n", "word", "bucket"]

    def next_tuple(self):
        """Emit nothing: the topology is only stored."""


class Sink(Bolt):
    """Stands where a ParquetSink stands: its component config has ``parquet.path``."""

    def process(self, tup):
        """Do nothing: the topology is only stored."""


def store_topology(folder: Path, sink_path: Path) -> str:
    """Store the topology ``numbers`` under ``folder/state``; return the state manager URL."""
    builder = TopologyBuilder("numbers")
    numbers = builder.add_spout("numbers", Numbers, par=1)
    builder.add_bolt("parquet", Sink, par=1, inputs={numbers: Grouping.SHUFFLE},
                     config={"parquet.path": str(sink_path)})
    plan = build_logical_plan(builder.build(), "numbers")
    with LocalFileStateManager(str(folder / "state")) as statemgr:
        statemgr.set_topology(topology_proto(plan, "numbers-1", b""))
    return f"file://{folder}/state"


def _rows(spark) -> list[tuple]:
    return sorted(tuple(row) for row in
                  spark.sql("SELECT n, word, bucket FROM heron_spark_connect").collect())


def main(url: str, folder: Path) -> dict:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).getOrCreate()
    producer = Producer(spark, folder)
    statemgr = store_topology(folder, producer.out)
    producer.produce(12)
    stream = (spark.readStream.format("heron_spark").option("topology", "numbers")
              .option("component", "numbers").option("stream", "default")
              .option("heron.statemgr", statemgr).load().select("n", "word", "bucket"))
    query = (stream.writeStream.format("memory").queryName("heron_spark_connect")
             .option("checkpointLocation", str(folder / "reader-checkpoint")).start())
    try:
        wait_until(lambda: len(_rows(spark)) >= 12 * ROWS_PER_FILE, 180,
                   message="the first 12 batches")
        first = _rows(spark)
        producer.produce(3)
        committed = time.monotonic()
        wait_until(lambda: len(_rows(spark)) >= 15 * ROWS_PER_FILE, 180,
                   message="the 3 later batches")
        latency = time.monotonic() - committed
        after = _rows(spark)
    finally:
        query.stop()
    spark.stop()
    return {"first_ok": first == expected_rows(12), "after_ok": after == expected_rows(15),
            "first": len(first), "after": len(after), "latency_secs": latency,
            "connect": type(spark).__module__}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))))
