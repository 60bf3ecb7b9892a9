"""A stateful task's state metrics: state size, checkpoint pause / upload / alignment, bytes
uploaded, restore time.

The state benchmark's topology (``benchmarks/state.py``: a spout of ``key-{i % K}``, a stateful
count on 2 tasks, fields grouping) runs in process on both backends, with checkpoints every
0.1 s; its counts are checked exactly, and each counting task's published metrics against what
it owns: the keys its counts file holds (exactly for ``memory``; ``rocksdb`` publishes RocksDB's
estimate, at least the keys and at most the puts), bytes uploaded > 0, times >= 0; the stmgrs
publish each counting task's alignment. A restore's time and the alignment's measure are
checked on the parts themselves (a ``TaskState``, a ``CheckpointGateway`` on a fake clock).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from heron_spark.api.state import StatefulComponent, TwoPhaseStatefulComponent
from heron_spark.config import StateSettings, SystemConfig
from heron_spark.contract import ids
from heron_spark.contract import metric_names as names
from heron_spark.inprocess import InProcessTopology
from heron_spark.instance.stateful import TaskState
from heron_spark.stmgr.gateway import CheckpointGateway
from heron_spark.testing import ManualClock, wait_until
from heron_spark.wire import frames

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import state as state_benchmark  # noqa: E402

KEYS, TUPLES = 50, 30_000
STATE_METRICS = (names.STATE_KEYS, names.STATE_BYTES, names.CHECKPOINT_PAUSE_MS,
                 names.CHECKPOINT_UPLOAD_MS, names.CHECKPOINT_UPLOADED_BYTES,
                 names.CHECKPOINT_UPLOADED_BYTES_TOTAL)


def _published(add_metrics) -> dict[str, float]:
    """Return what ``add_metrics`` adds to a metrics publish, name -> value."""
    published: dict[str, float] = {}
    add_metrics(lambda name, value: published.__setitem__(name, value))
    return published


class _SpoutEndingAfterACheckpoint(state_benchmark.KeySpout, TwoPhaseStatefulComponent):
    """The benchmark's spout, exhausted only once a checkpoint taken after its last emit has
    committed: every counting task then has checkpointed (a fast run can otherwise end before
    the first 0.1 s checkpoint reaches a task, and that task has nothing to publish)."""

    def pre_save(self, checkpoint_id):
        super().pre_save(checkpoint_id)
        if self.next >= self.tuples and not hasattr(self, "final_checkpoint"):
            self.final_checkpoint = int(checkpoint_id)

    def post_save(self, checkpoint_id):
        if int(checkpoint_id) >= getattr(self, "final_checkpoint", float("inf")):
            self.saved_after_the_end = True

    def next_tuple(self):
        if self.next < self.tuples or getattr(self, "saved_after_the_end", False):
            super().next_tuple()


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_each_counting_task_publishes_its_state_and_checkpoint_figures(tmp_path, backend,
                                                                        monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(state_benchmark, "KeySpout", _SpoutEndingAfterACheckpoint)
    topology = state_benchmark.build(KEYS, TUPLES, backend, 0.1, out)
    runner = InProcessTopology(topology, conf={"heron.statemgr": f"file://{tmp_path / 'state'}",
                                               "heron.work.dir": str(tmp_path / "work")})
    assert runner.run(timeout=120) == "FINISHED"
    state_benchmark._check_counts(out, KEYS, TUPLES)  # exact, each key on one task
    count_tasks = runner.plan.component_tasks["count"]
    for task in count_tasks:
        counts = json.loads((out / f"counts-{task}.json").read_text())
        published = _published(runner.tasks[task].executor.add_metrics)
        assert set(STATE_METRICS) <= published.keys(), f"task {task}: {sorted(published)}"
        if backend == "memory":
            assert published[names.STATE_KEYS] == len(counts)
        else:
            assert len(counts) <= published[names.STATE_KEYS] <= sum(counts.values())
        assert published[names.STATE_BYTES] > 0
        assert published[names.CHECKPOINT_UPLOADED_BYTES] > 0
        assert published[names.CHECKPOINT_UPLOADED_BYTES_TOTAL] >= \
            published[names.CHECKPOINT_UPLOADED_BYTES]
        assert published[names.CHECKPOINT_PAUSE_MS] >= 0
        assert published[names.CHECKPOINT_UPLOAD_MS] >= 0
        assert names.STATE_RESTORE_MS not in published  # a fresh start restores nothing
    stmgrs = runner.metrics()[ids.STMGR_COMPONENT]
    for task in count_tasks:
        assert stmgrs[names.scoped(names.CHECKPOINT_ALIGNMENT_MS, str(task))] >= 0


class _Stateful(StatefulComponent):
    def init_state(self, state):
        self.state = state


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_a_restore_publishes_its_time_and_a_snapshot_its_size(tmp_path, backend):
    config = SystemConfig(work_dir=str(tmp_path / "work"), checkpoint_root=str(tmp_path / "root"))
    task, component = TaskState(config, "topo", 1, "sum", StateSettings(backend, 0.0)), _Stateful()
    task.load(component, 0, 0)
    for i in range(1000):
        task.state.put(f"key-{i}", i)
    task.snapshot(component, 3)
    done: list = []
    wait_until(lambda: done.extend(task.finished()) or done, 30, interval=0.01)
    assert done == [(3, None)]
    stats = task.stats
    if backend == "memory":
        assert stats.keys == 1000
        path = Path(task.store.path(3, 1))
        assert stats.bytes == stats.uploaded_bytes == path.stat().st_size
    else:
        assert stats.keys >= 1000  # RocksDB's estimate
        assert 0 < stats.uploaded_bytes <= stats.bytes
    assert stats.restore_ms == 0
    task.close()
    again = TaskState(config, "topo", 1, "sum", StateSettings(backend, 0.0))
    again.load(_Stateful(), 1, 3)
    published = _published(again.stats.add_metrics)
    assert published == {names.STATE_RESTORE_MS: again.stats.restore_ms}
    assert again.stats.restore_ms > 0
    again.close()


def test_alignment_is_the_time_from_the_first_marker_to_the_last():
    clock = ManualClock(100.0)
    delivered: list = []
    gateway = CheckpointGateway({7: frozenset({1, 2})},
                                lambda task, frame, rows: delivered.append(frame) or True,
                                clock=clock)

    def marker(src: int) -> bytes:
        return frames.data_frame(frames.CHECKPOINT_MARKER, src, 7, 0, b"4")

    gateway.offer(7, marker(1), 0)
    clock.sleep(0.25)
    assert not delivered and 7 not in gateway.alignment_secs
    gateway.offer(7, marker(2), 0)
    assert len(delivered) == 1 and gateway.alignment_secs[7] == pytest.approx(0.25)
