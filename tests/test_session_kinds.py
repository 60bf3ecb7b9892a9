"""Session-kind helpers of the scheduler, without Spark: fake classic and Connect sessions."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from heron_spark.errors import ClusterCapacityError, ConnectExtrasError, WorkerEnvironmentError
from heron_spark.scheduler import session
from heron_spark.scheduler.spark_scheduler import (ArrowContainer, check_slots, is_cancellation,
                                                   job_tag)


class _Conf:
    def __init__(self, values: dict) -> None:
        self.values = values

    def get(self, key, default=None):
        return self.values.get(key, default)


class FakeConnectSession:
    def __init__(self, **conf) -> None:
        self.conf = _Conf(conf)


FakeConnectSession.__module__ = "pyspark.sql.connect.session"


class FakeClassicSession:
    pass


def test_the_session_kind_is_told_by_its_class_module():
    assert session.is_connect(FakeConnectSession())
    assert not session.is_connect(FakeClassicSession())


@pytest.mark.parametrize(("conf", "slots"), [
    ({"spark.master": "local[3]"}, 3),
    ({"spark.master": "local"}, 1),
    ({"spark.master": "local[2,4]"}, 2),
    ({"spark.master": "spark://h:7077", "spark.executor.instances": "3",
      "spark.executor.cores": "4", "spark.task.cpus": "2"}, 6),
    ({"spark.master": "yarn"}, None),  # a Connect client cannot count them: unknown
])
def test_a_connect_session_counts_slots_from_the_servers_conf(conf, slots):
    assert session.available_slots(FakeConnectSession(**conf)) == slots


def test_the_slot_check_refuses_a_small_local_master_and_passes_an_unknown_cluster():
    with pytest.raises(ClusterCapacityError) as caught:
        check_slots(FakeConnectSession(**{"spark.master": "local[2]"}), 3, 0)
    assert (caught.value.needed, caught.value.available, caught.value.master) == \
        (3, 2, "local[2]")
    check_slots(FakeConnectSession(**{"spark.master": "yarn"}), 50, 0)  # left to Spark


def test_connect_interrupts_and_closed_sessions_are_cancellations():
    assert is_cancellation(RuntimeError("[OPERATION_CANCELED] Operation has been canceled."))
    assert is_cancellation(RuntimeError("[INVALID_HANDLE.SESSION_CLOSED] The handle x"))
    assert not is_cancellation(RuntimeError("[PYTHON_EXCEPTION] boom"))
    assert job_tag("wc") == "heron_spark:wc"


def test_the_arrow_container_runs_the_task_once_and_returns_its_summary():
    calls = []

    def task(rows):
        calls.append(list(rows))
        yield {"container": 1, "stmgr_exit": 0}

    batches = [pa.RecordBatch.from_pydict({"id": [1]})]
    [out] = list(ArrowContainer(task)(iter(batches)))  # type: ignore[arg-type]
    assert calls == [[0]]
    assert out.schema.field("summary").type == pa.binary()
    assert pickle.loads(out.column(0)[0].as_py()) == {"container": 1, "stmgr_exit": 0}


def test_worker_environment_error_names_the_connect_fix():
    error = WorkerEnvironmentError("import heron_spark: ModuleNotFoundError", python="/usr/bin/py",
                                   host=None, missing="heron_spark", connect=True)
    assert error.connect and error.missing == "heron_spark"
    assert "spark.pyspark.python" in str(error)
    shipped = WorkerEnvironmentError("loading the topology: ModuleNotFoundError",
                                     python="/usr/bin/py", host="h", missing="mine",
                                     connect=True)
    assert "addArtifacts" in str(shipped)


def test_missing_connect_extras_is_an_import_error_naming_the_package():
    error = ConnectExtrasError("grpc", "No module named 'grpc'")
    assert isinstance(error, ImportError) and error.name == "grpc" and error.missing == "grpc"
    assert "pyspark[connect]" in str(error)
