"""Effectively once: stateful word counts stay exact across failures.

The count bolt keeps its counts only in its checkpointed ``State``; the spouts' offsets are
part of the same checkpoints. Whatever fails (a task raising, or on real processes ``kill -9``
of an instance, a stmgr, a container's Spark Python worker, the driver), the final counts must
equal ``collections.Counter`` of the corpus: nothing lost, nothing counted twice. Each fault
strikes after at least two checkpoints committed, so the rollback goes back to a real one.
"""

from __future__ import annotations

import pytest

import fault_support as faults
import stateful_word_count as swc
from heron_spark import FileSpout, Grouping, TopologyBuilder, TwoPhaseStatefulComponent
from heron_spark.inprocess import InProcessTopology
from heron_spark.scheduler.submit import submit
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import run_local, wait_until

TIMEOUT = 240
LINES = 8000


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_in_process_crash_rolls_back_to_the_last_checkpoint(tmp_path, backend):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = swc.write_corpus(corpus, 5000)
    topology = swc.build("eo-in-process", corpus, out, interval=0.05,
                         config={swc.CRASH_AT: 10000, swc.SLEEP_MS: 0.3,
                                 "heron.state.backend": backend})
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work"),
                                            **swc.SHORT_QUEUES})
    assert run.run(timeout=120) == "FINISHED"
    assert (out / "crashed").exists()
    assert swc.read_counts(out) == swc.expected_counts(text)
    status = run.checkpoints.status()
    assert status["restores"] == 2, status  # the start, the crash
    assert status["restored_from"][1] > 0, status  # the crash went back to a real checkpoint
    assert sum(run.failures.values()) == 1


def test_run_local_with_rocksdb_counts_exactly(tmp_path):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = swc.write_corpus(corpus, 3000)
    topology = swc.build("eo-rocksdb-local", corpus, out, interval=0.05,
                         config={swc.CRASH_AT: 5000, "heron.state.backend": "rocksdb"})
    result = run_local(topology, conf={"heron.work.dir": str(tmp_path / "work"),
                                       **swc.SHORT_QUEUES}, timeout=120)
    assert result.status == "FINISHED" and (out / "crashed").exists()
    assert swc.read_counts(out) == swc.expected_counts(text)
    assert list((tmp_path / "work" / "checkpoints" / "eo-rocksdb-local").glob("*/*.manifest"))


def _start(spark, tmp_path, hconf, name, **config):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = swc.write_corpus(corpus, LINES)
    topology = swc.build(name, corpus, out, config={swc.SLEEP_MS: 2, **config})
    handle = submit(topology, spark=spark.session, conf={**hconf, **swc.SHORT_QUEUES},
                    master="local[4]")
    handle.wait_running(timeout=120)
    return text, out, handle


def _committed(statemgr_url: str, name: str) -> int:
    with open_state_manager(statemgr_url) as statemgr:
        return int((statemgr.get_committed_checkpoint(name) or {}).get("id", 0))


def _wait_commits(hconf, name, at_least: int = 2) -> int:
    return wait_until(lambda: (_committed(hconf["heron.statemgr"], name) >= at_least)
                      and _committed(hconf["heron.statemgr"], name), 90,
                      message=f"{at_least} committed checkpoints")


def _check(handle, text, out):
    assert handle.wait(timeout=TIMEOUT) == "FINISHED", handle.status_detail()
    assert swc.read_counts(out) == swc.expected_counts(text)
    checkpoint = handle.status_detail()["checkpoint"]
    assert max(checkpoint["restored_from"]) > 0, checkpoint
    return checkpoint


@pytest.mark.fault
@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_instance_killed(spark, tmp_path, hconf, backend):
    name = f"eo-instance-{backend}"
    text, out, handle = _start(spark, tmp_path, hconf, name, **{"heron.state.backend": backend})
    work = tmp_path / "work" / name
    _wait_commits(hconf, name)
    [victim, *_] = faults.find(work, "instance", component="count")
    faults.kill9(victim)
    checkpoint = _check(handle, text, out)
    assert sum(handle.status_detail()["instance_failures"].values()) >= 1
    print(f"checkpoints: {checkpoint}")


@pytest.mark.fault
def test_stmgr_killed(spark, tmp_path, hconf):
    name = "eo-stmgr"
    text, out, handle = _start(spark, tmp_path, hconf, name)
    work = tmp_path / "work" / name
    _wait_commits(hconf, name)
    [stmgr] = faults.find(work, "stmgr", container=1)
    faults.kill9(stmgr)
    checkpoint = _check(handle, text, out)
    print(f"checkpoints: {checkpoint}")


@pytest.mark.fault
def test_container_killed(spark, tmp_path, hconf):
    """On the rocksdb backend: the container's databases go with it; the checkpoints do not."""
    name = "eo-container"
    text, out, handle = _start(spark, tmp_path, hconf, name,
                               **{"heron.stage.resubmit.backoff.secs": 0.5,
                                  "heron.state.backend": "rocksdb"})
    work = tmp_path / "work" / name
    _wait_commits(hconf, name)
    [stmgr] = faults.find(work, "stmgr", container=0)
    faults.kill9(faults.parent_of(stmgr))  # the Spark Python worker running the barrier task
    checkpoint = _check(handle, text, out)
    assert handle.status_detail()["generation"] >= 1  # the stage was resubmitted
    print(f"checkpoints: {checkpoint}")



@pytest.mark.fault
def test_driver_killed_and_resumed(tmp_path, hconf):
    """On the rocksdb backend: a new driver resumes from the committed checkpoint's manifests."""
    name = "eo-driver"
    corpus, out, work = tmp_path / "corpus.txt", tmp_path / "out", tmp_path / "work"
    text = swc.write_corpus(corpus, LINES)
    args = [name, str(corpus), str(out), hconf["heron.statemgr"], str(work)]
    committed, log = faults.resume_after_driver_kill(
        "stateful-rocksdb", args, tmp_path, work, lambda: _wait_commits(hconf, name))
    assert "status FINISHED generation 1" in log
    assert swc.read_counts(out) == swc.expected_counts(text)
    print(f"the first driver committed checkpoint {committed} before it was killed")


class TwoPhaseCount(swc.StatefulCountBolt, TwoPhaseStatefulComponent):
    """The stateful count, writing its two-phase calls to ``out/events-<task>.txt``."""

    def _event(self, kind: str, checkpoint_id) -> None:
        with open(self.out / f"events-{self.task}.txt", "a") as events:
            events.write(f"{kind} {int(checkpoint_id)}\n")

    def pre_save(self, checkpoint_id):
        self._event("pre_save", checkpoint_id)

    def post_save(self, checkpoint_id):
        self._event("post_save", checkpoint_id)

    def pre_restore(self, checkpoint_id):
        self._event("pre_restore", checkpoint_id)


def test_two_phase_components_hear_each_commit_after_their_save_and_each_rollback(tmp_path):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = swc.write_corpus(corpus, 5000)
    builder = TopologyBuilder("two-phase")
    lines = builder.add_spout("lines", FileSpout, par=2,
                              config=FileSpout.settings(str(corpus), lines_per_call=8))
    split = builder.add_bolt("split", swc.SplitBolt, par=2, inputs={lines: Grouping.SHUFFLE})
    builder.add_bolt("count", TwoPhaseCount, par=2, inputs={split: Grouping.fields("word")})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 0.05,
                        "topology.stmgrs": 2, swc.OUT: str(out), swc.CRASH_AT: 10000,
                        swc.SLEEP_MS: 0.3})
    run = InProcessTopology(builder.build(), conf={"heron.work.dir": str(tmp_path / "work"),
                                                   **swc.SHORT_QUEUES})
    assert run.run(timeout=120) == "FINISHED"
    assert swc.read_counts(out) == swc.expected_counts(text)
    status = run.checkpoints.status()
    rolled_back_to = status["restored_from"][1]  # the crash's rollback
    assert rolled_back_to > 0, status
    restores = 0
    for path in sorted(out.glob("events-*.txt")):
        events = [(kind, int(n)) for kind, n in
                  (line.split() for line in path.read_text().splitlines())]
        saved: set[int] = set()
        last_post = 0
        for kind, n in events:
            if kind == "pre_save":
                saved.add(n)
            elif kind == "post_save":  # after this task's own save, once, in order
                assert n in saved and n > last_post, (path.name, events)
                assert n <= status["committed"]
                last_post = n
            else:
                assert (kind, n) == ("pre_restore", rolled_back_to), (path.name, events)
                restores += 1
        assert last_post >= 1, (path.name, events)  # commits reached every task
    # the task that crashed is rebuilt without a pre_restore; the other count task hears it
    assert restores == 1
