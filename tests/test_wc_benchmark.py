"""The word-count benchmark's topologies count exactly, in both styles and every tuple mode.

``benchmarks/wc_topologies.py`` run in process (``heron_spark.inprocess``) on a small corpus:
the counts the count tasks write must equal ``collections.Counter`` over the corpus.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

import pytest

from heron_spark.inprocess import InProcessTopology

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import wc_topologies  # noqa: E402


@pytest.mark.parametrize("style", wc_topologies.STYLES)
@pytest.mark.parametrize("mode", ["ATMOST_ONCE", "ATLEAST_ONCE", "EFFECTIVELY_ONCE"])
def test_word_count_counts_exactly(tmp_path, mode, style):
    corpus, generated = wc_topologies.corpus_file(300, tmp_path / "cache")
    assert generated
    out = tmp_path / "out"
    out.mkdir()
    topology = wc_topologies.build(mode, corpus, out, 0, 0.0, 7, 0, 1.0, style)
    runner = InProcessTopology(topology, conf={"heron.statemgr": f"file://{tmp_path / 'state'}",
                                               "heron.work.dir": str(tmp_path / "work")})
    assert runner.run(timeout=120) == "FINISHED"
    results = [json.loads(p.read_text()) for p in sorted(out.glob("count-*.json"))]
    assert len(results) == wc_topologies.COUNTERS
    counted: collections.Counter = collections.Counter()
    for result in results:
        assert not counted.keys() & result["counts"].keys()  # fields grouping: one owner per word
        counted.update(result["counts"])
        assert result["first"] is not None and result["last"] is not None
        assert len(result["samples"]) == result["words"] // 7
    assert counted == wc_topologies.count_corpus(corpus)
    spouts = [json.loads(p.read_text()) for p in sorted(out.glob("spout-*.json"))]
    assert sum(s["emitted"] for s in spouts) == 300 and all(s["first_emit"] for s in spouts)
