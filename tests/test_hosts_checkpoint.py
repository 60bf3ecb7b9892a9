"""Effectively once across hosts: a task restored on another host must find its state.

The default ``heron.checkpoint.root`` is on the local disk (``<work dir>/checkpoints``): a task
whose container moves to another host (host loss) would find no file there. Committed means
every stateful task saved, so a missing file is lost state: the task fails with the fix
instead of silently starting empty. Two roots stand for the two hosts' local disks.
"""

from __future__ import annotations

import pytest

from heron_spark.api.state import StatefulComponent
from heron_spark.config import SystemConfig
from heron_spark.errors import TopologyRuntimeError
from heron_spark.instance.stateful import TaskState


class Counter(StatefulComponent):
    def init_state(self, stateful_state):
        self.state = stateful_state


def _saved(root, checkpoint: int) -> None:
    task = TaskState(SystemConfig(checkpoint_root=str(root)), "wc", 7)
    counter = Counter()
    task.load(counter, 0, 0)
    counter.state.put("w01", 3)
    task.save(counter, checkpoint)


def test_a_stateful_task_restored_where_its_checkpoint_is_missing_fails_with_the_fix(tmp_path):
    _saved(tmp_path / "host-1", 4)
    elsewhere = TaskState(SystemConfig(checkpoint_root=str(tmp_path / "host-2")), "wc", 7)
    with pytest.raises(TopologyRuntimeError, match="heron.checkpoint.root") as raised:
        elsewhere.load(Counter(), 1, 4)
    assert "checkpoint 4" in str(raised.value) and raised.value.task_id == 7


def test_the_same_checkpoint_on_shared_storage_restores(tmp_path):
    _saved(tmp_path / "shared", 4)
    counter = Counter()
    TaskState(SystemConfig(checkpoint_root=str(tmp_path / "shared")), "wc", 7).load(counter, 1, 4)
    assert counter.state.get("w01") == 3


def test_a_task_without_state_needs_no_file(tmp_path):
    task = TaskState(SystemConfig(checkpoint_root=str(tmp_path / "host-2")), "wc", 7)
    task.load(object(), 1, 4)  # not a StatefulComponent: it saved nothing
    task.load(Counter(), 0, 0)  # checkpoint 0: empty state, no file to read
