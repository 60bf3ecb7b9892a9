"""Preflight: check, with one short Spark job, that executors can run the topology at all.

A worker Python that cannot import heron_spark, its dependencies or the user's modules fails
the same way every time; found inside the barrier stage it would be resubmitted until the
budget runs out and surface as pages of Java traces. Found here, before the TMaster starts, it
is one ``WorkerEnvironmentError`` naming the executors' Python and the fix. The probe is a
plain Python UDF over ``spark.range`` (no RDD, so it runs from a Spark Connect session too; no
Arrow, so a bare worker Python without pyarrow still reports what it lacks). Driver only.
"""

from __future__ import annotations

import json
import logging

from heron_spark.errors import TopologyValueError, WorkerEnvironmentError
from heron_spark.scheduler.session import is_connect

log = logging.getLogger(__name__)

# The probe runs on executors that may not be able to import heron_spark, so it must travel by
# value: it is compiled into a namespace that is no importable module, which makes cloudpickle
# ship its code instead of a reference to this module.
_PROBE_SOURCE = '''
def probe(_row_id, modules=MODULES, definition=DEFINITION):
    import json

    return json.dumps(examine(modules, definition))


def examine(modules, definition):
    import importlib
    import pickle
    import socket
    import sys

    found = {"python": sys.executable, "version": sys.version.split()[0],
             "host": socket.gethostname(), "problem": None, "missing": None,
             "heron_spark": None}
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception as exc:
            found["problem"] = f"import {name}: {type(exc).__name__}: {exc}"
            found["missing"] = getattr(exc, "name", None) or name
            return found
        if name == "heron_spark":
            found["heron_spark"] = getattr(module, "__version__", "?")
    try:
        from heron_spark import heronpy_alias

        heronpy_alias.install()  # user modules may import heronpy; it may be shipped, not installed
        plan = pickle.loads(definition)
    except Exception as exc:
        found["problem"] = f"loading the topology: {type(exc).__name__}: {exc}"
        found["missing"] = getattr(exc, "name", None)
        return found
    try:  # the classes its config names: serializer, auto task hooks
        from heron_spark.api.serializer import serializer_class
        from heron_spark.api.task_hook import auto_hook_classes

        for decl in plan.components.values():
            serializer_class(decl.config, decl.name)
            auto_hook_classes(decl.config, decl.name)
    except Exception as exc:
        found["problem"] = f"loading the topology's configured classes: {exc}"
        found["missing"] = getattr(exc.__cause__ or exc, "name", None)
        return found
    try:  # the components given by class path, imported here as their tasks will
        plan.resolve_classes()
    except Exception as exc:
        if getattr(exc, "kind", None) == "class":  # it imports, but is no Spout / Bolt
            found["invalid"] = {"component": exc.component, "problem": exc.problem,
                                "fix": exc.fix}
            return found
        found["problem"] = f"loading the topology's components: {getattr(exc, 'detail', exc)}"
        found["missing"] = getattr(exc, "missing", None)
        found["component"] = getattr(exc, "component", None)
        found["path"] = getattr(exc, "path", None)
    return found
'''

# What a container imports: the package, its runtime roles, and through them pyarrow and
# protobuf; cloudpickle loads the topology's definition, kazoo the ZooKeeper state manager
# (both imported lazily by the roles).
_MODULES = ("heron_spark", "heron_spark.container.task", "heron_spark.stmgr.server",
            "heron_spark.instance.runtime", "heron_spark.metrics.manager", "cloudpickle",
            "kazoo.client")


def _probe(definition: bytes):
    namespace = {"__name__": "heron_spark_preflight_probe", "MODULES": _MODULES,
                 "DEFINITION": definition}
    exec(compile(_PROBE_SOURCE, "<heron_spark preflight>", "exec"), namespace)  # noqa: S102
    return namespace["probe"]


def check_workers(spark, definition: bytes, tasks: int) -> list[dict]:
    """Run the probe in ``tasks`` tasks; return what each found (its Python, version and host).

    Raise WorkerEnvironmentError if any task cannot run a container.
    """
    from heron_spark._version import __version__

    connect = is_connect(spark)
    sc = None if connect else spark.sparkContext
    if sc is not None:
        previous = sc.getLocalProperty("spark.job.description")
        sc.setJobDescription("heron_spark preflight: can the executors' Python run the topology?")
    try:
        probe = _udf(connect)(_probe(definition), "string", useArrow=False)
        frame = spark.range(tasks, numPartitions=tasks)
        rows = frame.select(probe("id").alias("found")).collect()
        found = [json.loads(row["found"]) for row in rows]
    except Exception as exc:  # noqa: BLE001 - classified below; anything else re-raised
        problem = _python_failure(str(exc))
        if problem is None:
            raise
        python = _executor_python(spark, sc)
        raise WorkerEnvironmentError(problem, python=python, host=None, missing=None,
                                     connect=connect) from None
    finally:
        if sc is not None:
            sc.setJobDescription(previous)
    for result in found:
        invalid = result.get("invalid")
        if invalid:  # a class path only the executors import names no Spout / Bolt
            problem = f"{invalid['problem']} (found on executor host {result['host']})"
            raise TopologyValueError(problem, component=invalid["component"], kind="class",
                                     fix=invalid["fix"])
        if result["problem"] is not None:
            raise WorkerEnvironmentError(result["problem"], python=result["python"],
                                         host=result["host"], missing=result["missing"],
                                         connect=connect, component=result.get("component"),
                                         path=result.get("path"))
        if result["heron_spark"] != __version__:
            msg = (f"the executors import heron_spark {result['heron_spark']}, the driver "
                   f"{__version__}")
            raise WorkerEnvironmentError(msg, python=result["python"], host=result["host"],
                                         missing=None, connect=connect)
    log.debug("preflight: executors run %s", sorted({r["python"] for r in found}))
    return found


def _udf(connect: bool):
    """Return pyspark's ``udf`` for the session kind.

    ``pyspark.sql.functions.udf`` picks the kind by the process's environment, which says
    Connect only once a Connect session was built in it; ask for the Connect one by name.
    """
    if connect:
        from pyspark.sql.connect.functions.builtin import udf as connect_udf

        return connect_udf
    from pyspark.sql.functions import udf

    return udf


def _executor_python(spark, sc) -> str:
    """Return the Python Spark starts for the session's workers, as Spark chooses it."""
    if sc is not None:
        return getattr(sc, "pythonExec", None) or "python3"
    return (spark.conf.get("spark.pyspark.python", None)  # the Connect server's setting
            or spark.conf.get("spark.executorEnv.PYSPARK_PYTHON", None) or "python3")


def _python_failure(text: str) -> str | None:
    """Return the first Python-level error of a failed probe job, if the environment caused it.

    That is when the probe itself could not be loaded or run there; otherwise return None.
    """
    markers = ("ModuleNotFoundError", "ImportError", "Python in worker has different version",
               "PYTHON_VERSION_MISMATCH", "Cannot run program")
    for line in text.splitlines():
        stripped = line.strip()
        if any(marker in stripped for marker in markers):
            return stripped
    return None
