"""The ``heron_spark`` data source's parts, without Spark: the commit log and option resolution.

The commit log is read from real files in the exact layout Spark's ``FileStreamSinkLog``
writes (``v1`` + one JSON line per file, ``N.compact`` every compactInterval batches, temp and
checksum files beside them). Resolution reads a topology stored in a real local state manager
folder, written the way ``submit`` writes it.
"""

from __future__ import annotations

import json

import pytest

from heron_spark import Bolt, DataSourceOptionError, Grouping, Spout, Stream, TopologyBuilder
from heron_spark.plan.logical import build_logical_plan
from heron_spark.scheduler.update import topology_proto
from heron_spark.io import parquet_log
from heron_spark.io.parquet_log import SinkFile
from heron_spark.sql import reading, resolve, sink_log
from heron_spark.statemgr import LocalFileStateManager


def _write_batch(folder, name: str, paths: list[str], action: str = "add") -> None:
    meta = folder / "_spark_metadata"
    meta.mkdir(parents=True, exist_ok=True)
    lines = ["v1"] + [json.dumps({"path": path, "size": 100, "isDir": False,
                                  "modificationTime": 1, "blockReplication": 1,
                                  "blockSize": 1, "action": action}) for path in paths]
    (meta / name).write_text("\n".join(lines))


def test_batch_ids_know_compact_files_and_skip_temp_and_checksum_files():
    names = ["0", "1", ".2.crc", ".3.5e7f.tmp", "9.compact", "10", "_x", "11.compact.tmp",
             "\u00b2", "1\u0663"]                    # digits, but not ASCII ones
    assert {n: parquet_log.batch_id_of(n) for n in names if parquet_log.batch_id_of(n)
            is not None} == {"0": 0, "1": 1, "9.compact": 9, "10": 10}
    assert parquet_log.read_plan(names) == ("9.compact", "10")


def test_files_to_read_starts_at_the_last_compact_file_at_or_below():
    names = [*(str(b) for b in range(9)), "9.compact", "10", "11"]
    assert parquet_log.read_plan(names, 8) == tuple(str(b) for b in range(9))
    assert parquet_log.read_plan(names, 11) == ("9.compact", "10", "11")
    assert parquet_log.read_plan(names, -1) == ()
    cleaned = ["9.compact", "10"]                       # batches 0..8 deleted after compaction
    assert parquet_log.read_plan(cleaned, 10) == ("9.compact", "10")
    assert parquet_log.missing(parquet_log.read_plan(cleaned, 5), cleaned) == [
        str(b) for b in range(6)]
    twenty = [str(b) for b in range(15)]                # a writer's interval of 20: no 9.compact
    assert parquet_log.read_plan(twenty) == tuple(twenty)


def test_a_batch_deleted_after_compaction_is_one_clear_error(tmp_path):
    for batch in range(11):
        _write_batch(tmp_path, "9.compact" if batch == 9 else str(batch),
                     [f"file:///p{b}" for b in range(10)] if batch == 9 else [f"file:///p{batch}"])
    for batch in range(9):
        (tmp_path / "_spark_metadata" / str(batch)).unlink()
    log = sink_log.open_log(str(tmp_path))
    assert [f.path for f in log.files_between(-1, 10)] == [f"file:///p{b}" for b in range(11)]
    with pytest.raises(DataSourceOptionError) as info:
        sink_log.open_log(str(tmp_path)).files_between(4, 10)
    assert (info.value.option, info.value.value) == ("path", str(tmp_path))


def test_the_log_gives_each_file_to_exactly_one_batch_range_across_a_compaction(tmp_path):
    files = {b: f"file://{tmp_path}/part-{b}.parquet" for b in range(13)}
    for batch in range(13):
        if batch == 9:   # compaction: everything of batches 0..9, and a deletion applied
            _write_batch(tmp_path, "9.compact", [files[b] for b in range(10)])
        else:
            _write_batch(tmp_path, str(batch), [files[batch]])
    log = sink_log.open_log(str(tmp_path))
    assert log.latest() == 12
    seen = []
    for start, end in [(-1, 3), (3, 8), (8, 9), (9, 9), (9, 12)]:
        seen += [f.path for f in log.files_between(start, end)]
    assert seen == [files[b] for b in range(13)]
    fresh = sink_log.open_log(str(tmp_path))           # no cache: a restarted query
    assert [f.path for f in fresh.files_between(7, 11)] == [files[b] for b in (8, 9, 10, 11)]


def test_a_delete_entry_removes_a_file(tmp_path):
    _write_batch(tmp_path, "0", ["file:///a", "file:///b"])
    _write_batch(tmp_path, "1", ["file:///a"], action="delete")
    log = sink_log.open_log(str(tmp_path))
    assert [f.path for f in log.files_between(-1, 1)] == ["file:///b"]
    _write_batch(tmp_path, "2", ["file:///c"])
    assert [f.path for f in log.files_between(1, 2)] == ["file:///c"]  # from the cache on


def test_a_newer_log_version_and_a_malformed_entry_are_clear_errors(tmp_path):
    (tmp_path / "_spark_metadata").mkdir()
    (tmp_path / "_spark_metadata" / "0").write_text("v2\n{}")
    with pytest.raises(DataSourceOptionError, match="newer than v1"):
        sink_log.open_log(str(tmp_path)).files_upto(0)
    (tmp_path / "_spark_metadata" / "0").write_text('v1\n{"size": 3}')
    with pytest.raises(DataSourceOptionError, match="malformed"):
        sink_log.open_log(str(tmp_path)).files_upto(0)


def test_a_folder_without_a_log_has_no_batches_and_no_schema(tmp_path):
    log = sink_log.open_log(str(tmp_path / "nothing-yet"))
    assert log.latest() == -1
    with pytest.raises(DataSourceOptionError) as info:
        reading.infer_schema(str(tmp_path), [])
    assert info.value.option == "path"


def test_a_file_that_is_not_a_commit_log_is_one_clear_error(tmp_path):
    (tmp_path / "_spark_metadata").mkdir()
    (tmp_path / "_spark_metadata" / "0").write_text("hello\n")
    with pytest.raises(DataSourceOptionError) as info:
        sink_log.open_log(str(tmp_path)).files_upto(0)
    assert info.value.option == "path"


def test_partition_values_and_partition_planning(tmp_path):
    base = f"file://{tmp_path}"
    assert reading.partition_values(str(tmp_path), f"{base}/k=1/s=a%20b/part-0.parquet") == [
        ("k", "1"), ("s", "a b")]
    assert reading.partition_values(str(tmp_path), f"{base}/k=__HIVE_DEFAULT_PARTITION__/p") \
        == [("k", None)]
    files = [SinkFile(path=f"f{i}", size=size, modification_time_ms=0)
             for i, size in enumerate([60, 60, 200, 10])]
    assert reading.plan_partitions(files, max_bytes=128) == [["f0", "f1"], ["f2"], ["f3"]]


class _Words(Spout):
    outputs = ["word", Stream(["word", "n"], name="counted")]

    def next_tuple(self):
        pass


class _Echo(Bolt):
    outputs = ["word"]

    def process(self, tup):
        pass


def _store(tmp_path, builder: TopologyBuilder, name: str) -> str:
    plan = build_logical_plan(builder.build(), name)
    url = f"file://{tmp_path}/state"
    with LocalFileStateManager(f"{tmp_path}/state") as statemgr:
        statemgr.set_topology(topology_proto(plan, "id-1", b""))
    return url


def _topology(tmp_path) -> str:
    builder = TopologyBuilder("words")
    words = builder.add_spout("words", _Words, par=1)
    echo = builder.add_bolt("echo", _Echo, par=1, inputs={words: Grouping.SHUFFLE})
    builder.add_bolt("out", _Echo, par=1, inputs={echo: Grouping.SHUFFLE},
                     config={resolve.PARQUET_PATH: f"{tmp_path}/echoed"})
    builder.add_bolt("counted_out", _Echo, par=1,
                     inputs={words["counted"]: Grouping.SHUFFLE},
                     config={resolve.PARQUET_PATH: f"{tmp_path}/counted"})
    return _store(tmp_path, builder, "words")


def test_a_topology_stream_resolves_to_the_parquet_sink_that_subscribes_to_it(tmp_path):
    url = _topology(tmp_path)
    ask = {"topology": "words", "heron.statemgr": url}
    assert resolve.resolve_path({**ask, "component": "echo"}) == f"{tmp_path}/echoed"
    assert resolve.resolve_path({**ask, "component": "words", "stream": "counted"}) == \
        f"{tmp_path}/counted"
    assert resolve.resolve_path({**ask, "component": "out"}) == f"{tmp_path}/echoed"
    assert resolve.resolve_path({**ask, "component": "out", "stream": "default"}) == \
        f"{tmp_path}/echoed"
    assert resolve.resolve_path({"path": "s3://bucket/x"}) == "s3://bucket/x"


@pytest.mark.parametrize(("options", "option", "value"), [
    ({"topology": "nope", "component": "echo"}, "topology", "nope"),
    ({"topology": "words", "component": "ghost"}, "component", "ghost"),
    ({"topology": "words", "component": "words"}, "component", "words"),   # nothing on default
    ({"topology": "words", "component": "echo", "stream": "other"}, "stream", "other"),
    ({"topology": "words", "component": "out", "stream": "counted"}, "stream", "counted"),
    ({"topology": "words"}, "component", None),
    ({}, "topology", None),
    ({"topology": "words", "path": "/x", "component": "echo"}, "path", "/x"),
])
def test_options_that_name_nothing_readable_are_one_error_naming_the_option(
        tmp_path, options, option, value):
    url = _topology(tmp_path)
    with pytest.raises(DataSourceOptionError) as info:
        resolve.resolve_path({**options, "heron.statemgr": url})
    assert (info.value.option, info.value.value) == (option, value)


def test_a_sink_that_mixes_two_streams_is_refused_for_one_of_them(tmp_path):
    builder = TopologyBuilder("mixed")
    words = builder.add_spout("words", _Words, par=1)
    builder.add_bolt("out", _Echo, par=1,
                     inputs={words: Grouping.SHUFFLE, words["counted"]: Grouping.SHUFFLE},
                     config={resolve.PARQUET_PATH: f"{tmp_path}/mixed"})
    url = _store(tmp_path, builder, "mixed")
    with pytest.raises(DataSourceOptionError) as info:
        resolve.resolve_path({"topology": "mixed", "component": "words", "heron.statemgr": url})
    assert info.value.option == "component"
    assert resolve.resolve_path({"topology": "mixed", "component": "out",
                                 "heron.statemgr": url}) == f"{tmp_path}/mixed"


def test_the_stream_reader_offsets_are_batch_ids_and_starting_offsets_picks_the_first(
        tmp_path):
    from heron_spark.sql.source import HeronSparkDataSource

    for batch in range(3):
        _write_batch(tmp_path, str(batch), [f"file:///p{batch}"])
    earliest = HeronSparkDataSource({"path": str(tmp_path)}).streamReader(None)
    latest = HeronSparkDataSource({"path": str(tmp_path),
                                   "startingOffsets": "latest"}).streamReader(None)
    assert earliest.initialOffset() == {"batch": -1}
    assert latest.initialOffset() == {"batch": 2}
    assert earliest.latestOffset({"batch": -1}, None) == {"batch": 2}
    parts = earliest.partitions({"batch": 0}, {"batch": 2})
    assert [p.uris for p in parts] == [["file:///p1", "file:///p2"]]
    assert latest.partitions({"batch": 2}, {"batch": 2}) == []
    with pytest.raises(DataSourceOptionError) as info:
        HeronSparkDataSource({"path": str(tmp_path), "startingOffsets": "middle"})
    assert info.value.option == "startingOffsets"


def test_the_state_manager_defaults_as_submit_does():
    from heron_spark.config import build_system_config, read_conf_file

    assert resolve.statemgr_url({}) == build_system_config(read_conf_file()).statemgr
    assert resolve.statemgr_url({"heron.statemgr": "zk://h:1/r"}) == "zk://h:1/r"


def test_pyspark_s_own_lookup_registers_the_source_as_heron_spark(tmp_path):
    """PySpark's worker-side lookup (``lookup_data_sources._main``), run as Spark runs it.

    With the repository on the path, as an installed (non-editable) heron_spark puts
    ``pyspark_heron_spark`` in site-packages; an editable install's import hook hides it from
    the lookup's ``pkgutil.iter_modules``.
    """
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import io\n"
        "from pyspark.serializers import read_int, UTF8Deserializer\n"
        "from pyspark.sql.worker.lookup_data_sources import _main\n"
        "from pyspark.worker_util import pickleSer\n"
        "out = io.BytesIO()\n"
        "_main(io.BytesIO(), out)\n"
        "out.seek(0)\n"
        "for _ in range(read_int(out)):\n"
        "    name = UTF8Deserializer().loads(out)\n"
        "    source = pickleSer._read_with_length(out)\n"
        "    print(name, source.__module__, source.__name__)\n")
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "heron_spark heron_spark.sql.source HeronSparkDataSource" in proc.stdout.splitlines()


def test_the_reader_reads_back_what_the_sink_s_commit_log_names_escaped_paths_too(tmp_path):
    """Written as ParquetSink writes (hive folders by pyarrow, URIs by ``CommitLog``)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from heron_spark.io.parquet_store import CommitLog

    out = tmp_path / "out dir"                          # a space in the folder itself
    table = pa.table({"word": ["a b%c", "x/y", "plain", "a b%c"], "n": [1, 2, 3, 4]})
    written: list[str] = []
    ds.write_dataset(table, str(out), format="parquet", partitioning=["word"],
                     partitioning_flavor="hive",
                     file_visitor=lambda written_file: written.append(written_file.path))
    log = CommitLog.open(str(out))
    log.create()
    for path in written:
        log.commit([log.entry(path)])
    assert any("%25" in entry.path for entry in log.files())  # the URI escapes the escaped
    files = sink_log.open_log(str(out)).files_upto(2)
    schema = reading.infer_schema(str(out), files)
    assert [(f.name, f.dataType.simpleString()) for f in schema.fields] == [
        ("n", "bigint"), ("word", "string")]
    rows = [row for sink_file in files
            for batch in reading.read_files(str(out), [sink_file.path], schema)
            for row in zip(*(column.to_pylist() for column in batch.columns))]
    assert sorted(rows) == [(1, "a b%c"), (2, "x/y"), (3, "plain"), (4, "a b%c")]
