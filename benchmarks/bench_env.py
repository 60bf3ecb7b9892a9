"""Set up a benchmark's driver before Spark starts: import paths, environment, a local session.

Shared by ``word_count.py`` and ``chaos_soak.py``, which import it first (it is found next to
them) and call ``prepare`` before importing heron_spark: the Spark JVM, its Python workers and
every process of the topology inherit the environment the driver has when Spark starts, so the
folders they import user code from must be on ``PYTHONPATH`` by then.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
TESTS_DIR = REPO_ROOT / "tests"
LIVE = ("STARTING", "RUNNING")  # a topology handle's statuses while its processes run


def prepare(*extra_dirs: Path) -> None:
    """Set up this process so a benchmark's topology runs from the repository.

    Put the repository root and ``extra_dirs`` first on ``sys.path`` and ``PYTHONPATH`` (the
    topology's processes import from them), bind Spark to 127.0.0.1 unless ``SPARK_LOCAL_IP``
    is set, and run Spark's Python workers with this interpreter.
    """
    paths = [str(REPO_ROOT)] + [str(d) for d in extra_dirs]
    for path in paths:
        if path not in sys.path:
            sys.path.insert(0, path)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        paths + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                 if p and p not in paths])
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable


def cluster_session(master: str, app_name: str, cores_max: int):
    """Return a driver's session on the standalone cluster at ``master`` (``spark://...``).

    The driver binds and advertises ``SPARK_LOCAL_IP``; one core per executor, at most
    ``cores_max``; logging errors only (``tests/cluster_support``'s driver session).
    """
    if str(TESTS_DIR) not in sys.path:
        sys.path.insert(0, str(TESTS_DIR))
    from cluster_support import cluster_driver_session

    spark = cluster_driver_session(master, app_name, os.environ["SPARK_LOCAL_IP"], cores_max)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def local_session(master: str, app_name: str, conf: dict[str, str] | None = None):
    """Return a Spark session on ``master`` bound to 127.0.0.1, without UI, logging errors only.

    ``conf`` adds Spark settings.
    """
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.driver.host", "127.0.0.1").config("spark.ui.enabled", "false"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
