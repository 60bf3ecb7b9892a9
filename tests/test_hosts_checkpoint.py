"""Effectively once across hosts: a task restored on another host must find its state.

The default ``heron.checkpoint.root`` is on the local disk (``<work dir>/checkpoints``): a task
whose container moves to another host (host loss) would find no file there. Committed means
every stateful task saved, so a missing file is lost state: the task fails with the fix
instead of silently starting empty. Two roots stand for the two hosts' local disks.
"""

from __future__ import annotations

import pytest

from heron_spark.api.state import StatefulComponent
from heron_spark.config import StateSettings, SystemConfig
from heron_spark.errors import TopologyRuntimeError
from heron_spark.instance.stateful import TaskState
from heron_spark.testing import wait_until

BACKENDS = ["memory", "rocksdb"]


class Counter(StatefulComponent):
    def init_state(self, stateful_state):
        self.state = stateful_state


def _task(root, backend: str = "memory") -> TaskState:
    config = SystemConfig(checkpoint_root=str(root), work_dir=str(root.parent / "work"))
    return TaskState(config, "wc", 7, "count", StateSettings(backend))


def _saved(root, checkpoint: int, backend: str) -> None:
    task = _task(root, backend)
    counter = Counter()
    task.load(counter, 0, 0)
    counter.state.put("w01", 3)
    task.snapshot(counter, checkpoint)
    done: list = []
    wait_until(lambda: done.extend(task.finished()) or done, 30, interval=0.01)
    assert done == [(checkpoint, None)]
    task.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stateful_task_restored_where_its_checkpoint_is_missing_fails_with_the_fix(tmp_path,
                                                                                    backend):
    _saved(tmp_path / "host-1", 4, backend)
    elsewhere = _task(tmp_path / "host-2", backend)
    with pytest.raises(TopologyRuntimeError, match="heron.checkpoint.root") as raised:
        elsewhere.load(Counter(), 1, 4)
    assert "checkpoint 4" in str(raised.value) and raised.value.task_id == 7


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_checkpoint_on_shared_storage_restores(tmp_path, backend):
    _saved(tmp_path / "shared", 4, backend)
    counter = Counter()
    task = _task(tmp_path / "shared", backend)
    task.load(counter, 1, 4)
    assert counter.state.get("w01") == 3
    task.close()


def test_a_task_without_state_needs_no_file(tmp_path):
    task = _task(tmp_path / "host-2")
    task.load(object(), 1, 4)  # not a StatefulComponent: it saved nothing
    task.load(Counter(), 0, 0)  # checkpoint 0: empty state, no file to read
