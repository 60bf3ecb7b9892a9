"""A running topology whose stream a Spark streaming query reads: ``format("heron_spark")``.

``FileSource`` (text, polling the folder ``in``) → ``words`` (one row ``(word, at)`` per word of
a line; ``at`` is ``<line>#<position>``, unique since every line starts with its own token)
→ ``ParquetSink`` at ``out`` (short rolls), at-least-once. ``add_file`` moves a file into the
folder whole, so rows can be produced after a query started. ``start_query`` reads the
stream the way the issue names it (topology, component ``words``, stream ``default``) into a
memory table; ``stream_while_running`` runs the whole check on one session. Used by
``test_spark_source_topology.py`` (classic session) and by ``connect_client.py`` (a Spark
Connect client); the server's executors import this module.
"""

from __future__ import annotations

import collections
import os
import time
from pathlib import Path

from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.io import FileSource, ParquetSink

COMPONENT = "words"
TABLE_COLUMNS = "word, at"


class Words(Bolt):
    """Emit ``(word, "<line>#<i>")`` for each word of a line, anchored; then ack the line."""

    outputs = ["word", "at"]

    def process(self, tup):
        line = tup.values[0]
        for i, word in enumerate(line.split()):
            self.emit([word, f"{line}#{i}"], anchors=[tup])
        self.ack(tup)


def lines_of(name: str, count: int) -> list[str]:
    """Return ``count`` distinct lines for the file ``name`` (its own first token each)."""
    return [f"{name}-{n} w{n % 5} w{n % 3}" for n in range(count)]


def add_file(folder: Path, name: str, lines: list[str]) -> None:
    """Write ``lines`` beside ``folder`` and move the file in whole (FileSource takes it)."""
    folder.mkdir(parents=True, exist_ok=True)
    temp = folder.parent / f".{name}.writing"
    temp.write_text("".join(f"{line}\n" for line in lines))
    os.replace(temp, folder / name)


def expected_rows(lines: list[str]) -> collections.Counter:
    """Return the rows ``(word, at)`` the sink commits for ``lines``, each once."""
    return collections.Counter((word, f"{line}#{i}") for line in lines
                               for i, word in enumerate(line.split()))


def build(name: str, folder: Path, out: Path):
    """Return the topology ``name``: FileSource over ``folder`` → words → ParquetSink ``out``."""
    builder = TopologyBuilder(name)
    lines = builder.add_spout("lines", FileSource, par=1, config={
        "file.path": str(folder), "file.format": "text", "file.poll.secs": 0.2})
    words = builder.add_bolt(COMPONENT, Words, par=2, inputs={lines: Grouping.SHUFFLE})
    builder.add_bolt("out", ParquetSink, par=1, inputs={words: Grouping.SHUFFLE},
                     config={"parquet.path": str(out), "parquet.roll.secs": 0.3})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    return builder.build()


def start_query(spark, name: str, statemgr: str, table: str, checkpoint: Path):
    """Start the streaming query reading the topology's ``words`` stream into ``table``."""
    stream = (spark.readStream.format("heron_spark").option("topology", name)
              .option("component", COMPONENT).option("stream", "default")
              .option("heron.statemgr", statemgr).load())
    return (stream.writeStream.format("memory").queryName(table)
            .option("checkpointLocation", str(checkpoint)).start())


def table_rows(spark, table: str, query=None) -> collections.Counter:
    """Return the rows of the memory ``table``; raise if ``query`` failed."""
    if query is not None and query.exception() is not None:
        raise AssertionError(f"the streaming query failed: {query.exception()}")
    return collections.Counter(tuple(row) for row in
                               spark.sql(f"SELECT {TABLE_COLUMNS} FROM {table}").collect())


def stream_while_running(spark, name: str, folder: Path, conf: dict, table: str,
                         timeout: float) -> dict:
    """Submit the topology on ``spark``, stream its rows into ``table``, kill it; say what came.

    The query starts once the sink has committed (its schema comes from the first file), sees
    ``a.txt``'s rows, then the rows of ``b.txt`` and ``c.txt`` added after it started; the
    topology is killed and the query drained. Returns the final state, the rows seen before
    the kill (``seen``) and after draining (``final``), the ``expected`` rows, and seconds.
    """
    from heron_spark import submit
    from heron_spark.io.parquet_store import CommitLog
    from heron_spark.testing import wait_until

    source, out = folder / "in", folder / "out"
    first, later = lines_of("a", 40), lines_of("b", 25) + lines_of("c", 15)
    add_file(source, "a.txt", first)
    started = time.monotonic()
    handle = submit(build(name, source, out), spark=spark, conf=conf)
    query = None
    try:
        assert handle.wait_running(timeout=120), handle.status
        wait_until(lambda: CommitLog.open(str(out)).names(), timeout,
                   message="the sink's first commit (the stream's schema comes from it)")
        query = start_query(spark, name, conf["heron.statemgr"], table,
                            folder / "reader-checkpoint")
        wait_until(lambda: table_rows(spark, table, query) == expected_rows(first), timeout,
                   message=lambda: f"a.txt's rows ({query.lastProgress})")
        add_file(source, "b.txt", later[:25])
        add_file(source, "c.txt", later[25:])
        produced = time.monotonic()
        expected = expected_rows(first + later)
        wait_until(lambda: sum(table_rows(spark, table, query).values())
                   >= sum(expected.values()), timeout,
                   message=lambda: f"the rows of files added later ({query.lastProgress})")
        latency = time.monotonic() - produced
        seen = table_rows(spark, table, query)
        handle.kill()
        state = handle.wait(timeout=120)
        query.processAllAvailable()  # whatever the sink committed last
        final = table_rows(spark, table, query)
    finally:
        if query is not None:
            query.stop()
        handle.kill()
    return {"state": state, "seen": seen, "final": final, "expected": expected,
            "latency_secs": latency, "secs": time.monotonic() - started}
