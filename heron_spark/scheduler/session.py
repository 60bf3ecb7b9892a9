"""What kind of SparkSession ``submit`` got, and what it can tell about its cluster. Driver only.

A *classic* session owns a SparkContext (and a JVM) in this process. A *Spark Connect* session
(``SparkSession.builder.remote("sc://...")``, ``spark.api.mode=connect``, Databricks
serverless) is a gRPC client of a remote server: no SparkContext, no RDDs, no JVM here. What
both offer is the DataFrame API, including barrier ``mapInArrow``, session confs and job tags.
Everything the scheduler needs that differs between the two lives here.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading

log = logging.getLogger(__name__)
_LOCAL = re.compile(r"^local(?:\[(\*|\d+)(?:,\s*\d+)?\])?$")
CONNECT_EXTRAS = "pip install 'pyspark[connect]'"
LOG4J2_FILE = "log4j2.properties"

# Counts the CPUs of the Python worker that runs it. Travels by value (compiled into a namespace
# that is no importable module) because the server's workers may not import heron_spark.
_CPU_PROBE_SOURCE = '''
def cpus(batches):
    import os
    import pyarrow as pa
    for _batch in batches:
        pass
    yield pa.RecordBatch.from_pydict({"cpus": [os.cpu_count() or 1]})
'''


def log4j2_conf() -> dict[str, str]:
    """Return the Spark setting that points a new driver JVM at heron_spark's log4j2 file.

    The file is ``log4j2.properties`` in ``$HERON_SPARK_CONF_DIR``, else in the checkout's
    ``conf/`` (it quiets Spark's start-up warnings; errors still show); {} when neither has one.
    Only a session ``submit`` builds uses it: the JVM reads the option when it starts.
    """
    from heron_spark.config import CONF_DIR_ENV, default_conf_dir

    for folder in (os.environ.get(CONF_DIR_ENV), default_conf_dir()):
        path = os.path.join(str(folder), LOG4J2_FILE) if folder else None
        if path and os.path.isfile(path):
            return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{path}"}
    return {}


def is_connect(spark) -> bool:
    """Return True when ``spark`` is a Spark Connect session (a client of a remote server).

    Tells by the class's module, so a classic process never imports the Connect client (and
    its gRPC dependencies) to ask.
    """
    session = getattr(spark, "session", spark)  # the tests' LiveSpark wraps the session
    return type(session).__module__.startswith("pyspark.sql.connect")


def is_local_master(master: str) -> bool:
    """Return True for ``local``, ``local[N]``, ``local[*]`` and ``local[N,F]``."""
    return bool(_LOCAL.match(master))


def master(spark) -> str:
    """Return the Spark master URL the session's jobs run on (the server's, under Connect)."""
    if is_connect(spark):
        return spark.conf.get("spark.master", "") or ""
    return spark.sparkContext.master


def driver_host(spark) -> str:
    """Return the address of this process that Spark's executors can reach.

    Classic: ``spark.driver.host``, the address the executors already reach the driver at.
    Connect: the local address this client uses to reach the Connect server (the server's
    executors reach the client back only if the network lets them; ``heron.tmaster.host``
    overrides it).
    """
    if not is_connect(spark):
        return spark.sparkContext.getConf().get("spark.driver.host", "127.0.0.1")
    server = str(spark.client.host).strip("[]")
    try:
        with socket.socket(socket.AF_INET6 if ":" in server else socket.AF_INET,
                           socket.SOCK_DGRAM) as probe:
            probe.connect((server, 9))  # UDP: picks the route, sends nothing
            return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def available_slots(spark) -> int | None:
    """Return how many tasks the cluster can run at once right now; None when unknown.

    Classic: ``local[N]``'s N, else the scheduler's own count of concurrent task slots.
    Connect (no SparkContext to ask): ``local[N]``'s N; ``local[*]``: the server's CPU count,
    asked with a one-task job; a cluster: ``spark.executor.instances`` x
    (``spark.executor.cores`` / ``spark.task.cpus``) when the server's conf sets them,
    otherwise None (Spark's own barrier check then refuses a stage larger than the cluster).
    """
    url = master(spark)
    match = _LOCAL.match(url)
    if match:
        cores = match.group(1)
        if cores is None:
            return 1
        if cores != "*":
            return int(cores)
        return _server_cpus(spark) if is_connect(spark) else os.cpu_count() or 1
    if not is_connect(spark):
        jsc = spark.sparkContext._jsc.sc()
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    conf = spark.conf
    instances = conf.get("spark.executor.instances", None)
    cores = conf.get("spark.executor.cores", None)
    if not instances or not cores:
        return None
    task_cpus = int(conf.get("spark.task.cpus", "1") or 1)
    return int(instances) * (int(cores) // max(task_cpus, 1))


def _server_cpus(spark) -> int:
    namespace: dict = {"__name__": "heron_spark_cpu_probe"}
    exec(compile(_CPU_PROBE_SOURCE, "<heron_spark cpu probe>", "exec"), namespace)  # noqa: S102
    rows = spark.range(1, numPartitions=1).mapInArrow(namespace["cpus"], "cpus long").collect()
    return int(rows[0]["cpus"])


def run_one_task(spark, func, schema: str, tag: str, timeout_secs: float) -> list:
    """Run ``func`` as a one-task ``mapInArrow`` job tagged ``tag``; return its rows.

    Driver or Connect client only. The job is interrupted through its tag (tags are per
    thread: only this thread's next job carries it) if it has not returned after
    ``timeout_secs``, for example when the cluster has no free slot. Errors of the job raise.
    """
    spark.addTag(tag)
    timer = threading.Timer(timeout_secs, _interrupt, (spark, tag))
    timer.daemon = True
    timer.start()
    try:
        return spark.range(1, numPartitions=1).mapInArrow(func, schema).collect()
    finally:
        timer.cancel()
        try:
            spark.removeTag(tag)
        except Exception:  # noqa: BLE001 - a closed session has no tags to remove
            pass


def _interrupt(spark, tag: str) -> None:
    try:
        spark.interruptTag(tag)
    except Exception:  # noqa: BLE001 - the session may be gone; the job then is too
        pass
