"""The SparkSession ``submit`` runs on: made here when none is given, checked when one is.

A Spark adapter, driver (or Connect client) only: which session (the given one, the active one,
or a new one with heron_spark's settings: Prometheus metrics, no console progress bar, the JVM
bridge as ``heron.spark.jvm.bridge`` asks), whether a Connect client has the packages a stage
needs, and whether the JVM bridge is loaded.
"""

from __future__ import annotations

import logging
import os
import sys

from heron_spark.config import SystemConfig
from heron_spark.errors import ConnectExtrasError, HeronSparkError
from heron_spark.scheduler.session import is_connect, log4j2_conf

log = logging.getLogger(__name__)


def session_for(spark, master: str | None, system: SystemConfig):
    """Return the session to run on: ``spark``, the active one, or a new one on ``master``."""
    from pyspark.sql import SparkSession

    existing = spark if spark is not None else SparkSession.getActiveSession()
    if existing is not None:
        if is_connect(existing):
            check_connect_client()
            return existing
        if system.spark_jvm_bridge == "true" and not bridge_loaded(existing):
            log.warning("heron.spark.jvm.bridge applies only to a session submit() creates; "
                        "add jvm_bridge.spark_conf(jvm_bridge.build_jar()) to your session")
        return existing
    # Executors run the driver's interpreter unless told otherwise (a venv's python, not PATH's).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("heron_spark")
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: embedded default
        builder = builder.master("local[*]")
    if os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_CONNECT_MODE_ENABLED"):
        try:  # pyspark makes a Connect session here: it needs the connect extras
            return builder.getOrCreate()
        except ImportError as exc:
            raise ConnectExtrasError(exc.name, str(exc)) from exc
    for key, value in {**SESSION_CONF, **log4j2_conf(),
                       **bridge_conf(system.spark_jvm_bridge)}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def check_connect_client() -> None:
    """Raise ConnectExtrasError if the Connect client lacks a package the stage needs."""
    try:
        from pyspark.sql.connect import utils

        for check in ("require_minimum_pandas_version", "require_minimum_pyarrow_version",
                      "require_minimum_grpc_version", "require_minimum_grpcio_status_version",
                      "require_minimum_googleapis_common_protos_version",
                      "require_minimum_zstandard_version"):
            getattr(utils, check, lambda: None)()
    except ImportError as exc:
        raise ConnectExtrasError(exc.name, str(exc).splitlines()[0]) from exc


# Set on a session submit() creates: topology gauges (jvm_bridge) on the driver UI's
# /metrics/prometheus/ (Spark's PrometheusServlet sink), executor metrics on
# /metrics/executors/prometheus, and no console progress bar drawing over submit's own output.
SESSION_CONF = {
    "spark.ui.prometheus.enabled": "true",
    "spark.metrics.conf.*.sink.prometheusServlet.class":
        "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    "spark.ui.showConsoleProgress": "false",
}


def bridge_conf(mode: str) -> dict[str, str]:
    """Return the Spark settings that load the JVM bridge, as ``mode`` asks.

    "true" fails loudly if it cannot be built, "auto" goes on without it (one info line),
    "false" never tries.
    """
    if mode == "false":
        return {}
    from heron_spark.scheduler import jvm_bridge

    try:
        jar = jvm_bridge.build_jar()
        jvm_bridge.check_jvm_not_started()
        return jvm_bridge.spark_conf(jar)
    except (HeronSparkError, OSError) as exc:
        if mode == "true":
            raise
        log.info("Spark metrics of the topology are off (heron.spark.jvm.bridge=auto could "
                 "not load the JVM bridge: %s)", str(exc).splitlines()[0])
        return {}


def bridge_loaded(spark) -> bool:
    """Return whether ``spark`` loaded the JVM bridge (a classic session only)."""
    from heron_spark.scheduler import jvm_bridge

    return jvm_bridge.loaded(spark)


def connect_requested(spark) -> bool:
    """Return whether submit runs on a Spark Connect session (without making one)."""
    if spark is not None:
        return is_connect(spark)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return is_connect(active)
    return bool(os.environ.get("SPARK_REMOTE") or os.environ.get("SPARK_CONNECT_MODE_ENABLED"))
