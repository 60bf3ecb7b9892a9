"""What the two shells around a task's executor share: building it, reporting its failure.

A task runs in one of two shells: its own process on Spark (``runtime.InstanceRuntime``, on
an epoll loop) or the in-process runner (``inprocess.runner``, every task on one thread).
Both drive the executor the same way (``offer`` frames, ``turn``; see ``executor.py``), build
it with ``build_executor`` and, when its user code raises, report that with
``report_failure``: one ``InstanceFailed`` to the stmgr, which passes it to the TMaster (that
counts it against ``heron.instance.restart.max``, or fails the topology at once when it is
``permanent``: a deterministic ``ConnectorError`` that restarts would only repeat).
"""

from __future__ import annotations

import logging
import time
import traceback
from typing import Callable

from heron_spark.config import SystemConfig
from heron_spark.contract.exit_codes import ExitCode
from heron_spark.errors import permanent_error
from heron_spark.instance.bolt_executor import BoltExecutor
from heron_spark.instance.executor import TaskExecutor
from heron_spark.instance.spout_executor import SpoutExecutor
from heron_spark.plan.view import PlanView
from heron_spark.proto import stmgr_pb2, tmaster_pb2
from heron_spark.wire import frames

_ERROR_CHARS = 8000  # the end of a traceback the report keeps


def task_logger(plan: PlanView, task_id: int) -> logging.Logger:
    """Return the logger of a task's user code and executor (``<component>.<task id>``)."""
    return logging.getLogger(f"{plan.task_component[task_id]}.{task_id}")


def build_executor(plan: PlanView, task_id: int, config: SystemConfig,
                   send: Callable[[bytes | list], object],
                   clock: Callable[[], float] = time.monotonic,
                   push: Callable[[], None] | None = None,
                   output_queued: Callable[[], int] | None = None,
                   wake: Callable[[], None] | None = None) -> TaskExecutor:
    """Return the executor of ``task_id``: a ``SpoutExecutor`` or a ``BoltExecutor``.

    ``send(frame)`` queues a frame for the stmgr; ``push()`` (optional) writes what is queued
    at once; ``output_queued()`` returns the bytes sent that the stmgr has not taken yet (the
    output gate watches them); ``clock`` is monotonic, in seconds; ``wake()`` (optional, any
    thread) brings the task's loop back for a turn (a checkpoint's upload finished).
    """
    component = plan.task_component[task_id]
    executor_class = SpoutExecutor if plan.logical.components[component].is_spout \
        else BoltExecutor
    kwargs = {} if output_queued is None else {"output_queued": output_queued}
    return executor_class(plan, task_id, config, send, task_logger(plan, task_id),
                          clock=clock, push=push, wake=wake, **kwargs)


def failure_frame(task_id: int, component: str, exc: BaseException, log_path: str) -> bytes:
    """Return the frame telling the stmgr that ``task_id``'s user code raised ``exc``.

    ``permanent`` is set when ``exc`` is, or was caused by, a permanent ``ConnectorError``
    (the TMaster then fails the topology at once); the error's last line is then that
    ``ConnectorError``'s message, which the TMaster gives as the reason.
    """
    error = "".join(traceback.format_exception(exc))
    permanent = permanent_error(exc)
    if permanent is not None and permanent is not exc:  # wrapped: its message goes last
        error += f"{type(permanent).__name__}: {permanent}\n"
    failed = tmaster_pb2.InstanceFailed(task_id=task_id, component=component,
                                        error=error[-_ERROR_CHARS:], log_path=log_path,
                                        exit_code=ExitCode.FAILED,
                                        permanent=permanent is not None)
    return frames.control_frame(stmgr_pb2.InstanceToStmgr(failed=failed))


def report_failure(executor: TaskExecutor, exc: BaseException, log_path: str) -> object:
    """Log that ``executor``'s user code raised ``exc`` and send the stmgr the failure report.

    Sent with the executor's ``send``; return what ``send`` returned.
    """
    executor.logger.error("user code of %s task %d failed", executor.component_name,
                          executor.task_id, exc_info=exc)
    return executor.send(failure_frame(executor.task_id, executor.component_name, exc,
                                       log_path))
