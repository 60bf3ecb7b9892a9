"""ParquetSink: word counts written as Parquet that Spark reads each row of exactly once.

In process (default tier): at-least-once and at-most-once runs commit every row, and bad
config or values fail with one clear error. On Spark (``spark``): ``spark.read.parquet`` and
``spark.readStream.parquet`` return exactly the corpus's rows, uncommitted files stay
invisible, and more than ten commits go through a compaction batch. Under effectively once a
``kill -9`` of the sink's instance mid-run (``fault``) leaves no duplicate and loses nothing.
At-least-once with ``parquet.dedupe.fields``: replays of trees failed elsewhere and a rerun
over a committed folder add no row (in process), and a ``kill -9`` between a commit and its
acks (``fault``) leaves no duplicate.
"""

from __future__ import annotations

import collections
import os
import re

import pytest

import fault_support as faults
import parquet_word_count as pwc
from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.errors import TopologyRuntimeError, TopologyValueError
from heron_spark.inprocess import InProcessTopology
from heron_spark.io import ParquetSink
from heron_spark.io.parquet_rows import Identities
from heron_spark.io.parquet_store import CommitLog
from heron_spark.scheduler.submit import submit
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import ScriptedSpout, run_local, wait_until


def _run_in_process(tmp_path, mode, lines=300, **kw):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = pwc.write_corpus(corpus, lines)
    topology = pwc.build(f"pq-{mode.lower()}", corpus, out, mode=mode, **kw)
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work"),
                                            "heron.statemgr": f"file://{tmp_path}/state"})
    assert run.run(timeout=120) == "FINISHED"
    return pwc.expected_rows(corpus.name, text), out


@pytest.mark.parametrize("mode", ["ATLEAST_ONCE", "ATMOST_ONCE", "EFFECTIVELY_ONCE"])
def test_every_row_committed_once_in_process(tmp_path, mode):
    expected, out = _run_in_process(tmp_path, mode, sinks=2,
                                    sink_config={"parquet.roll.rows": 97})
    assert pwc.read_committed(out) == expected
    log = CommitLog.open(str(out))
    if mode == "EFFECTIVELY_ONCE":  # run_local records no committed checkpoint: each task
        assert sorted(log.names()) == ["0", "1"]  # commits once, at the end of its input
        return
    assert len(log.names()) > 10  # rolled often enough to pass a compaction batch
    assert "9.compact" in log.names()


# A marker waits behind every tuple queued before it: short queues make checkpoints quick.
SHORT_QUEUES = {"heron.stmgr.backpressure.high.water.tuples": 100,
                "heron.stmgr.backpressure.low.water.tuples": 50}


def test_effectively_once_rollback_commits_the_restored_checkpoints_files_only(tmp_path):
    """A crash rolls back: files of the restored checkpoint are committed, later ones never."""
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = pwc.write_corpus(corpus, 1500)
    topology = pwc.build("pq-eo-crash", corpus, out, mode="EFFECTIVELY_ONCE", sinks=2,
                         config={"topology.stateful.checkpoint.interval.seconds": 0.05,
                                 pwc.CRASH_AT: 600, pwc.CRASH_MARKER: str(tmp_path / "crashed"),
                                 pwc.SLEEP_MS: 1},
                         sink_config={"parquet.roll.rows": 50})  # files between checkpoints
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work"),
                                            "heron.statemgr": f"file://{tmp_path}/state",
                                            **SHORT_QUEUES})
    assert run.run(timeout=120) == "FINISHED"
    assert (tmp_path / "crashed").exists()
    status = run.checkpoints.status()
    assert status["restores"] == 2 and status["restored_from"][1] > 0, status
    log = CommitLog.open(str(out))
    assert len(log.names()) > 2  # the restore committed its checkpoint's files, then the end
    assert pwc.read_committed(out) == pwc.expected_rows(corpus.name, text)
    on_disk = {p.as_uri() for p in out.glob("*.parquet")}
    assert on_disk > {f.path for f in log.files()}  # files after the checkpoint: never logged


def test_partitioned_by_a_field(tmp_path):
    expected, out = _run_in_process(tmp_path, "ATLEAST_ONCE", lines=100,
                                    sink_config={"parquet.partition.by": "word"})
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("word="))[:2] == \
        ["word=w00", "word=w01"]
    import pyarrow.dataset as ds

    rows = ds.dataset([e.path.removeprefix("file://") for e in CommitLog.open(str(out)).files()],
                      partitioning="hive", partition_base_dir=str(out)).to_table()
    assert sorted(zip(rows.column("word").to_pylist(), rows.column("line").to_pylist())) == \
        sorted(expected.elements())


def test_missing_path_is_refused_where_the_topology_is_built():
    builder = TopologyBuilder("pq-bad")
    spout = builder.add_spout("s", ScriptedSpout, par=1, config={})
    with pytest.raises(TopologyValueError) as caught:
        builder.add_bolt("out", ParquetSink, par=1, inputs={spout: Grouping.SHUFFLE}, config={})
    assert caught.value.component == "out" and caught.value.kind == "config"
    with pytest.raises(TopologyValueError) as caught:
        builder.add_bolt("out", ParquetSink, par=1, inputs={spout: Grouping.SHUFFLE},
                         config={"parquet.path": "/x", "parquet.roll.rows": 0})
    assert caught.value.value == 0
    with pytest.raises(TopologyValueError) as caught:  # Spark's readers assume at most 10
        builder.add_bolt("out", ParquetSink, par=1, inputs={spout: Grouping.SHUFFLE},
                         config={"parquet.path": "/x", "parquet.compact.interval": 20})
    assert (caught.value.component, caught.value.value) == ("out", 20)
    builder.add_bolt("out", ParquetSink, par=1, inputs={spout: Grouping.SHUFFLE},
                     config={"parquet.path": "/x", "parquet.compact.interval": 5})


class _Unwritable:
    """An object Arrow has no type for."""


ROWS = {"type-change": [["a", 1], ["b", "two"]], "no-arrow-type": [["a", _Unwritable()]],
        "fine": [["a", 1]], "listed": [["a", [1, 2]]]}


class _Values(Bolt):
    """On its first input, emits the rows ``ROWS[test.rows]``."""

    outputs = ["word", "n"]

    def initialize(self, config, context):
        self.rows = list(ROWS[config["test.rows"]])

    def process(self, tup):
        while self.rows:
            self.emit(self.rows.pop(0))


def _bad_topology(path, rows: str):
    builder = TopologyBuilder("pq-bad-values")
    builder.add_spec(ScriptedSpout.spec(name="s", par=1, script=[["go"]]))
    values = builder.add_bolt("v", _Values, par=1, inputs={"s": Grouping.SHUFFLE},
                              config={"test.rows": rows})
    builder.add_bolt("out", ParquetSink, par=1, inputs={values: Grouping.SHUFFLE},
                     config={"parquet.path": str(path)})
    return builder.build()


NO_RESTARTS = {"heron.instance.restart.max": 0}


@pytest.mark.parametrize("rows", ["type-change", "no-arrow-type"])
def test_a_value_the_sink_cannot_write_fails_the_topology_naming_the_sink(tmp_path, rows):
    with pytest.raises(TopologyRuntimeError) as caught:
        run_local(_bad_topology(tmp_path / "out", rows), conf=NO_RESTARTS, timeout=60)
    assert caught.value.component == "out"
    assert "ParquetSink" in str(caught.value)


def test_a_path_that_cannot_be_written_fails_at_initialize(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(TopologyRuntimeError) as caught:
        run_local(_bad_topology(blocker / "out", "fine"), conf=NO_RESTARTS, timeout=60)
    assert caught.value.component == "out"
    assert "parquet.path" in str(caught.value)


# ---- at-least-once de-duplication ------------------------------------------------------------
DEDUPE = {"parquet.dedupe.fields": "word, line"}


class _FailOnce(Bolt):
    """Fails each line's tuple the first time it sees it, so every line's tree is replayed once.

    With fields grouping on ``line`` each line reaches one task, which remembers it.
    """

    outputs: list = []
    auto_ack = False

    def initialize(self, config, context):
        self.failed: set = set()

    def process(self, tup):
        line = tup.values[1]
        if line in self.failed:
            self.ack(tup)
        else:
            self.failed.add(line)
            self.fail(tup)


def _replayed_topology(name, corpus, out, sink_config):
    from heron_spark.io import FileSpout

    builder = TopologyBuilder(name)
    lines = builder.add_spout("lines", FileSpout, par=1,
                              config=FileSpout.settings(str(corpus), lines_per_call=8))
    words = builder.add_bolt("split", pwc.SplitBolt, par=2, inputs={lines: Grouping.SHUFFLE})
    builder.add_bolt("flaky", _FailOnce, par=2, inputs={lines: Grouping.fields("position")})
    builder.add_bolt("out", ParquetSink, par=2, inputs={words: Grouping.fields("word", "line")},
                     config={"parquet.path": str(out), "parquet.roll.rows": 50, **sink_config})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    return builder.build()


@pytest.mark.parametrize("dedupe", [True, False])
def test_at_least_once_rows_of_trees_replayed_elsewhere_are_skipped(tmp_path, dedupe):
    """Every tree fails once in another bolt: without dedupe fields each row repeats."""
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = pwc.write_corpus(corpus, 400)
    topology = _replayed_topology("pq-alo-replayed", corpus, out, DEDUPE if dedupe else {})
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work")})
    assert run.run(timeout=120) == "FINISHED"
    expected = pwc.expected_rows(corpus.name, text)
    got = pwc.read_committed(out)
    if dedupe:
        assert got == expected, (+(got - expected), +(expected - got))
    else:  # each row twice: the replay is a fresh tree the sink cannot tell apart
        assert got == expected + expected


@pytest.mark.parametrize("partition", [None, "word"])
def test_at_least_once_a_restarted_sink_skips_what_the_folder_already_committed(tmp_path,
                                                                              partition):
    """A second run over the same lines (a restart's replays) commits nothing new."""
    sink_config = {**DEDUPE, "parquet.roll.rows": 97}
    if partition:
        sink_config["parquet.partition.by"] = partition
    # partitioned by word, a file per word and roll: fewer lines keep it quick
    lines = 100 if partition == "word" else 300
    expected, out = _run_in_process(tmp_path, "ATLEAST_ONCE", lines=lines, sinks=2,
                                    sink_config=sink_config)
    batches = CommitLog.open(str(out)).names()
    topology = pwc.build("pq-alo-again", tmp_path / "corpus.txt", out, mode="ATLEAST_ONCE",
                         sinks=2, sink_config=sink_config)
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work2")})
    assert run.run(timeout=120) == "FINISHED"
    assert CommitLog.open(str(out)).names() == batches  # every row recognised: no commit
    keys = CommitLog.open(str(out)).recent_identities(("word", "line"),
                                                      (partition,) if partition else (), 10**6)
    assert collections.Counter(keys) == expected


def test_at_least_once_dedupe_window_bounds_what_is_read_back(tmp_path):
    """With a window smaller than the folder, the newest rows are read back, older ones repeat."""
    sink_config = {**DEDUPE, "parquet.roll.rows": 97}
    expected, out = _run_in_process(tmp_path, "ATLEAST_ONCE", lines=100, sink_config=sink_config)
    log = CommitLog.open(str(out))
    newest = log.recent_identities(("word", "line"), (), 300)
    assert newest == log.recent_identities(("word", "line"), (), 10**6)[-300:]
    topology = pwc.build("pq-alo-window", tmp_path / "corpus.txt", out, mode="ATLEAST_ONCE",
                         sink_config={**sink_config, "parquet.dedupe.window.rows": 300})
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work2")})
    assert run.run(timeout=120) == "FINISHED"
    got = pwc.read_committed(out)  # the oldest lines come first, repeat, and push the newest
    assert set(got) == set(expected) and max(got.values()) == 2  # out of the window


@pytest.mark.parametrize("rows, fields", [
    ("fine", "nope"),  # a dedupe field that is not an input field
    ("listed", "n"),   # a value (a list) that cannot identify a row
])
def test_a_bad_dedupe_field_or_value_fails_naming_the_sink(tmp_path, rows, fields):
    with pytest.raises(TopologyRuntimeError) as caught:
        run_local(_dedupe_topology(tmp_path / "out", rows, {"parquet.dedupe.fields": fields}),
                  conf={**NO_RESTARTS, "topology.reliability.mode": "ATLEAST_ONCE"}, timeout=60)
    assert caught.value.component == "out"
    assert "parquet.dedupe.fields" in str(caught.value)


def _dedupe_topology(path, rows: str, sink_config: dict):
    builder = TopologyBuilder("pq-bad-dedupe")
    builder.add_spec(ScriptedSpout.spec(name="s", par=1, script=[["go"]]))
    values = builder.add_bolt("v", _Values, par=1, inputs={"s": Grouping.SHUFFLE},
                              config={"test.rows": rows})
    builder.add_bolt("out", ParquetSink, par=1, inputs={values: Grouping.SHUFFLE},
                     config={"parquet.path": str(path), "topology.bolt.auto.ack": False,
                             **sink_config})
    return builder.build()


def test_identities_remember_a_window_of_committed_rows():
    ids = Identities(["word", "n", "p"], ("n", "p"), window=3, as_text=("p",))
    keys = [ids.key(["w", i, i % 2]) for i in range(5)]
    assert keys[3] == (3, "1")
    for key in keys[:2]:
        ids.add(key)
    assert ids.seen(keys[0]) and not ids.committed
    ids.commit()
    ids.load(keys[2:4])
    assert list(ids.committed) == keys[1:4]  # the oldest is forgotten
    ids.add(keys[4])
    ids.drop()  # not committed: forgotten
    assert not ids.seen(keys[4]) and not ids.seen(keys[0]) and ids.seen(keys[1])
    from heron_spark.errors import TopologyTypeError

    with pytest.raises(TopologyTypeError) as caught:
        ids.key(["w", [1], 0])  # a list cannot identify a row
    assert caught.value.value == [1]
    with pytest.raises(TopologyTypeError):
        ids.key(["w", 1, 2.5])  # a float in a folder name cannot be read back exactly


# ---- on Spark -------------------------------------------------------------------------------
def _submit(spark, tmp_path, hconf, name, mode, lines, **kw):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = pwc.write_corpus(corpus, lines)
    topology = pwc.build(name, corpus, out, mode=mode, **kw)
    handle = submit(topology, spark=spark.session, conf=hconf, master="local[4]")
    return pwc.expected_rows(corpus.name, text), out, handle


def _read_stream(session, out, schema):
    query = (session.readStream.schema(schema).parquet(str(out)).writeStream.format("memory")
             .queryName("pq_stream_check").trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
        return {(r["word"], r["line"]): 1 for r in session.sql(
            "select word, line from pq_stream_check").collect()}, session.sql(
            "select count(*) from pq_stream_check").collect()[0][0]
    finally:
        query.stop()


def test_spark_reads_each_row_once_at_least_once(spark, tmp_path, hconf):
    """Partitioned by word: Spark takes the column ``word`` from the folders the log names."""
    expected, out, handle = _submit(spark, tmp_path, hconf, "pq-alo", "ATLEAST_ONCE", 800,
                                    sinks=2, config={"topology.stmgrs": 2},
                                    sink_config={"parquet.roll.rows": 250,
                                                 "parquet.partition.by": "word"})
    assert handle.wait(timeout=240) == "FINISHED", handle.status_detail()
    names = CommitLog.open(str(out)).names()
    assert len(names) > 10 and "9.compact" in names  # the reader goes through a compaction
    # a file written but never committed (as a killed sink leaves) stays invisible
    import pyarrow as pa
    import pyarrow.parquet as pq

    (out / "word=w00").mkdir(exist_ok=True)
    pq.write_table(pa.table({"line": ["junk"]}), out / "word=w00" / "part-junk.parquet")
    assert pwc.read_with_spark(spark.session, out) == expected
    df = spark.session.read.parquet(str(out))
    rows, count = _read_stream(spark.session, out, df.schema)
    assert count == sum(expected.values()) and set(rows) == set(expected)


@pytest.mark.fault
def test_effectively_once_sink_killed_mid_run_no_duplicates(spark, tmp_path, hconf):
    name = "pq-eo-kill"
    expected, out, handle = _submit(
        spark, tmp_path, hconf, name, "EFFECTIVELY_ONCE", 3000, sinks=2,
        config={"topology.stmgrs": 2, "topology.stateful.checkpoint.interval.seconds": 0.5,
                pwc.SLEEP_MS: 2, "heron.stmgr.backpressure.high.water.tuples": 100,
                "heron.stmgr.backpressure.low.water.tuples": 50},
        sink_config={})
    handle.wait_running(timeout=120)
    log = CommitLog.open(str(out))

    def committed() -> int:
        with open_state_manager(hconf["heron.statemgr"]) as statemgr:
            return int((statemgr.get_committed_checkpoint(name) or {}).get("id", 0))

    wait_until(lambda: committed() >= 2 and len(log.names()) >= 2, 120,
               message="two committed checkpoints and two commits of the sink")
    visible_before = pwc.read_committed(out)
    assert visible_before and max(visible_before.values()) == 1
    assert +(visible_before - expected) == collections.Counter()  # nothing but corpus rows
    [victim, *_] = faults.find(tmp_path / "work" / name, "instance", component="out")
    faults.kill9(victim)
    assert handle.wait(timeout=300) == "FINISHED", handle.status_detail()
    assert sum(handle.status_detail()["instance_failures"].values()) >= 1
    assert max(handle.status_detail()["checkpoint"]["restored_from"]) > 0
    got = pwc.read_with_spark(spark.session, out)
    assert got == expected, (sum(got.values()), sum(expected.values()),
                             +(got - expected), +(expected - got))
    print(f"batches: {len(log.names())}, checkpoint: {handle.status_detail()['checkpoint']}")


@pytest.mark.fault
def test_at_least_once_sink_killed_between_commit_and_ack_no_duplicates(spark, tmp_path, hconf):
    """``kill -9`` of the sink as soon as its first commit appears, while it acks a big roll.

    A roll of 20,000 rows takes tens of milliseconds to ack after its batch file is linked;
    the test polls the log every millisecond and kills then, so the roll's tuples time out
    and are replayed to the restarted sink, which reads the committed identities back and
    skips them (its log says how many). Spark then reads each row once.
    """
    name = "pq-alo-kill"
    expected, out, handle = _submit(
        spark, tmp_path, hconf, name, "ATLEAST_ONCE", 8000, sinks=1,
        config={"topology.max.spout.pending": 20_000, "topology.message.timeout.secs": 20},
        sink_config={**DEDUPE, "parquet.roll.rows": 20_000, "parquet.roll.secs": 15})
    handle.wait_running(timeout=120)
    log = CommitLog.open(str(out))
    metadata = out / "_spark_metadata"
    wait_until(lambda: metadata.is_dir() and any(n == "0" for n in os.listdir(metadata)), 180,
               interval=0.001, message="the sink's first commit")
    [victim] = faults.find(tmp_path / "work" / name, "instance", component="out")
    faults.kill9(victim)
    assert handle.wait(timeout=300) == "FINISHED", handle.status_detail()
    assert sum(handle.status_detail()["instance_failures"].values()) >= 1
    logs = "".join(p.read_text() for p in (tmp_path / "work").rglob("instance-out-*.log"))
    skipped = [int(m) for m in re.findall(r"skipped (\d+) replayed row", logs)]
    assert skipped and max(skipped) > 0, "the kill missed the window between commit and acks"
    got = pwc.read_with_spark(spark.session, out)
    assert got == expected, (sum(got.values()), sum(expected.values()),
                             +(got - expected), +(expected - got))
    print(f"batches: {len(log.names())}, rows skipped after the restart: {max(skipped)}")
