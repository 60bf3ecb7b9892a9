"""Task hooks (heronpy's ``heronpy.api.task_hook``).

User code told of every emit, ack, fail and execute of a task.

Register a hook with ``context.add_task_hook(hook)`` (in ``initialize``, or later), or name
hook classes in the config key ``topology.auto.task.hooks`` (a list of classes or of their
dotted paths; each task makes one instance of each, before ``initialize``). Hooks run on the
task-execution thread, synchronously, where Heron calls them:

- ``prepare(conf, context)``: after the component's ``initialize``;
- ``clean_up()``: when the task ends cleanly, before a spout's ``close``;
- ``emit(EmitInfo)``: for each tuple a spout's or bolt's ``emit`` accepted (``out_tasks``: the
  task ids ``emit`` returned when asked with ``need_task_ids``, else None);
- ``spout_ack(SpoutAckInfo)`` / ``spout_fail(SpoutFailInfo)``: after the spout's ``ack`` /
  ``fail`` for a tuple tree, with the time since its emit (a timeout's latency is the timeout);
- ``bolt_execute(BoltExecuteInfo)``: after ``process`` returns, with the time it took (not
  for tick tuples);
- ``bolt_ack(BoltAckInfo)`` / ``bolt_fail(BoltFailInfo)``: for each ``ack`` / ``fail`` of an
  input tuple (also at-most-once, as in Heron; also a bolt's automatic acks), with the time
  since the instance received it.

Latencies are milliseconds (floats). Batch components (``BatchSpout``, ``BatchBolt``) get
``prepare``, ``clean_up`` and, for batch spouts, ``spout_ack``/``spout_fail``; their
``emit_batch`` and ``process_batch`` do not call hooks. A task with no hook pays nothing:
the hooked paths are installed only when a hook exists.
"""

from __future__ import annotations

from collections import namedtuple

from heron_spark.api import api_constants
from heron_spark.api._loading import load_class
from heron_spark.errors import ConfigError


class ITaskHook:
    """Subclass and override the events you need; every method does nothing by default."""

    def prepare(self, conf: dict, context) -> None:
        """Prepare the hook: called after the spout's or bolt's ``initialize``; ``conf`` is its config."""

    def clean_up(self) -> None:
        """Clean up: called when the task ends cleanly, before the spout's ``close``."""

    def emit(self, emit_info: "EmitInfo") -> None:
        """Observe a tuple the task emits (called for every one)."""

    def spout_ack(self, spout_ack_info: "SpoutAckInfo") -> None:
        """Observe a spout's acked tuple tree (called for every one)."""

    def spout_fail(self, spout_fail_info: "SpoutFailInfo") -> None:
        """Observe a spout's tuple tree that failed or timed out (called for every one)."""

    def bolt_execute(self, bolt_execute_info: "BoltExecuteInfo") -> None:
        """Observe a bolt's ``process`` of a tuple (called after it returns)."""

    def bolt_ack(self, bolt_ack_info: "BoltAckInfo") -> None:
        """Observe a bolt's ack of an input tuple (called for every one)."""

    def bolt_fail(self, bolt_fail_info: "BoltFailInfo") -> None:
        """Observe a bolt's fail of an input tuple (called for every one)."""


EmitInfo = namedtuple("EmitInfo", "values, stream_id, task_id, out_tasks")
"""An emit: the ``values``, the ``stream_id``, the emitting ``task_id`` and ``out_tasks``
(the target task ids when the emit asked for them, else None)."""

SpoutAckInfo = namedtuple("SpoutAckInfo", "message_id, spout_task_id, complete_latency_ms")
"""A spout's tuple tree acked: its ``message_id``, the spout's task id and the time from emit
to ack (ms)."""

SpoutFailInfo = namedtuple("SpoutFailInfo", "message_id, spout_task_id, fail_latency_ms")
"""A spout's tuple tree failed: its ``message_id``, the spout's task id and the time from emit
to fail (ms; the message timeout for a timed-out tree)."""

BoltExecuteInfo = namedtuple("BoltExecuteInfo",
                             "heron_tuple, executing_task_id, execute_latency_ms")
"""A bolt's ``process`` of ``heron_tuple``: the bolt's task id and how long it took (ms)."""

BoltAckInfo = namedtuple("BoltAckInfo", "heron_tuple, acking_task_id, process_latency_ms")
"""A bolt acked ``heron_tuple``: its task id and the time since the tuple arrived (ms)."""

BoltFailInfo = namedtuple("BoltFailInfo", "heron_tuple, failing_task_id, fail_latency_ms")
"""A bolt failed ``heron_tuple``: its task id and the time since the tuple arrived (ms)."""


def auto_hook_classes(config: dict, component: str | None = None) -> list[type]:
    """Return the ``ITaskHook`` classes ``topology.auto.task.hooks`` names in ``config``.

    Return the classes ``topology.auto.task.hooks`` names in ``config`` (a list of classes or
    dotted paths, or one of them); raise ``ConfigError`` for one that is no ``ITaskHook``.
    """
    key = api_constants.TOPOLOGY_AUTO_TASK_HOOKS
    value = config.get(key)
    if value is None or value == "":
        return []
    names = [value] if isinstance(value, (str, type)) else value
    if not isinstance(names, (list, tuple)):
        raise ConfigError(key, value, "give a list of ITaskHook classes or of their dotted paths")
    classes = []
    for name in names:
        cls = load_class(name, key, component)
        if not issubclass(cls, ITaskHook):
            raise ConfigError(key, name, "name subclasses of heronpy.api.task_hook.ITaskHook")
        classes.append(cls)
    return classes


__all__ = ["BoltAckInfo", "BoltExecuteInfo", "BoltFailInfo", "EmitInfo", "ITaskHook",
           "SpoutAckInfo", "SpoutFailInfo"]
