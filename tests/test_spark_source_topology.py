"""A running topology's stream in a Structured Streaming query, in a classic Spark session.

The topology (``stream_topology``: FileSource → words → ParquetSink, at-least-once) runs on
the test's own session; ``spark.readStream.format("heron_spark")`` names it by topology,
component and stream, into a memory sink on the same session. The table must hold exactly the
rows of every line (each once), those of files added after the query started included; once
the topology is killed no process of it is left. The Spark Connect variant is
``test_spark_source_connect.py``.
"""

from __future__ import annotations

import time

import pytest
import stream_topology as st

import fault_support as faults
from heron_spark import register_data_source
from heron_spark.io.parquet_store import CommitLog
from heron_spark.scheduler.submit import submit
from heron_spark.testing import wait_until

pytestmark = pytest.mark.spark
WAIT_SECS = 300  # generous: the test machine may be loaded


def test_a_running_topology_s_stream_reaches_a_streaming_query_once(spark, tmp_path, hconf):
    session = spark.session
    register_data_source(session)  # an editable install hides pyspark_heron_spark from Spark
    folder, out, name = tmp_path / "in", tmp_path / "out", "sql-stream"
    first = st.lines_of("a", 40)
    st.add_file(folder, "a.txt", first)
    started = time.monotonic()
    handle = submit(st.build(name, folder, out), spark=session, conf=hconf)
    query = None
    try:
        assert handle.wait_running(timeout=120), handle.status_detail()
        wait_until(lambda: CommitLog.open(str(out)).names(), WAIT_SECS,
                   message="the sink's first commit (the stream's schema comes from it)")
        query = st.start_query(session, name, hconf["heron.statemgr"], "topology_stream",
                               tmp_path / "reader-checkpoint")
        wait_until(lambda: st.table_rows(session, "topology_stream", query)
                   == st.expected_rows(first), WAIT_SECS,
                   message=lambda: f"a.txt's rows ({query.lastProgress})")
        later = st.lines_of("b", 25) + st.lines_of("c", 15)
        st.add_file(folder, "b.txt", later[:25])
        st.add_file(folder, "c.txt", later[25:])
        produced = time.monotonic()
        expected = st.expected_rows(first + later)
        wait_until(lambda: sum(st.table_rows(session, "topology_stream", query).values())
                   >= sum(expected.values()), WAIT_SECS,
                   message=lambda: f"the rows of files added later ({query.lastProgress})")
        latency = time.monotonic() - produced
        assert st.table_rows(session, "topology_stream", query) == expected
        handle.kill()
        assert handle.wait(timeout=120) == "KILLED"
        query.processAllAvailable()  # whatever the sink committed last: nothing new
        assert st.table_rows(session, "topology_stream", query) == expected
        print(f"classic: rows of files added while the query ran visible after {latency:.1f} s;"
              f" test {time.monotonic() - started:.0f} s")
    finally:
        if query is not None:
            query.stop()
        handle.kill()
        handle.wait(timeout=120)
    wait_until(lambda: not faults.processes_under(tmp_path / "work"), 60,
               message=lambda: f"no process left: {faults.processes_under(tmp_path / 'work')}")
    assert not session.streams.active
