"""A running topology's stream in a Structured Streaming query, in a classic Spark session.

The topology (``stream_topology``: FileSource → words → ParquetSink, at-least-once) runs on
the test's own session; ``spark.readStream.format("heron_spark")`` names it by topology,
component and stream, into a memory sink on the same session. The table must hold exactly the
rows of every line (each once), those of files added after the query started included; once
the topology is killed no process of it is left. The Spark Connect variant is
``test_spark_source_connect.py``.
"""

from __future__ import annotations

import pytest
import stream_topology as st

import fault_support as faults
from heron_spark import register_data_source
from heron_spark.testing import wait_until

pytestmark = pytest.mark.spark
WAIT_SECS = 300  # generous: the test machine may be loaded


def test_a_running_topology_s_stream_reaches_a_streaming_query_once(spark, tmp_path, hconf):
    session = spark.session
    register_data_source(session)  # an editable install hides pyspark_heron_spark from Spark
    result = st.stream_while_running(session, "sql-stream", tmp_path, hconf, "topology_stream",
                                     WAIT_SECS)
    print(f"classic: rows of files added while the query ran visible after "
          f"{result['latency_secs']:.1f} s; test {result['secs']:.0f} s")
    assert result["seen"] == result["expected"]
    assert result["final"] == result["expected"]  # nothing more after the kill
    assert result["state"] == "KILLED"
    wait_until(lambda: not faults.processes_under(tmp_path / "work"), 60,
               message=lambda: f"no process left: {faults.processes_under(tmp_path / 'work')}")
    assert not session.streams.active
