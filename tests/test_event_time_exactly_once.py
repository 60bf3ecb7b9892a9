"""Event-time windows under effectively once: exact across a crash and ``kill -9``.

A 1 s event-time tumbling word count (``event_time_word_count``) over out-of-order input,
into a ``ParquetSink``: whatever fails, the committed rows equal the windows computed from the
corpus in plain Python, each window of each word once.
"""

from __future__ import annotations

import pytest

import event_time_word_count as etw
import fault_support as faults
import stateful_word_count as swc
from heron_spark.inprocess import InProcessTopology
from heron_spark.scheduler.submit import submit
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until

TIMEOUT = 240


def test_a_window_task_crash_rolls_back_and_the_windows_stay_exact(tmp_path):
    corpus_file, out, sink = tmp_path / "corpus.txt", tmp_path / "out", tmp_path / "sink"
    out.mkdir()
    corpus = etw.write_corpus(corpus_file, 3000)
    topology = etw.build("et-eo-in-process", corpus_file, out, sink, interval=0.05,
                         config={swc.CRASH_AT: 4000, swc.SLEEP_MS: 0.3})
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work"),
                                            "heron.statemgr": f"file://{tmp_path}/state",
                                            **swc.SHORT_QUEUES})
    assert run.run(timeout=120) == "FINISHED"
    assert (out / "crashed").exists()
    status = run.checkpoints.status()
    assert status["restored_from"][-1] > 0, status  # the crash went back to a real checkpoint
    assert etw.read_rows(sink) == etw.expected_rows(corpus)


def _committed(statemgr_url: str, name: str) -> int:
    with open_state_manager(statemgr_url) as statemgr:
        return int((statemgr.get_committed_checkpoint(name) or {}).get("id", 0))


@pytest.mark.fault
@pytest.mark.parametrize("victim", ["window instance", "container"])
def test_kill_9_mid_run_keeps_the_event_time_windows_exact(spark, tmp_path, hconf, victim):
    name = f"et-eo-{victim.split()[0]}"
    corpus_file, out, sink = tmp_path / "corpus.txt", tmp_path / "out", tmp_path / "sink"
    out.mkdir()
    corpus = etw.write_corpus(corpus_file, 6000)
    topology = etw.build(name, corpus_file, out, sink, config={swc.SLEEP_MS: 2})
    handle = submit(topology, spark=spark.session,
                    conf={**hconf, **swc.SHORT_QUEUES, "heron.stage.resubmit.backoff.secs": 0.5},
                    master="local[4]")
    try:
        assert handle.wait_running(timeout=120)
        wait_until(lambda: _committed(hconf["heron.statemgr"], name) >= 2, 90,
                   message="2 committed checkpoints")
        work = tmp_path / "work" / name
        if victim == "container":
            [stmgr] = faults.find(work, "stmgr", container=1)
            faults.kill9(faults.parent_of(stmgr))  # the Spark Python worker of the barrier task
        else:
            [target, *_] = faults.find(work, "instance", component="windows")
            faults.kill9(target)
        assert handle.wait(timeout=TIMEOUT) == "FINISHED", handle.status_detail()
        checkpoint = handle.status_detail()["checkpoint"]
        assert max(checkpoint["restored_from"]) > 0, checkpoint
    finally:
        handle.kill()
    assert etw.read_rows(sink) == etw.expected_rows(corpus)
