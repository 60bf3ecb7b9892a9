"""``readStream.format("heron_spark")`` from a Spark Connect client, on a real Connect server.

The client (``spark_source_connect_client.py``, its own process: Connect session only) resolves
the stream by topology, component and stream from a stored topology, never registers the
source (the server's workers find ``pyspark_heron_spark``), and must see every committed row
once, including rows committed after its query started. A second client
(``connect_client.py stream``) submits a topology itself and streams its rows while it runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from connect_support import REPO_ROOT, TESTS_DIR, run_client, wait_nothing_left

pytestmark = pytest.mark.connect


def test_a_connect_client_streams_a_topology_s_committed_rows(connect_server, tmp_path):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PYSPARK_GATEWAY")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(TESTS_DIR)])
    proc = subprocess.run([sys.executable, str(TESTS_DIR / "spark_source_connect_client.py"),
                           connect_server.url, str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=420, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, (proc.stdout[-3000:], proc.stderr[-6000:])
    result = json.loads(lines[-1])
    print(f"Connect: a committed batch reached the query after {result['latency_secs']:.2f} s")
    assert result["connect"].startswith("pyspark.sql.connect")
    assert (result["first"], result["after"]) == (12 * 7, 15 * 7)
    assert result["first_ok"] and result["after_ok"]


def test_a_connect_client_streams_the_rows_of_a_topology_it_submitted(connect_server, tmp_path):
    """The issue's done: a running topology's rows in a Connect session's streaming query."""
    result = run_client(connect_server, "stream", tmp_path, timeout=600)
    print(f"Connect: rows of files added while the query ran visible after "
          f"{result['latency_secs']:.1f} s; client {result['secs']:.0f} s")
    assert result["connect"].startswith("pyspark.sql.connect")
    assert (result["rows"], result["repeated"]) == (result["expected"], [])
    assert result["exact"] and result["final_exact"]
    assert result["state"] == "KILLED"
    wait_nothing_left(connect_server, tmp_path / "work", timeout=60)


def test_from_dataframe_under_connect_is_exact(connect_server, tmp_path):
    """``from_dataframe(spark.range(...))`` from a Connect client: every row once, exactly."""
    result = run_client(connect_server, "dataframe", tmp_path, timeout=600, rows=3000)
    print(f"Connect: from_dataframe topology of 3000 rows ran in {result['secs']:.1f} s")
    assert result["state"] == "FINISHED"
    assert result["fields"] == ["id", "triple", "k"]
    assert result["parquet"] == result["expected"]
    assert result["heron_spark"] == result["expected"]
