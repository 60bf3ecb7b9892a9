"""Spark's own readers, independent of heron_spark, run as a separate process by the tests.

``python spark_readers.py kafka SERVERS TOPIC ISOLATION``: every record of ``TOPIC`` read with
Spark's Kafka source (``spark.read.format("kafka")``, ``kafka.isolation.level`` = ISOLATION),
one JSON line ``{"partition", "offset", "key", "value"}`` each (key and value as UTF-8 text).

``python spark_readers.py delta PATH``: every row of the Delta table at ``PATH`` read with
Delta Lake's Spark reader (``spark.read.format("delta")``), one JSON line a row, then a line
``{"__versions__": [...]}`` with the table's history (version, operation, txn app id, version).

The jars come in ``HERON_SPARK_READER_JARS`` (comma-separated, ``jvm_support.spark_jars``);
``reader(...)`` below runs this script with the right Python and jars and parses its output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _session(delta: bool):
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("independent-reader")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.jars", os.environ["HERON_SPARK_READER_JARS"]))
    if delta:
        builder = (builder
                   .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
                   .config("spark.sql.catalog.spark_catalog",
                           "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _kafka(servers: str, topic: str, isolation: str) -> None:
    session = _session(delta=False)
    frame = (session.read.format("kafka").option("kafka.bootstrap.servers", servers)
             .option("subscribe", topic).option("kafka.isolation.level", isolation)
             .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    for row in frame.select("partition", "offset", "key", "value").collect():
        print(json.dumps({"partition": row.partition, "offset": row.offset,
                          "key": None if row.key is None else bytes(row.key).decode(),
                          "value": None if row.value is None else bytes(row.value).decode()}))


def _delta(path: str) -> None:
    session = _session(delta=True)
    for row in session.read.format("delta").load(path).collect():
        print(json.dumps(row.asDict(), default=str))
    history = session.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    print(json.dumps({"__versions__": [
        {"version": h.version, "operation": h.operation} for h in history]}))


def reader(kind: str, *args: str, timeout: float = 300) -> list[dict]:
    """Run this script's ``kind`` reader on ``args``; return its JSON lines (history apart)."""
    import jvm_support

    if kind == "kafka":
        python, jars = sys.executable, jvm_support.spark_jars("spark-kafka")
    else:
        python, jars = jvm_support.delta_reader_python(), jvm_support.spark_jars("delta")
    env = {**os.environ, "HERON_SPARK_READER_JARS": ",".join(jars),
           "PYSPARK_PYTHON": python, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([python, __file__, kind, *args], capture_output=True, text=True,
                          env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"Spark's {kind} reader failed:\n{done.stderr[-4000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


if __name__ == "__main__":
    if sys.argv[1] == "kafka":
        _kafka(*sys.argv[2:5])
    elif sys.argv[1] == "delta":
        _delta(sys.argv[2])
    else:
        raise SystemExit(__doc__)
