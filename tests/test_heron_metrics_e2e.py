"""End to end on real Spark (local[4]): a word count publishes Heron's metric names per
instance with exact counts, the TMaster's views serve them in Heron's shapes, and a bolt that
raises shows up in the exceptions views with its traceback."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder, submit

pytestmark = pytest.mark.spark

MARKER = "test.boom.marker"
SENTENCES_PER_TASK = 300
TIMEOUT = 180


def sentence(task_index: int, i: int) -> str:
    """The i-th sentence of spout task ``task_index``: 1 to 6 words."""
    return " ".join(f"w{(task_index * 7 + i * 3 + k) % 23}" for k in range(1 + (i % 6)))


class Sentences(Spout):
    outputs = ["sentence"]

    def initialize(self, config, context):
        self.index = context.get_task_index()
        self.i = 0

    def next_tuple(self):
        if self.i == SENTENCES_PER_TASK:
            self.declare_exhausted()
            return
        self.emit([sentence(self.index, self.i)])
        self.i += 1


class Split(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for word in tup.values[0].split():
            self.emit([word])


class Count(Bolt):
    def process(self, tup):
        pass


class Boom(Bolt):
    """Raises on its first tuple, once per run (a marker file remembers): its restarted
    instance then takes the rest."""

    def initialize(self, config, context):
        self.marker = Path(config[MARKER])

    def process(self, tup):
        if not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            raise RuntimeError(f"boom on {tup.values[0]!r}")


def _topology(marker: Path):
    builder = TopologyBuilder("heron-metrics")
    spout = builder.add_spout("sentence", Sentences, par=2)
    split = builder.add_bolt("split", Split, par=2, inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("count", Count, par=2, inputs={split: Grouping.fields("word")})
    builder.add_bolt("boom", Boom, par=1, inputs={spout: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 2, MARKER: str(marker),
                        "topology.reliability.mode": "ATMOST_ONCE"})
    return builder.build()


def _total(view: dict, metric: str) -> float:
    return sum(float(v) for v in view["metrics"][metric].values())


@pytest.mark.tmaster_in_driver("reads the driver TMaster's metrics history and exception log "
                               "after the end (handle._tmaster.metrics_view ...); a TMaster in "
                               "container 0 ends with its container")
def test_word_count_publishes_heron_metrics_and_exceptions(spark, hconf, tmp_path):
    sentences = [sentence(t, i) for t in range(2) for i in range(SENTENCES_PER_TASK)]
    words = sum(len(s.split()) for s in sentences)
    started = int(time.time())
    handle = submit(_topology(tmp_path / "boom.marker"), spark=spark.session, master="local[4]",
                    conf=hconf)
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    tmaster = handle._tmaster
    plan = tmaster.plan
    ended = int(time.time())

    count = tmaster.metrics_view("count", ["__execute-count/split/default",
                                           "__execute-latency/split/default"], None, -1)
    ids = {plan.instance_id(t) for t in plan.component_tasks["count"]}
    assert set(count["metrics"]["__execute-count/split/default"]) == ids
    assert _total(count, "__execute-count/split/default") == words
    assert all(float(v) > 0 for v in count["metrics"]["__execute-latency/split/default"].values())
    assert count["component"] == "count" and count["interval"] >= 0

    split = tmaster.metrics_view("split", ["__execute-count/sentence/default",
                                           "__emit-count/default"], None, -1)
    assert _total(split, "__execute-count/sentence/default") == len(sentences)
    assert _total(split, "__emit-count/default") == words
    spout = tmaster.metrics_view("sentence", ["__emit-count/default", "__next-tuple-count"],
                                 None, -1)
    assert _total(spout, "__emit-count/default") == len(sentences)
    assert _total(spout, "__next-tuple-count") >= len(sentences)
    stmgr = tmaster.metrics_view("__stmgr__", ["__server/__tuples_from_workers"], None, -1)
    assert set(stmgr["metrics"]["__server/__tuples_from_workers"]) == {"stmgr-0", "stmgr-1"}
    # each sentence leaves its spout twice (split, boom); each word once
    assert _total(stmgr, "__server/__tuples_from_workers") == 2 * len(sentences) + words

    timeline = tmaster.timeline_view("count", ["__execute-count/split/default"], None,
                                     started - 60, ended + 60)
    per_minute = timeline["timeline"]["__execute-count/split/default"]
    assert sum(float(v) for points in per_minute.values() for v in points.values()) == words
    query = tmaster.query_view("SUM(TS(count,*,__execute-count/split/default))",
                               started - 60, ended + 60)
    assert len(query) == 1 and query[0]["instance"] is None
    assert sum(float(v) for v in query[0]["data"].values()) == words

    failures = tmaster.exceptions_view("boom", None)
    assert len(failures) == 1
    failure = failures[0]
    assert failure["instance_id"] == plan.instance_id(plan.component_tasks["boom"][0])
    assert failure["count"] == "1" and failure["hostname"]
    assert "Traceback" in failure["stacktrace"] and "RuntimeError: boom on" in failure["stacktrace"]
    assert Path(failure["logging"]).is_file()
    assert tmaster.exceptions_view("count", None) == []
    summary = tmaster.exception_summary_view("*", None)
    assert [(s["class_name"], s["count"]) for s in summary] == [("RuntimeError", "1")]
