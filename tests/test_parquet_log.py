"""Spark's file-sink log as ParquetSink writes it: the I/O-free core and the local shell.

The format and the compaction rules are Spark's (``FileStreamSinkLog``,
``CompactibleFileStreamLog``); ``test_parquet_sink.py`` checks with real Spark that it reads
what these write.
"""

from __future__ import annotations

import threading

import pytest

from heron_spark.errors import TopologyTypeError
from heron_spark.io import parquet_log as pl
from heron_spark.io.parquet_rows import Rows
from heron_spark.io.parquet_store import CommitLog


def _entry(name: str) -> pl.SinkFile:
    return pl.SinkFile(path=f"file:///data/{name}", size=10, modification_time_ms=1)


def test_batch_file_is_v1_then_one_json_line_per_file():
    data = pl.encode([_entry("a.parquet"), _entry("b.parquet")])
    lines = data.decode().split("\n")
    assert lines[0] == "v1"
    assert lines[1] == ('{"path":"file:///data/a.parquet","size":10,"isDir":false,'
                        '"modificationTime":1,"blockReplication":1,"blockSize":33554432,'
                        '"action":"add"}')
    assert pl.decode(data) == [_entry("a.parquet"), _entry("b.parquet")]
    with pytest.raises(ValueError):
        pl.decode(b"v2\n{}")


def test_compaction_batches_are_named_as_spark_reads_them():
    assert [pl.batch_file_name(i, 10) for i in (0, 8, 9, 10, 19)] == \
        ["0", "8", "9.compact", "10", "19.compact"]
    assert pl.batch_id_of("19.compact") == 19 and pl.batch_id_of(".19.x.tmp") is None
    names = [pl.batch_file_name(i, 10) for i in range(13)]
    assert pl.read_plan(names, 12) == ("9.compact", "10", "11", "12")
    assert pl.read_plan(names, 9) == ("9.compact",)
    assert pl.read_plan(names, 3) == ("0", "1", "2", "3")
    assert list(pl.batches_to_compact(19, 10)) == list(range(9, 19))
    assert list(pl.batches_to_compact(9, 10)) == list(range(0, 9))


def test_interval_is_derived_like_sparks_reader():
    assert pl.derive_interval(["0", "1"], 10) == 10
    assert pl.derive_interval(["4.compact", "9.compact", "10"], 10) == 5
    assert pl.derive_interval(["2.compact", "3"], 10) == 3
    assert pl.derive_interval(["29.compact"], 10) == 10
    assert pl.derive_interval(["23.compact"], 10) == 12


def test_plan_next_compacts_every_interval():
    names: list[str] = []
    for batch_id in range(21):
        plan = pl.plan_next(names, 10)
        assert plan.batch_id == batch_id
        names.append(plan.name)
        if batch_id == 19:
            assert plan.reads == tuple(["9.compact"] + [str(i) for i in range(10, 19)])
    assert "9.compact" in names and "19.compact" in names and "9" not in names
    assert pl.read_plan(names) == ("19.compact", "20")


def test_visible_drops_deleted_and_repeated_paths():
    a, b = _entry("a"), _entry("b")
    gone = pl.SinkFile(path=b.path, size=0, modification_time_ms=2, action=pl.DELETE)
    assert pl.visible([a, b, a, gone]) == [a]


def test_commit_log_compacts_and_lists_every_file(tmp_path):
    log = CommitLog.open(str(tmp_path))
    log.create()
    for i in range(23):
        (tmp_path / f"f{i}.parquet").write_bytes(b"x" * i)
        assert log.commit([log.entry(str(tmp_path / f"f{i}.parquet"))]) == i
    names = sorted(log.names())
    assert "9.compact" in names and "19.compact" in names
    assert len(pl.decode((tmp_path / "_spark_metadata" / "19.compact").read_bytes())) == 20
    files = log.files()
    assert sorted(f.path for f in files) == sorted(
        (tmp_path / f"f{i}.parquet").as_uri() for i in range(23))
    assert [f.size for f in sorted(files, key=lambda f: f.size)] == list(range(23))


def test_concurrent_committers_get_distinct_contiguous_batches(tmp_path):
    log_dir = str(tmp_path)
    CommitLog.open(log_dir).create()
    errors: list[BaseException] = []

    def commit(worker: int) -> None:
        try:
            log = CommitLog.open(log_dir)
            for i in range(15):
                log.commit([_entry(f"{worker}-{i}")])
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=commit, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    log = CommitLog.open(log_dir)
    assert sorted(pl.batch_id_of(n) for n in log.names()) == list(range(60))
    assert sorted(f.path for f in log.files()) == sorted(
        f"file:///data/{w}-{i}" for w in range(4) for i in range(15))
    assert not [p for p in (tmp_path / "_spark_metadata").iterdir() if p.name.endswith(".tmp")]


def test_a_log_folder_created_while_it_is_listed_reads_as_nothing_committed(tmp_path):
    """A reader polls a sink whose first writer creates ``_spark_metadata`` meanwhile: pyarrow
    raises FileNotFoundError when the folder appears between its listing and its existence
    check (allow_not_found or not); ``names`` reads that as the empty log it listed."""
    log = CommitLog.open(str(tmp_path / "out"))
    (tmp_path / "out").mkdir()
    folder = tmp_path / "out" / "_spark_metadata"
    stop = threading.Event()

    def create_and_remove():
        while not stop.is_set():
            folder.mkdir(exist_ok=True)
            folder.rmdir()

    writer = threading.Thread(target=create_and_remove)
    writer.start()
    try:
        listings = [log.names() for _ in range(10_000)]
    finally:
        stop.set()
        writer.join()
    assert listings == [[]] * 10_000


def test_uri_of_a_partition_folder_is_escaped(tmp_path):
    log = CommitLog.open(str(tmp_path))
    assert log.uri("/data/word=a b/p.parquet") == "file:///data/word=a%20b/p.parquet"


def test_rows_refuse_a_type_change_and_unconvertible_objects():
    rows = Rows(["word", "n"], component="out")
    rows.add(["a", 1])
    rows.add([None, 2])
    with pytest.raises(TopologyTypeError) as caught:
        rows.add(["b", "3"])
    assert caught.value.component == "out" and caught.value.value == "3"
    with pytest.raises(TopologyTypeError):
        rows.add(["b", 2.5])  # an int column takes no float
    with pytest.raises(TopologyTypeError):
        rows.add([object(), 1])
    with pytest.raises(TopologyTypeError):
        rows.add(["only one value"])
    assert rows.count == 2  # the refused rows were not taken


def test_rows_widen_ints_into_a_float_column():
    rows = Rows(["x", "empty"])
    rows.add([1.5, None])
    rows.add([2, None])
    table = rows.to_table(rows.take())
    assert table.column("x").to_pylist() == [1.5, 2.0]
    assert str(table.schema.field("empty").type) == "string"
    assert rows.count == 0
