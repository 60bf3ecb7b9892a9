"""A session submit() creates shows the topology in Spark's own tools, with no user flags.

In one fresh Spark driver (a subprocess: the tests' shared session runs without a UI and
``submit`` reuses a running session as is): the JVM bridge loads by default
(``heron.spark.jvm.bridge=auto``), the topology's metrics appear on the driver UI's
``/metrics/prometheus/`` endpoint, the console progress bar is off, and each submission of the
barrier stage carries its own job description, read back from Spark's REST API
(``/api/v1/applications/<id>/jobs``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from heron_spark.scheduler.spark_scheduler import job_group

pytestmark = pytest.mark.spark

SCRIPT = textwrap.dedent(r"""
    import json, sys, urllib.request
    from urllib.parse import urlparse

    repo, tests, out = sys.argv[1:4]
    sys.path[:0] = [repo, tests]
    import resilience_topologies as topo
    from examples.word_count import build, expected_counts
    from heron_spark import submit
    from heron_spark.testing import COLLECT_DIR, wait_until
    from pyspark.sql import SparkSession

    def get(url):
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.read().decode()

    handle = submit(build(200), master="local[4]", conf={COLLECT_DIR: out + "/wc"})
    assert handle.wait(240) == "FINISHED"
    spark = SparkSession.getActiveSession()
    sc = spark.sparkContext
    print("CONSOLE_PROGRESS", sc.getConf().get("spark.ui.showConsoleProgress"))
    base = f"http://127.0.0.1:{urlparse(sc.uiWebUrl).port}"

    words = sum(expected_counts(200, 2).values())
    def gauge():
        text = get(base + "/metrics/prometheus/")
        return [line for line in text.splitlines()
                if "HeronBridgePlugin_word_count_count_execute_count" in line
                and not line.startswith("#")]
    print("GAUGE", wait_until(gauge, 120, interval=0.1, message="the execute-count gauge")[0])
    print("WORDS", words)

    # A resubmission is a new Spark job with its own description.
    forever = submit(topo.numbers("forever", __import__("pathlib").Path(out) / "n", count=-1,
                                  sleep_ms=1),
                     conf={"heron.stage.resubmit.backoff.secs": 0.2})
    assert forever.wait_running(120)
    forever._run.recover("asked by the test")
    wait_until(lambda: forever.status_detail()["generation"] == 1
               and len(forever.status_detail()["registered"]) == 2, 120, interval=0.1,
               message="generation 1 to register")
    app = json.loads(get(base + "/api/v1/applications"))[0]["id"]
    jobs = json.loads(get(f"{base}/api/v1/applications/{app}/jobs"))
    print("JOBS", json.dumps([{"group": j.get("jobGroup"), "description": j.get("description"),
                               "status": j["status"]} for j in jobs]))
    forever.kill()
    spark.stop()
""")


@pytest.mark.tmaster_in_driver("the JVM bridge's gauges are copied from the driver's TMaster; "
                               "container placement logs that it has none")
def test_submit_session_shows_topology_in_spark_ui_rest_and_prometheus(tmp_path):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, repo, os.path.join(repo, "tests"),
                           str(tmp_path / "out")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=400)
    output = f"--- stdout\n{proc.stdout[-5000:]}\n--- stderr\n{proc.stderr[-5000:]}"
    assert proc.returncode == 0, output
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert lines["CONSOLE_PROGRESS"] == "false", output
    # metrics_<app>_driver_..._HeronBridgePlugin_word_count_count_execute_count... <value>
    assert float(lines["GAUGE"].rsplit(" ", 1)[1]) == float(lines["WORDS"]), output
    jobs = json.loads(lines["JOBS"])
    descriptions = {job["group"]: [] for job in jobs}
    for job in sorted(jobs, key=lambda j: j["description"] or ""):
        descriptions[job["group"]].append(job["description"])
    assert descriptions[job_group("word_count")] == [
        "heron_spark topology word_count \u2014 STARTING, generation 0, 2 containers"], output
    assert descriptions[job_group("forever")] == [
        "heron_spark topology forever \u2014 RESUBMITTED, generation 1, 2 containers",
        "heron_spark topology forever \u2014 STARTING, generation 0, 2 containers"], output
