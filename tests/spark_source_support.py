"""A real producer of a file-sink commit log for the ``heron_spark`` data source's tests.

Spark's own file sink writes the log (``_spark_metadata``) that a ``ParquetSink`` writes: a
streaming query reads JSON files from ``<folder>/in`` (one file per micro-batch) and writes
Parquet partitioned by ``bucket`` to ``<folder>/out``. ``produce`` drops the next ``files``
input files and runs the query until it has committed them (``availableNow``), so each call
commits ``files`` more batches. Works with a classic and a Spark Connect session.
"""

from __future__ import annotations

import json
from pathlib import Path

ROWS_PER_FILE = 7
SCHEMA = "n bigint, word string, bucket int"


def expected_rows(files: int) -> list[tuple]:
    """Return the rows of the first ``files`` input files, sorted, as ``(n, word, bucket)``."""
    return sorted((n, f"w{n}", n % 3) for n in range(files * ROWS_PER_FILE))


class Producer:
    """Commit input files as file-sink batches under ``folder`` (see the module docstring)."""

    def __init__(self, spark, folder: Path) -> None:
        self.spark = spark
        self.inbox = folder / "in"
        self.out = folder / "out"
        self.checkpoint = folder / "producer-checkpoint"
        self.inbox.mkdir(parents=True, exist_ok=True)
        self.written = 0

    def produce(self, files: int) -> None:
        """Write ``files`` more input files and commit each as one batch of the sink."""
        for index in range(self.written, self.written + files):
            rows = [{"n": n, "word": f"w{n}", "bucket": n % 3}
                    for n in range(index * ROWS_PER_FILE, (index + 1) * ROWS_PER_FILE)]
            tmp = self.inbox / f".{index:05d}.tmp"
            tmp.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
            tmp.rename(self.inbox / f"{index:05d}.json")
        self.written += files
        query = (self.spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
                 .json(str(self.inbox))
                 .writeStream.format("parquet").partitionBy("bucket")
                 .option("checkpointLocation", str(self.checkpoint))
                 .trigger(availableNow=True).start(str(self.out)))
        query.awaitTermination()
        if query.exception() is not None:
            raise AssertionError(f"the producer query failed: {query.exception()}")
