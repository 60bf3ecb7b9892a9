"""The JVM bridge: the jar builds once and is reused; in a fresh Spark driver its listener sees a
failed job and its plugin's gauge shows up on Spark's Prometheus endpoint.

The Spark part runs in a subprocess: ``spark.jars`` / ``spark.plugins`` only apply to a new
SparkContext, and the other tests of this process share one that is already running.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from heron_spark.errors import ConfigError, HeronSparkError
from heron_spark.scheduler import jvm_bridge

MARKER = "JVM_BRIDGE_OK"

SCRIPT = textwrap.dedent(r"""
    import json, sys, urllib.request
    from urllib.parse import urlparse
    from pyspark.sql import SparkSession
    from heron_spark.scheduler import jvm_bridge
    from heron_spark.testing import wait_until

    conf = json.loads(sys.argv[1])
    builder = SparkSession.builder.master("local[1]").appName("heron_spark-jvm-bridge-test")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        # many in one call, NaN included (json's NaN token)
        assert jvm_bridge.set_gauges(spark, {"topology.tuples_processed": 42.0, "topology.a.b": 7,
                                             "topology.a.mean": float("nan")}) == 3
        values = dict(spark.sparkContext._jvm.org.heronspark.bridge.HeronBridgePlugin.gauges())
        assert values["topology.a.b"] == 7.0, values
        assert values["topology.a.mean"] != values["topology.a.mean"], values  # NaN

        def boom(x):
            raise RuntimeError("heron_spark bridge test failure")

        try:
            spark.sparkContext.parallelize([1], 1).map(boom).collect()
        except Exception:
            pass
        else:
            raise AssertionError("the failing job did not fail")

        # Listener events arrive asynchronously on Spark's listener bus: poll, with a deadline.
        events = []

        def failed_job_end():
            events.extend(jvm_bridge.drain_events(spark))
            return any(e["type"] == "job_end" and not e["succeeded"] for e in events)

        wait_until(failed_job_end, 120, interval=0.1,
                   message=lambda: f"a failed job_end event; got {events}")
        failed = [e for e in events if e["type"] == "job_end"][0]
        assert "heron_spark bridge test failure" in failed["result"], failed
        assert isinstance(failed["job"], int) and failed["time_ms"] > 0, failed
        assert jvm_bridge.dropped_events(spark) == 0

        # The actually bound port (Spark moves on if the chosen one was taken meanwhile).
        port = urlparse(spark.sparkContext.uiWebUrl).port
        url = f"http://127.0.0.1:{port}/metrics/prometheus"
        text = ""

        def gauge_lines():
            global text
            try:
                with urllib.request.urlopen(url, timeout=30) as resp:
                    text = resp.read().decode()
            except OSError as exc:
                text = repr(exc)
            return [l for l in text.splitlines()
                    if "tuples_processed" in l and not l.startswith("#")
                    and float(l.rsplit(" ", 1)[1]) == 42.0]

        lines = wait_until(gauge_lines, 120, interval=0.2,
                           message=lambda: f"a tuples_processed gauge at {url}:\n{text}")
        print(lines[0])
        print("MARKER")
    finally:
        spark.stop()
""").replace("MARKER", MARKER)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_jar_is_built_once_and_reused(tmp_path):
    cache = tmp_path / "cache"
    jar = jvm_bridge.build_jar(cache)
    assert jar.is_file() and jar.parent == cache and jar.name.startswith("heron_spark_bridge-")
    mtime = jar.stat().st_mtime_ns
    again = jvm_bridge.build_jar(cache)
    assert again == jar and again.stat().st_mtime_ns == mtime
    assert [p.name for p in cache.iterdir()] == [jar.name]  # no leftover partial files


def test_missing_javac_or_sources_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(jvm_bridge.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError, match="javac"):
        jvm_bridge.build_jar(tmp_path / "cache")
    monkeypatch.setattr(jvm_bridge, "sources_dir", lambda: tmp_path / "nowhere")
    with pytest.raises(HeronSparkError, match="Java sources"):
        jvm_bridge.build_jar(tmp_path / "cache")


@pytest.mark.spark
def test_events_and_gauges_cross_the_bridge(tmp_path):
    jar = jvm_bridge.build_jar(tmp_path / "cache")
    conf = dict(jvm_bridge.spark_conf(jar))
    conf.update({
        "spark.ui.enabled": "true",
        "spark.ui.port": str(_free_port()),
        "spark.metrics.conf.*.sink.prometheusServlet.class":
            "org.apache.spark.metrics.sink.PrometheusServlet",
        "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
    })
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(conf)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    output = f"--- stdout\n{proc.stdout[-5000:]}\n--- stderr\n{proc.stderr[-5000:]}"
    assert proc.returncode == 0, output
    assert MARKER in proc.stdout, output
    assert "HeronBridgePlugin_topology_tuples_processed" in proc.stdout, output


TOPOLOGY_SCRIPT = textwrap.dedent(r"""
    import sys
    sys.path.insert(0, sys.argv[1])
    from examples.word_count import build
    from heron_spark import submit
    from heron_spark.testing import COLLECT_DIR
    from pyspark.sql import SparkSession

    handle = submit(build(200), master="local[2]",
                    conf={"heron.spark.jvm.bridge": "true", COLLECT_DIR: sys.argv[2]})
    assert handle.wait(240) == "FINISHED"
    spark = SparkSession.getActiveSession()
    gauges = spark.sparkContext._jvm.org.heronspark.bridge.HeronBridgePlugin.gauges()
    print("GAUGE", gauges.get("word_count.count.execute-count"))
    spark.stop()
""")


@pytest.mark.spark
@pytest.mark.tmaster_in_driver("the JVM bridge's gauges are copied from the driver's TMaster; "
                               "container placement logs that it has none")
def test_submit_publishes_topology_metrics_as_spark_gauges(tmp_path):
    """With heron.spark.jvm.bridge on, the TMaster's metrics become Spark driver gauges."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", TOPOLOGY_SCRIPT, repo, str(tmp_path / "c")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    from examples.word_count import expected_counts

    words = sum(expected_counts(200, 2).values())
    assert f"GAUGE {float(words)}" in out.stdout, out.stdout + out.stderr[-2000:]


def test_auto_goes_on_without_the_bridge_and_true_fails_loudly(tmp_path, monkeypatch, caplog):
    """heron.spark.jvm.bridge: "auto" (the default) logs one line and goes on when the bridge
    cannot be built (no javac here); "true" raises; "false" never tries."""
    import logging

    from heron_spark.config import SPARK_JVM_BRIDGE, SystemConfig, build_system_config
    from heron_spark.scheduler import spark_session

    assert SystemConfig().spark_jvm_bridge == "auto"
    with monkeypatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))  # no cached jar
        patch.setattr(jvm_bridge.shutil, "which", lambda name: None)
        with caplog.at_level(logging.INFO, logger=spark_session.__name__):
            assert spark_session.bridge_conf("auto") == {}
        [record] = [r for r in caplog.records if "heron.spark.jvm.bridge" in r.getMessage()]
        assert record.levelno == logging.INFO and "javac" in record.getMessage()
        with pytest.raises(ConfigError) as info:
            spark_session.bridge_conf("true")
        assert info.value.key == SPARK_JVM_BRIDGE
        assert spark_session.bridge_conf("false") == {}
    with monkeypatch.context() as patch:  # as in a process whose Spark JVM has not started
        from pyspark import SparkContext

        patch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
        patch.setattr(SparkContext, "_gateway", None)
        assert spark_session.bridge_conf("auto") == jvm_bridge.spark_conf(jvm_bridge.build_jar())
    assert build_system_config({SPARK_JVM_BRIDGE: True}).spark_jvm_bridge == "true"
    assert build_system_config({SPARK_JVM_BRIDGE: "Off"}).spark_jvm_bridge == "false"
    with pytest.raises(ConfigError):
        build_system_config({SPARK_JVM_BRIDGE: "maybe"})


def test_a_running_jvm_cannot_take_the_bridge(monkeypatch):
    """Under spark-submit (or after an earlier SparkContext) the jar would reach the executors
    but not the driver's class path: auto goes on without the bridge, true says how to add it.
    ``test_shipping``'s plain spark-submit run is this case for real."""
    from heron_spark.scheduler import spark_session

    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    with pytest.raises(ConfigError, match="--jars"):
        jvm_bridge.check_jvm_not_started()
    assert spark_session.bridge_conf("auto") == {}
    with pytest.raises(ConfigError, match="spark-submit"):
        spark_session.bridge_conf("true")
