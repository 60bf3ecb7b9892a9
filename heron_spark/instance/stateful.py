"""Effectively once, the task's side: load state at start, save it at checkpoints.

A ``TaskState`` belongs to one executor. At every start (the first, or a restore after a
failure) it loads the state of the checkpoint the stmgr names (none: empty) and hands it to a
``StatefulComponent``'s ``init_state``. When a checkpoint reaches the task (a spout: the
TMaster's StartCheckpoint; a bolt: the aligned marker) the executor sends what it buffered,
calls ``pre_save``, saves the state (``statemgr.checkpoints``), sends the marker to every
downstream task and reports the save; the TMaster commits the checkpoint once every task has.
"""

from __future__ import annotations

import pickle

from heron_spark.api.state import HashMapState, StatefulComponent
from heron_spark.config import SystemConfig
from heron_spark.errors import TopologyRuntimeError
from heron_spark.statemgr.checkpoints import CheckpointStore, checkpoint_root


class TaskState:
    """One task's checkpointed state; see the module docstring."""

    def __init__(self, config: SystemConfig, topology: str, task_id: int) -> None:
        self._root = checkpoint_root(config.checkpoint_root, config.work_dir)
        self._topology = topology
        self.task_id = task_id
        self._store: CheckpointStore | None = None
        self.state = HashMapState()
        self.epoch = 0
        self.checkpoint_id = 0
        self.saved = 0

    @property
    def store(self) -> CheckpointStore:
        """Return the checkpoint store, opened on first use."""
        if self._store is None:
            self._store = CheckpointStore(self._root, self._topology)
        return self._store

    def load(self, component, epoch: int, checkpoint_id: int) -> None:
        """Load ``checkpoint_id``'s state (0: empty) and give it to ``component``."""
        self.epoch, self.checkpoint_id = epoch, checkpoint_id
        data = self.store.load(checkpoint_id, self.task_id) if checkpoint_id else None
        if data is None and checkpoint_id and isinstance(component, StatefulComponent):
            # Committed means every stateful task saved: the file is gone or was written on
            # another host's local disk (the default root). Never start from empty state.
            msg = (f"the committed checkpoint {checkpoint_id} holds no state for this task "
                   f"under heron.checkpoint.root {self._root!r} (saved on another host's "
                   f"local disk?); set heron.checkpoint.root to storage every executor "
                   f"reaches (hdfs://, s3://, a shared file:// mount)")
            raise TopologyRuntimeError(msg, task_id=self.task_id)
        self.state = HashMapState(pickle.loads(data) if data else {})
        if isinstance(component, StatefulComponent):
            component.init_state(self.state)

    def save(self, component, checkpoint_id: int) -> None:
        """``pre_save``, then write the state for ``checkpoint_id``."""
        if isinstance(component, StatefulComponent):
            component.pre_save(str(checkpoint_id))
            data = pickle.dumps(self.state.to_dict() if isinstance(self.state, HashMapState)
                                else dict(_items(self.state)), protocol=pickle.HIGHEST_PROTOCOL)
            self.store.save(checkpoint_id, self.task_id, data)
        self.saved += 1


def _items(state):
    """(key, value) pairs of a user-defined ``State`` (its ``enumerate`` gives the keys)."""
    for _, key in state.enumerate():
        yield key, state.get(key)
