"""Effectively once: stateful word counts stay exact across failures.

The count bolt keeps its counts only in its checkpointed ``State``; the spouts' offsets are
part of the same checkpoints. Whatever fails, the final counts must equal
``collections.Counter`` of the corpus: nothing lost, nothing counted twice.
"""

from __future__ import annotations

import stateful_word_count as swc
from heron_spark.inprocess import InProcessTopology

# A marker waits behind every tuple queued before it: short queues make checkpoints quick.
SHORT_QUEUES = {"heron.stmgr.backpressure.high.water.tuples": 400,
                "heron.stmgr.backpressure.low.water.tuples": 200}


def test_in_process_crash_rolls_back_to_the_last_checkpoint(tmp_path):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = swc.write_corpus(corpus, 5000)
    topology = swc.build("eo-in-process", corpus, out, interval=0.05,
                         config={swc.CRASH_AT: 10000, swc.SLEEP_MS: 0.3})
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work"), **SHORT_QUEUES})
    assert run.run(timeout=120) == "FINISHED"
    assert (out / "crashed").exists()
    assert swc.read_counts(out) == swc.expected_counts(text)
    status = run.checkpoints.status()
    assert status["restores"] == 2, status  # the start, the crash
    assert status["restored_from"][1] > 0, status  # the crash went back to a real checkpoint
    assert sum(run.failures.values()) == 1
