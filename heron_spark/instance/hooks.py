"""Task hooks inside an instance.

Loading ``topology.auto.task.hooks`` and calling every hook where Heron does (see
``api.task_hook``).

The executor keeps ``hooks = None`` until a task's first hook is added; only then does
``install`` put hooked paths in place (the delegate's ``emit``/``ack``/``fail`` wrapped, the
component's fast paths unbound), and the executor checks ``hooks`` once per batch or turn,
never per tuple, so a task without hooks runs exactly as before. Loop thread only.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from heron_spark.api.task_hook import (BoltAckInfo, BoltExecuteInfo, BoltFailInfo, EmitInfo,
                                       ITaskHook, SpoutAckInfo, SpoutFailInfo, auto_hook_classes)

_perf = time.perf_counter
_now = time.time


def auto_hooks(config: dict, component: str | None = None) -> list[ITaskHook]:
    """Return one new instance of each class ``topology.auto.task.hooks`` names in ``config``."""
    return [cls() for cls in auto_hook_classes(config, component)]


class TaskHooks:
    """The hooks of one task (the context's live list) and the calls that report to them."""

    def __init__(self, hooks: list[ITaskHook], task_id: int) -> None:
        self.hooks = hooks
        self.task_id = task_id
        self._cleaned = False

    def install(self, executor) -> None:
        """Route the executor's delegate calls through the hooks.

        Unbind the fast paths bound onto the component, wrap ``emit`` (and a bolt's
        ``ack``/``fail``).
        """
        component = executor.component
        for name, fast in executor._bound.items():
            if component is not None and component.__dict__.get(name) is fast:
                del component.__dict__[name]
        executor._bound = {}
        executor.emit = self._emitting(executor.emit)
        if hasattr(executor, "acks"):  # a bolt
            executor.ack = self._acking(executor.ack, BoltAckInfo, "bolt_ack")
            executor.fail = self._acking(executor.fail, BoltFailInfo, "bolt_fail")

    # ---- life cycle ------------------------------------------------------------------------
    def prepare(self, conf: dict, context) -> None:
        """After ``initialize``."""
        for hook in self.hooks:
            hook.prepare(conf, context)

    def clean_up(self) -> None:
        """Once, when the task ends cleanly."""
        if self._cleaned:
            return
        self._cleaned = True
        for hook in self.hooks:
            hook.clean_up()

    # ---- wrappers the executor installs or takes per batch ----------------------------------
    def _emitting(self, emit: Callable) -> Callable:
        hooks, task_id = self.hooks, self.task_id

        def hooked_emit(values, stream, tup_id, anchors, direct_task, need_task_ids,
                        timestamp=None, partition=None):
            result = emit(values, stream, tup_id, anchors, direct_task, need_task_ids,
                          timestamp, partition)
            info = EmitInfo(values, stream, task_id, result if need_task_ids else None)
            for hook in hooks:
                hook.emit(info)
            return result

        return hooked_emit

    def _acking(self, settle: Callable, info_type: type, method: str) -> Callable:
        hooks, task_id = self.hooks, self.task_id

        def hooked(tup) -> None:
            settle(tup)
            info = info_type(tup, task_id, (_now() - tup.creation_time) * 1000.0)
            for hook in hooks:
                getattr(hook, method)(info)

        return hooked

    def acking(self, ack: Callable) -> Callable:
        """Return a bolt's automatic ack (auto-ack mode), reported as ``bolt_ack``."""
        return self._acking(ack, BoltAckInfo, "bolt_ack")

    def executing(self, process: Callable) -> Callable:
        """``process`` timed and reported as ``bolt_execute``."""
        hooks, task_id = self.hooks, self.task_id

        def hooked_process(tup) -> None:
            start = _perf()
            process(tup)
            info = BoltExecuteInfo(tup, task_id, (_perf() - start) * 1000.0)
            for hook in hooks:
                hook.bolt_execute(info)

        return hooked_process

    def spout_acking(self, ack: Callable, latencies_ms: Iterable[float]) -> Callable:
        """Return the spout's ``ack``, then ``spout_ack`` with the next of ``latencies_ms``."""
        return self._spout_settling(ack, latencies_ms, SpoutAckInfo, "spout_ack")

    def spout_failing(self, fail: Callable, latencies_ms: Iterable[float]) -> Callable:
        """Return the spout's ``fail``, then ``spout_fail`` with the next of ``latencies_ms``."""
        return self._spout_settling(fail, latencies_ms, SpoutFailInfo, "spout_fail")

    def _spout_settling(self, settle: Callable, latencies_ms: Iterable[float], info_type: type,
                        method: str) -> Callable:
        hooks, task_id = self.hooks, self.task_id
        latencies = iter(latencies_ms)

        def hooked(message_id) -> None:
            settle(message_id)
            info = info_type(message_id, task_id, next(latencies))
            for hook in hooks:
                getattr(hook, method)(info)

        return hooked
