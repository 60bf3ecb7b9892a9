"""FileSource over Parquet, CSV, JSON lines and text; from_dataframe of a Spark DataFrame.

In process: every row of every format once, offsets resumed, bad config refused. On Spark
(``spark``): files added while the topology runs are read, and ``from_dataframe`` feeds a word
count whose committed Parquet output is exact.
"""

from __future__ import annotations

import collections
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import parquet_word_count as pwc
from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.errors import TopologyTypeError, TopologyValueError
from heron_spark.io import FileSource, ParquetSink, from_dataframe
from heron_spark.io.file_source import Offsets
from heron_spark.scheduler.submit import submit
from heron_spark.testing import CollectingBolt, run_local, wait_until


def test_offsets_move_only_over_done_rows():
    offsets = Offsets()
    offsets.done(1)
    offsets.done(2)
    assert offsets.next_row == 0 and offsets.is_done(2) and not offsets.is_done(0)
    offsets.done(0)
    assert offsets.next_row == 3 and not offsets.done_beyond
    offsets.total = 4
    assert not offsets.finished
    resumed = Offsets(json.loads(json.dumps(offsets.to_state())))
    resumed.done(3)
    assert resumed.finished


def _write_formats(folder) -> dict[str, list[tuple]]:
    folder.mkdir(parents=True)
    rows = [(f"w{i % 7}", i) for i in range(50)]
    (folder / "parquet").mkdir()
    pq.write_table(pa.table({"word": [r[0] for r in rows[:30]], "n": [r[1] for r in rows[:30]]}),
                   folder / "parquet" / "a.parquet")
    pq.write_table(pa.table({"word": [r[0] for r in rows[30:]], "n": [r[1] for r in rows[30:]]}),
                   folder / "parquet" / "b.parquet")
    (folder / "parquet" / "_SUCCESS").write_text("")  # skipped: starts with _
    (folder / "csv").mkdir()
    (folder / "csv" / "a.csv").write_text("word,n\n" + "".join(f"{w},{n}\n" for w, n in rows))
    (folder / "json").mkdir()
    (folder / "json" / "a.jsonl").write_text(
        "".join(json.dumps({"word": w, "n": n}) + "\n" for w, n in rows))
    (folder / "text").mkdir()
    (folder / "text" / "a.txt").write_text("".join(f"{w} {n}\n" for w, n in rows))
    return {"parquet": rows, "csv": rows, "json": rows,
            "text": [(f"{w} {n}",) for w, n in rows]}


@pytest.mark.parametrize("mode", ["ATLEAST_ONCE", "ATMOST_ONCE", "EFFECTIVELY_ONCE"])
@pytest.mark.parametrize("fmt", ["parquet", "csv", "json", "text"])
def test_every_row_of_every_format_once(tmp_path, fmt, mode):
    expected = _write_formats(tmp_path / "in")[fmt]
    builder = TopologyBuilder(f"fs-{fmt}")
    rows = builder.add_spout("rows", FileSource, par=2, config={
        "file.path": str(tmp_path / "in" / fmt), "file.format": fmt, "file.bounded": True,
        "file.rows.per.call": 7})
    builder.add_bolt("collect", CollectingBolt, par=1, inputs={rows: Grouping.SHUFFLE},
                     config={"topology.bolt.auto.ack": True})
    builder.set_config({"topology.reliability.mode": mode})
    run = run_local(builder.build(), timeout=60,
                    conf={"heron.statemgr": f"file://{tmp_path}/state"})
    assert run.status == "FINISHED"
    assert sorted(c.values for c in run.collected()) == sorted(expected)
    assert rows.outputs[0].fields == (["line"] if fmt == "text" else ["word", "n"])


def test_fields_are_chosen_and_bad_config_refused(tmp_path):
    _write_formats(tmp_path / "in")
    builder = TopologyBuilder("fs-bad")
    spec = builder.add_spout("a", FileSource, par=1, config={
        "file.path": str(tmp_path / "in" / "csv"), "file.format": "csv", "file.fields": "n"})
    assert spec.outputs[0].fields == ["n"]
    for config, value in [({"file.format": "csv"}, None),
                          ({"file.path": str(tmp_path), "file.format": "xml"}, "xml"),
                          ({"file.path": str(tmp_path / "none"), "file.format": "csv"},
                           str(tmp_path / "none"))]:
        with pytest.raises(TopologyValueError) as caught:
            builder.add_spout("b", FileSource, par=1, config=config)
        assert caught.value.component == "b" and caught.value.value == value
    with pytest.raises(TopologyTypeError):
        from_dataframe([("a", 1)])


class _Words(Bolt):
    """Splits a text column ``line`` (or ``text``) into ``(word, line)`` rows, anchored."""

    outputs = ["word", "line"]

    def process(self, tup):
        text, key = tup.values[0], str(tup.values[1]) if len(tup.values) > 1 else tup.values[0]
        for i, word in enumerate(text.split()):
            self.emit([word, f"{key}#{i}"], anchors=[tup])
        self.ack(tup)


def _parquet_out(builder, source, out):
    words = builder.add_bolt("words", _Words, par=2, inputs={source: Grouping.SHUFFLE})
    builder.add_bolt("out", ParquetSink, par=1, inputs={words: Grouping.SHUFFLE},
                     config={"parquet.path": str(out), "parquet.roll.secs": 0.5})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})


def test_files_added_while_running_are_read(spark, tmp_path, hconf):
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    (folder / "a.txt").write_text("one two\nthree\n")
    builder = TopologyBuilder("fs-poll")
    lines = builder.add_spout("lines", FileSource, par=2, config={
        "file.path": str(folder), "file.format": "text", "file.poll.secs": 0.2})
    _parquet_out(builder, lines, out)
    handle = submit(builder.build(), spark=spark.session, conf=hconf, master="local[2]")
    try:
        handle.wait_running(timeout=120)
        wait_until(lambda: len(pwc.read_committed(out)) == 3, 90, message="a.txt's 3 words")
        for name, text in [("b.txt", "four five\n"), ("c.txt", "six\nseven eight\n")]:
            temp = tmp_path / name  # written elsewhere, moved in whole
            temp.write_text(text)
            os.replace(temp, folder / name)
        got = wait_until(lambda: (rows := pwc.read_committed(out)) and len(rows) == 8 and rows,
                         90, message=lambda: f"8 words, got {pwc.read_committed(out)}")
        assert sorted(w for w, _ in got) == sorted(
            "one two three four five six seven eight".split())
        assert max(got.values()) == 1
    finally:
        handle.kill()
        handle.wait(timeout=120)


def test_from_dataframe_word_count_is_exact(spark, tmp_path, hconf):
    session = spark.session
    text = [(f"w{i % 11} w{i % 5} w{i % 3}", i) for i in range(2000)]
    df = session.createDataFrame(text, "text string, id long").repartition(3)
    source = from_dataframe(df, path=str(tmp_path / "df"))
    assert source.fields == ["text", "id"]
    builder = TopologyBuilder("fs-df")
    rows = builder.add_spout("rows", source, par=2)
    _parquet_out(builder, rows, tmp_path / "out")
    handle = submit(builder.build(), spark=session, conf=hconf, master="local[2]")
    assert handle.wait(timeout=240) == "FINISHED", handle.status_detail()
    counts = session.read.parquet(str(tmp_path / "out")).groupBy("word").count().collect()
    expected = collections.Counter(w for line, _ in text for w in line.split())
    assert {r["word"]: r["count"] for r in counts} == expected
    assert session.read.parquet(str(tmp_path / "out")).select("line").distinct().count() == \
        sum(expected.values())


def test_committed_offsets_are_resumed_by_the_next_run(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("".join(f"a{i}\n" for i in range(40)))

    def run():
        builder = TopologyBuilder("fs-resume")
        lines = builder.add_spout("lines", FileSource, par=2, config={
            "file.path": str(folder), "file.format": "text", "file.bounded": True})
        builder.add_bolt("collect", CollectingBolt, par=1, inputs={lines: Grouping.SHUFFLE},
                         config={"topology.bolt.auto.ack": True})
        builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
        result = run_local(builder.build(), timeout=60, collect_dir=tmp_path / "collect",
                           conf={"heron.statemgr": f"file://{tmp_path}/state"})
        assert result.status == "FINISHED"
        return sorted(c.values[0] for c in result.collected())

    assert run() == sorted(f"a{i}" for i in range(40))
    (folder / "b.txt").write_text("b0\nb1\n")
    assert run() == ["b0", "b1"]  # a.txt's rows were acked and committed: not read again
