"""DeltaSink: a stream appended to a Delta Lake table, each row once, read back independently.

In process (default tier): at-least-once (partitioned, two concurrent writers), at-most-once
and effectively once with a crash and rollbacks commit exactly the corpus's rows, read with
delta-rs and with DuckDB replaying the log itself; every Delta version carries at most one
application transaction; a commit repeated for a committed checkpoint writes nothing; the
schema modes refuse or evolve; bad config fails where the topology is built, an unwritable
path when the task starts. Bad input (a schema change, other partition columns, an unwritable
path) fails the run once, without restarts; an unreachable object store is retried by them.
Spark and ``kill -9``: ``test_delta_spark.py``.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

import delta_support as ds
import parquet_word_count as pwc
from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.errors import TopologyRuntimeError, TopologyValueError
from heron_spark.inprocess import InProcessTopology
from heron_spark.io import DeltaSink
from heron_spark.io.delta_table import DeltaTarget
from heron_spark.testing import ScriptedSpout, run_local

NO_RESTARTS = {"heron.instance.restart.max": 0}
# A marker waits behind every tuple queued before it: short queues make checkpoints quick.
SHORT_QUEUES = {"heron.stmgr.backpressure.high.water.tuples": 100,
                "heron.stmgr.backpressure.low.water.tuples": 50}


def _run(tmp_path, name, mode, lines, conf=None, **kw):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "table"
    text = ds.write_corpus(corpus, lines)
    run = InProcessTopology(ds.build(name, corpus, out, mode=mode, **kw),
                            conf={"heron.work.dir": str(tmp_path / "work"),
                                  "heron.statemgr": f"file://{tmp_path}/state", **(conf or {})})
    assert run.run(timeout=120) == "FINISHED"
    return ds.expected_rows(corpus.name, text), out, run


def test_at_least_once_partitioned_two_writers_every_row_once(tmp_path):
    expected, out, _ = _run(tmp_path, "delta-alo", "ATLEAST_ONCE", 300, sinks=2,
                            sink_config={"delta.commit.rows": 200, "delta.partition.by": ["word"]})
    assert ds.read_deltalake(out) == expected
    assert ds.read_duckdb(out) == expected
    from deltalake import DeltaTable

    table = DeltaTable(str(out))
    assert table.metadata().partition_columns == ["word"]
    assert table.version() >= 5  # committed every 200 rows, not once at the end
    assert (out / "word=w00").is_dir()
    assert ds.check_txns(out) == 0  # no transactions outside effectively once


def test_at_most_once_commits_every_row(tmp_path):
    expected, out, _ = _run(tmp_path, "delta-amo", "ATMOST_ONCE", 100,
                            sink_config={"delta.commit.rows": 100})
    assert ds.read_deltalake(out) == expected


def test_effectively_once_rollbacks_commit_each_checkpoint_once(tmp_path):
    """A crash rolls back: the restored checkpoints' rows are committed once, later ones never."""
    corpus, out = tmp_path / "corpus.txt", tmp_path / "table"
    text = ds.write_corpus(corpus, 1500)
    topology = ds.build("delta-eo", corpus, out, mode="EFFECTIVELY_ONCE", sinks=2,
                        config={"topology.stateful.checkpoint.interval.seconds": 0.05,
                                pwc.CRASH_AT: 600, pwc.CRASH_MARKER: str(tmp_path / "crashed"),
                                pwc.SLEEP_MS: 1})
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work"),
                                            "heron.statemgr": f"file://{tmp_path}/state",
                                            **SHORT_QUEUES})
    assert run.run(timeout=120) == "FINISHED"
    assert (tmp_path / "crashed").exists()
    status = run.checkpoints.status()
    assert status["restores"] >= 1 and max(status["restored_from"]) > 0, status
    expected = ds.expected_rows(corpus.name, text)
    assert ds.read_deltalake(out) == expected
    assert ds.read_duckdb(out) == expected
    versions = ds.txn_versions(out)
    assert ds.check_txns(out) == len(versions) > 4  # one transaction a version, each once
    assert len({app for _, txns in versions for app, _ in txns}) == 2  # one app id a task


def test_a_commit_of_a_committed_checkpoint_is_a_no_op(tmp_path):
    """What a successor does when it restores checkpoint n that its predecessor committed."""
    path = str(tmp_path / "table")
    batch = pa.table({"word": ["a", "b"], "line": ["1", "2"]})
    first, successor = (DeltaTarget(path, component="out") for _ in range(2))
    first.open(["word", "line"])
    assert first.commit(batch, "heron/t/out/0/r", 3)
    successor.open(["word", "line"])
    assert not successor.commit(batch, "heron/t/out/0/r", 3)  # replayed: skipped
    assert not successor.commit(batch, "heron/t/out/0/r", 2)  # older: skipped too
    assert successor.commit(batch, "heron/t/out/1/r", 3)      # another task's app id: written
    assert successor.commit(batch, "heron/t/out/0/r", 4)
    from deltalake import DeltaTable

    table = DeltaTable(path)
    assert table.version() == 2 and table.to_pyarrow_table().num_rows == 6
    assert table.transaction_version("heron/t/out/0/r") == 4
    assert ds.check_txns(path) == 3


# ---- schemas --------------------------------------------------------------------------------
ROWS = {"words": [["a", "1"], ["b", "2"]], "type-change": [["a", 1], ["b", "two"]]}


class _Values(Bolt):
    """On its first input, emits the rows ``ROWS[test.rows]`` as ``(word, line)``."""

    outputs = ["word", "line"]

    def initialize(self, config, context):
        self.rows = list(ROWS[config["test.rows"]])

    def process(self, tup):
        while self.rows:
            self.emit(self.rows.pop(0))


def _values_topology(path, rows: str, sink_config: dict | None = None):
    builder = TopologyBuilder("delta-values")
    builder.add_spec(ScriptedSpout.spec(name="s", par=1, script=[["go"]]))
    values = builder.add_bolt("v", _Values, par=1, inputs={"s": Grouping.SHUFFLE},
                              config={"test.rows": rows})
    builder.add_bolt("out", DeltaSink, par=1, inputs={values: Grouping.SHUFFLE},
                     config={"delta.path": str(path), **(sink_config or {})})
    return builder.build()


def _existing(path, table):
    from deltalake import write_deltalake

    write_deltalake(str(path), table)


def test_schema_change_is_refused_naming_the_columns_and_the_fix(tmp_path):
    path = tmp_path / "table"
    _existing(path, pa.table({"word": ["x"], "count": [1]}))
    with pytest.raises(TopologyRuntimeError) as caught:
        run_local(_values_topology(path, "words"), conf=NO_RESTARTS, timeout=60)
    assert caught.value.component == "out"
    message = str(caught.value)
    assert "['line']" in message and "['count']" in message and str(path) in message
    assert "delta.schema.mode: merge" in message


def test_a_column_of_another_type_is_refused(tmp_path):
    path = tmp_path / "table"
    _existing(path, pa.table({"word": ["x"], "line": [1]}))  # line: long; the stream's: str
    with pytest.raises(TopologyRuntimeError) as caught:
        run_local(_values_topology(path, "words"), conf=NO_RESTARTS, timeout=60)
    assert caught.value.component == "out" and "'line' (table int64, stream str)" in \
        str(caught.value)


def test_merge_mode_evolves_the_schema(tmp_path):
    from deltalake import DeltaTable

    path = tmp_path / "table"
    _existing(path, pa.table({"word": ["x"], "count": [1]}))
    run_local(_values_topology(path, "words", {"delta.schema.mode": "merge"}), timeout=60)
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    assert sorted(rows, key=lambda r: r["word"]) == [
        {"word": "a", "count": None, "line": "1"}, {"word": "b", "count": None, "line": "2"},
        {"word": "x", "count": 1, "line": None}]


def test_a_value_changing_type_fails_naming_the_sink(tmp_path):
    with pytest.raises(TopologyRuntimeError) as caught:
        run_local(_values_topology(tmp_path / "table", "type-change"), conf=NO_RESTARTS,
                  timeout=60)
    assert caught.value.component == "out" and "DeltaSink" in str(caught.value)


# ---- bad config ------------------------------------------------------------------------------
@pytest.mark.parametrize("config, value", [
    ({}, None),
    ({"delta.path": "/x", "delta.schema.mode": "overwrite"}, "overwrite"),
    ({"delta.path": "/x", "delta.partition.by": ["day"]}, ["day"]),
    ({"delta.path": "/x", "delta.partition.by": "word,line"}, ["word", "line"]),
    ({"delta.path": "/x", "delta.commit.rows": 0}, 0),
    ({"delta.path": "/x", "delta.storage.options": "AWS_REGION=x"}, "AWS_REGION=x"),
])
def test_bad_config_is_refused_where_the_topology_is_built(config, value):
    builder = TopologyBuilder("delta-bad")
    spout = builder.add_spout("s", ScriptedSpout, par=1, config={})
    words = builder.add_bolt("split", pwc.SplitBolt, par=1, inputs={spout: Grouping.SHUFFLE})
    with pytest.raises(TopologyValueError) as caught:
        builder.add_bolt("out", DeltaSink, par=1, inputs={words: Grouping.SHUFFLE},
                         config=config)
    assert (caught.value.component, caught.value.kind, caught.value.value) == \
        ("out", "config", value)
    assert caught.value.fix


@pytest.mark.parametrize("options, par, refused", [
    ({"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}, 2, True),
    ({"aws_s3_allow_unsafe_rename": "TRUE"}, 3, True),
    ({"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}, 1, False),
    ({"conditional_put": "etag"}, 2, False),
])
def test_several_writers_committing_by_unsafe_rename_are_refused(options, par, refused):
    builder = TopologyBuilder("delta-writers")
    spout = builder.add_spout("s", ScriptedSpout, par=1, config={})
    words = builder.add_bolt("split", pwc.SplitBolt, par=1, inputs={spout: Grouping.SHUFFLE})
    config = {"delta.path": "s3://bucket/words", "delta.storage.options": options}
    if not refused:
        builder.add_bolt("out", DeltaSink, par=par, inputs={words: Grouping.SHUFFLE},
                         config=config)
        return
    with pytest.raises(TopologyValueError) as caught:
        builder.add_bolt("out", DeltaSink, par=par, inputs={words: Grouping.SHUFFLE},
                         config=config)
    assert (caught.value.component, caught.value.value) == ("out", par)
    assert "conditional_put" in caught.value.fix and "par=1" in caught.value.fix


def test_a_path_that_cannot_be_written_fails_at_task_start(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(TopologyRuntimeError) as caught:
        run_local(_values_topology(blocker / "table", "words"), conf=NO_RESTARTS, timeout=60)
    assert caught.value.component == "out"
    assert "delta.path" in str(caught.value) and str(blocker) in str(caught.value)


def test_an_unreachable_object_store_fails_at_task_start(tmp_path):
    """An ``s3://`` table behind an endpoint nothing listens on: one error naming the table."""
    import kafka_support

    endpoint = f"http://127.0.0.1:{kafka_support.free_port()}"
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
               "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "max_retries": "0"}
    with pytest.raises(TopologyRuntimeError) as caught:
        run_local(_values_topology("s3://no-such-bucket/words", "words",
                                   {"delta.storage.options": options}),
                  conf=NO_RESTARTS, timeout=60)
    assert caught.value.component == "out"
    assert "s3://no-such-bucket/words" in str(caught.value)
    assert "delta.storage.options" in str(caught.value)


# ---- bad input: one clear error, at once when it is permanent ------------------------------
RESTARTS = {"heron.instance.restart.max": 3}  # a permanent refusal must not use them


def _fails(topology, tmp_path) -> tuple[TopologyRuntimeError, InProcessTopology]:
    """Run ``topology`` in process; return its error and the run (it must fail)."""
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work"),
                                            **RESTARTS})
    with pytest.raises(TopologyRuntimeError) as caught:
        run.run(timeout=60)
    assert run.status == "FAILED"
    return caught.value, run


def _failed_once(topology, tmp_path) -> str:
    """Assert ``topology`` fails at once on the sink's permanent ConnectorError; return it."""
    error, run = _fails(topology, tmp_path)
    assert error.component == "out" and error.permanent
    assert sum(run.failures.values()) == 1, run.failures  # not restarted: not restart_max + 1
    assert "failed permanently" in run.detail
    message = str(error)
    assert "ConnectorError" in message and "Delta:" in message and "Fix:" in message
    return message


def test_a_schema_change_under_fail_mode_fails_at_once_naming_columns_and_fix(tmp_path):
    path = tmp_path / "table"
    _existing(path, pa.table({"word": ["x"], "count": [1]}))
    message = _failed_once(_values_topology(path, "words"), tmp_path)
    assert "['line']" in message and "['count']" in message and str(path) in message
    assert "delta.schema.mode: merge" in message


def test_other_partition_columns_fail_at_once_naming_both(tmp_path):
    from deltalake import write_deltalake

    path = tmp_path / "table"
    write_deltalake(str(path), pa.table({"word": ["x"], "line": ["1"]}), partition_by=["word"])
    message = _failed_once(_values_topology(path, "words"), tmp_path)
    assert "partitioned by ['word']" in message and "delta.partition.by" in message
    assert "set delta.partition.by to ['word']" in message


def test_a_path_that_cannot_be_written_fails_at_once(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    message = _failed_once(_values_topology(blocker / "table", "words"), tmp_path)
    assert str(blocker / "table") in message and "another delta.path" in message


def test_an_unreachable_object_store_is_transient_and_retried_by_restarts(tmp_path):
    import kafka_support

    endpoint = f"http://127.0.0.1:{kafka_support.free_port()}"
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
               "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "max_retries": "0"}
    error, run = _fails(_values_topology("s3://no-such-bucket/words", "words",
                                         {"delta.storage.options": options}), tmp_path)
    assert not error.permanent and error.component == "out"
    assert sum(run.failures.values()) == RESTARTS["heron.instance.restart.max"] + 1
    message = str(error)
    assert "s3://no-such-bucket/words" in message and "delta.storage.options" in message
    assert "Fix:" in message


def test_checkpoints_rows_join_when_a_column_was_all_null_in_one():
    """A column with only None in one checkpoint (typed string) takes the other's type."""
    from heron_spark.io.delta_sink import _concat, _to_ipc

    first = pa.table({"word": ["a"], "n": pa.array([None], pa.string())})
    joined = _concat([_to_ipc(first), pa.table({"word": ["b"], "n": [2]})])
    assert joined.schema.field("n").type == pa.int64()
    assert joined.to_pylist() == [{"word": "a", "n": None}, {"word": "b", "n": 2}]
