"""Processes import only what they use: a per-tuple instance never imports pandas (about 45 MB
of RSS per process), the metrics manager never unpickles user code.

pyarrow imports pandas by itself (its pandas probe, ``to_numpy``, type inference); the
instance tests run a fresh interpreter, as an instance process starts, and look at
``sys.modules``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from heron_spark.wire import arrow_numpy

_SETUP = textwrap.dedent("""
    import sys
    from heron_spark import Bolt, BatchBolt, Grouping, Spout, TopologyBuilder
    from heron_spark.config import SystemConfig
    from heron_spark.instance import runtime
    from heron_spark.instance.shell import build_executor
    from heron_spark.plan.logical import build_logical_plan
    from heron_spark.plan.packing import pack
    from heron_spark.plan.view import PlanView
    from heron_spark.proto import stmgr_pb2
    from heron_spark.wire import frames, tuple_batch
    import numpy as np

    class Lines(Spout):
        outputs = ["line"]
        def next_tuple(self):
            pass

    class Split(Bolt):
        outputs = ["word"]
        def process(self, tup):
            for word in tup.values[0].split():
                self.emit([word], anchors=[tup])
            self.ack(tup)

    class Frames(BatchBolt):
        input_format = "pandas"
        outputs = ["word"]
        def process_frame(self, frame):
            self.emit_batch({"word": list(frame["line"])}, parents=np.arange(len(frame)))

    builder = TopologyBuilder("lean")
    lines = builder.add_spout("lines", Lines, par=1)
    bolt_class = Frames if sys.argv[1] == "batch" else Split
    split = builder.add_bolt("split", bolt_class, par=1, inputs={lines: Grouping.SHUFFLE})
    builder.add_bolt("sink", Split, par=2, inputs={split: Grouping.fields("word")})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    logical = build_logical_plan(builder.build())
    view = PlanView(logical, pack(logical))
    runtime.prepare_arrow(view, "split")
    sent = []
    executor = build_executor(view, view.component_tasks["split"][0], SystemConfig(), sent.append)
    executor.offer(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
        start=stmgr_pb2.StartProcessing(generation=0))))
    executor.turn(0.0)
    batch = tuple_batch.build(["line"], [("a b c",), ("b c d",)] * 2000)
    batch = tuple_batch.with_roots(batch, np.arange(1, 4001, dtype=np.uint64),
                                   np.ones(4000, dtype=np.int64))
    batch = tuple_batch.with_keys(batch, np.arange(7, 4007, dtype=np.uint64))
    src, dest = view.component_tasks["lines"][0], view.component_tasks["split"][0]
    executor.offer(frames.DATA, frames.data_frame(
        frames.TUPLES, src, dest, batch.num_rows, b"default", tuple_batch.encode_batch(batch)))
    executor.turn(1.0)
    executor.end_turn(2.0, force=True)
    assert executor.executed == 4000, executor.executed
    assert sent, "the bolt sent nothing"
    print("pandas" in sys.modules, "pyarrow.compute" in sys.modules)
""")


def _imports(kind: str) -> tuple[bool, bool]:
    """Return whether the instance imported (pandas, pyarrow.compute)."""
    done = subprocess.run([sys.executable, "-c", _SETUP, kind], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    pandas, compute = done.stdout.strip().splitlines()[-1].split()
    return pandas == "True", compute == "True"


def test_a_per_tuple_bolt_runs_a_reliable_batch_without_importing_pandas_or_compute():
    """The split bolt's words go to two tasks by fields grouping: the rows are ordered by
    task before their batch is built, so no ``RecordBatch.take`` (pyarrow.compute, ~9 MB)."""
    assert _imports("tuple") == (False, False)


def test_a_batch_bolt_taking_pandas_frames_still_gets_them():
    assert _imports("batch")[0]


@pytest.mark.parametrize("array", [
    pa.array([3, 1, 2], type=pa.uint64()),
    pa.array([1.5, -2.0], type=pa.float64()),
    pa.array([5, 6, 7, 8], type=pa.int32()).slice(1, 2),
])
def test_numbers_reads_what_to_numpy_reads(array):
    got = arrow_numpy.numbers(array)
    assert got.dtype == array.to_numpy().dtype
    np.testing.assert_array_equal(got, array.to_numpy())
    assert not got.flags.writeable


def test_numbers_with_nulls_behaves_like_to_numpy():
    array = pa.array([1, None], type=pa.int64())
    with pytest.raises(pa.ArrowInvalid):
        arrow_numpy.numbers(array)
    assert np.isnan(arrow_numpy.numbers(array, zero_copy_only=False)[1])


def test_the_metrics_manager_reads_the_topology_name_without_unpickling_user_code(tmp_path):
    from heron_spark.container.files import ContainerFiles
    from heron_spark.metrics import manager
    from heron_spark.proto import packing_pb2

    files = ContainerFiles(tmp_path)
    files.definition.write_bytes(b"not a pickle: loading it would fail")
    files.packing_plan.write_bytes(
        packing_pb2.PackingPlan(topology_name="word_count").SerializeToString())
    assert manager._topology_name(files) == "word_count"


_DEFINE_BY_VALUE = textwrap.dedent("""
    import sys
    from heron_spark import Bolt, Grouping, Spout, TopologyBuilder, _pickling
    from heron_spark.plan.logical import build_logical_plan

    class Lines(Spout):          # defined in __main__: pickled by value, as in a notebook
        outputs = ["line"]
        def next_tuple(self):
            pass

    class Count(Bolt):
        def process(self, tup):
            self.ack(tup)

    builder = TopologyBuilder("by_value")
    lines = builder.add_spout("lines", Lines, par=1)
    builder.add_bolt("count", Count, par=1, inputs={lines: Grouping.SHUFFLE})
    with open(sys.argv[1], "wb") as out:
        out.write(_pickling.dumps(build_logical_plan(builder.build())))
""")

_LOAD_IN_INSTANCE = textwrap.dedent("""
    import sys
    from heron_spark import _pickling
    from heron_spark.instance import runtime
    with open(sys.argv[1], "rb") as definition:
        plan = _pickling.loads(definition.read())
    classes = sorted(c.component_class.__name__ for c in plan.components.values())
    print(classes, sorted(m for m in ("pyspark", "kazoo", "pandas") if m in sys.modules))
""")


def test_a_plan_pickled_by_value_loads_without_pyspark_or_kazoo(tmp_path):
    """An instance loads a topology whose classes travel by value without importing pyspark
    (cloudpickle's own package, not PySpark's copy) or kazoo (a file state manager's child).
    """
    definition = tmp_path / "definition.pickle"
    subprocess.run([sys.executable, "-c", _DEFINE_BY_VALUE, str(definition)], check=True,
                   timeout=120)
    loaded = subprocess.run([sys.executable, "-c", _LOAD_IN_INSTANCE, str(definition)],
                            check=True, capture_output=True, text=True, timeout=120)
    assert loaded.stdout.strip() == "['Count', 'Lines'] []"


_REGISTER_WITH_PYSPARK = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import shipped_by_value
    from pyspark import cloudpickle as pyspark_cloudpickle
    from heron_spark import _pickling
    pyspark_cloudpickle.register_pickle_by_value(shipped_by_value)
    with open(sys.argv[2], "wb") as out:
        out.write(_pickling.dumps(shipped_by_value.Greeter))
""")


def test_a_module_registered_by_value_with_pyspark_travels_by_value(tmp_path):
    """PySpark users ship a module with ``pyspark.cloudpickle.register_pickle_by_value``;
    heron_spark's own cloudpickle follows that registry, so the module need not exist where
    the plan is loaded."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "shipped_by_value.py").write_text(
        "class Greeter:\n    def hello(self):\n        return 'hello from ' + __name__\n")
    pickled = tmp_path / "greeter.pickle"
    subprocess.run([sys.executable, "-c", _REGISTER_WITH_PYSPARK, str(tmp_path / "mods"),
                    str(pickled)], check=True, timeout=120)
    loaded = subprocess.run(
        [sys.executable, "-c", "import pickle, sys; "
         "print(pickle.loads(open(sys.argv[1], 'rb').read())().hello())", str(pickled)],
        check=True, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert loaded.stdout.strip() == "hello from shipped_by_value"
