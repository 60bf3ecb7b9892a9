"""The batch API: Arrow and pandas components on whole topologies (in this process, and once on
Spark), mixed with per-tuple ones,
at-most-once and at-least-once (a failed batch is replayed as a whole), plus the pieces that
anchor emitted rows to their input rows."""

from __future__ import annotations

import collections
import json

import numpy as np
import pyarrow as pa
import pytest

import batch_topologies as bt
from heron_spark import Grouping, TopologyBuilder, TopologyValueError
from heron_spark.instance import batches
from heron_spark.testing import CollectingBolt, ScriptedSpout, read_collected, run_local

TIMEOUT = 180


def _collected_words(folder):
    got = collections.Counter()
    for item in read_collected(folder, "words"):
        got[item.values] += 1
    return got


def _spout_logs(out):
    logs = [json.loads(p.read_text()) for p in sorted(out.glob("spout-*.json"))]
    return [n for log in logs for n in log["acked"]], [n for log in logs for n in log["failed"]]


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["ATMOST_ONCE", "ATLEAST_ONCE"])
def test_arrow_batches_split_and_reach_per_tuple_bolts_exactly(spark, tmp_path, mode):
    # at most once in this process, at least once on Spark: both runners, real processes once
    out = tmp_path / "out"
    out.mkdir()
    topology = bt.word_lines(f"batch-{mode.lower()}", out,
                             {"topology.reliability.mode": mode})
    run = run_local(topology, timeout=TIMEOUT, collect_dir=tmp_path / "collect",
                    spark=spark.session if mode == "ATLEAST_ONCE" else None)
    assert run.status == "FINISHED"
    got = _collected_words(run.collect_dir)
    expected = bt.expected_words()
    assert {values: n for values, n in got.items()} == expected
    owner = {}
    for item in read_collected(run.collect_dir, "words"):
        assert owner.setdefault(item.values[0], item.task) == item.task  # fields grouping held
        assert item.component == "split"
    acked, failed = _spout_logs(out)
    if mode == "ATLEAST_ONCE":
        firsts = [*range(0, len(bt.LINES), 2)[::50], *range(1, len(bt.LINES), 2)[::50]]
        assert sorted(acked) == sorted(firsts)  # one tree per batch of 50 lines
        assert failed == []
        metrics = run.handle.metrics()
        assert metrics["split"]["__ack-count"] == len(bt.LINES)
    else:
        assert acked == [] and failed == []


def test_a_failed_batch_is_replayed_whole(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    topology = bt.word_lines("batch-fail", out, {"topology.reliability.mode": "ATLEAST_ONCE",
                                                 bt.FAIL_EVERY: 4})
    run = run_local(topology, timeout=TIMEOUT, collect_dir=tmp_path / "collect")
    assert run.status == "FINISHED"
    acked, failed = _spout_logs(out)
    assert failed and set(failed) <= set(acked)  # every failed batch came back and was acked
    assert all(first % 4 == 0 for first in failed)
    got = _collected_words(run.collect_dir)
    expected = bt.expected_words()
    # At least once: where shuffle sliced a batch over both split tasks, the slice that was
    # not failed went through and comes again with the replay.
    assert set(got) == set(expected)
    assert all(got[key] >= n for key, n in expected.items())


def test_pandas_frames_in_and_out(tmp_path):
    builder = TopologyBuilder("batch-pandas")
    numbers = ScriptedSpout.spec(name="numbers", par=2, script=[(i,) for i in range(500)],
                                 fields=("value",))
    builder.add_spec(numbers)
    squares = builder.add_bolt("squares", bt.SquareFrames, par=2,
                               inputs={numbers: Grouping.SHUFFLE})
    builder.add_bolt("sink", CollectingBolt, par=1, inputs={squares: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 2})
    run = run_local(builder.build(), timeout=TIMEOUT, collect_dir=tmp_path / "collect")
    assert run.status == "FINISHED"
    assert sorted(item.values for item in run.collected("sink")) == \
        [(i, i * i) for i in range(500)]


def test_rows_are_anchored_to_their_parent_rows():
    flat = np.array([10, 11, 12], dtype=np.uint64)  # one tree per input row
    roots, counts = batches.anchored_roots(flat, None, [2, 2, 0, 1], 4, "c")
    assert roots.tolist() == [12, 12, 10, 11] and counts.tolist() == [1, 1, 1, 1]
    flat = np.array([10, 11, 12, 13], dtype=np.uint64)  # input rows in (10), (11, 12), (13)
    roots, counts = batches.anchored_roots(flat, np.array([1, 2, 1]), [1, 0, 2, 1], 4, "c")
    assert roots.tolist() == [11, 12, 10, 13, 11, 12] and counts.tolist() == [2, 1, 1, 2]
    roots, counts = batches.anchored_roots(flat, np.array([1, 2, 1]), None, 2, "c")
    assert roots.tolist() == [10, 11, 12, 13] * 2 and counts.tolist() == [4, 4]
    with pytest.raises(TopologyValueError) as caught:
        batches.anchored_roots(flat, None, [0, 9], 2, "c")
    assert caught.value.kind == "batch_parents"
    with pytest.raises(TopologyValueError):
        batches.anchored_roots(flat, None, [0], 2, "c")


def test_emitted_data_must_carry_the_declared_fields():
    batch = pa.RecordBatch.from_pydict({"b": [1], "a": [2], "extra": [3]})
    (ordered,) = batches.as_batches(batch, ("a", "b"), "c", "s")
    assert ordered.schema.names == ["a", "b"]
    (from_dict,) = batches.as_batches({"a": [1, 2], "b": ["x", "y"]}, ("a", "b"), "c", "s")
    assert from_dict.num_rows == 2
    with pytest.raises(TopologyValueError) as caught:
        batches.as_batches({"a": [1]}, ("a", "b"), "c", "s")
    assert caught.value.kind == "batch_fields" and caught.value.component == "c"
    with pytest.raises(TypeError):
        batches.as_batches([1, 2], ("a",), "c", "s")
