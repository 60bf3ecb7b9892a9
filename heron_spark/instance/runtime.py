"""The Heron Instance process: the I/O shell around one task's executor.

One thread does the work: it runs the loop (``wire.loop``) on the connection to the local
stmgr (a Unix socket, or loopback elsewhere, whatever address the stmgr advertises to its
peers) and the user's code in between, so a batch never waits for another thread to get the
GIL. ``serve`` is that loop: wait for frames until the executor's wake-up time, offer them to
the executor, let it take its turn (``TaskExecutor.turn``, the same turn the in-process
runner drives: the input its gate allows, ticks and timeouts, a spout's ``next_tuple``
slice, the turn's output), write the output, and read the socket again only while the
executor accepts more. Output that the stmgr has not taken yet is bounded by
``heron.instance.out.queue.bytes``: past it a bolt stops reading its input and a spout stops
calling ``next_tuple``, until the queue drains to half of it.

Helper threads never touch the connection: the metrics client (publishes counters, so
metrics flow while user code runs or waits), the watchdog (heartbeat; when one user-code
call outlasts ``heron.instance.user.code.timeout.secs`` it writes the reason where the stmgr
reads it and ends the process) and, effectively once, the checkpoint uploader
(``instance.uploader``), which wakes the loop when an upload ends.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from typing import Callable

from heron_spark import _process
from heron_spark.api.batch import BatchBolt, BatchSpout
from heron_spark.container.files import ContainerFiles
from heron_spark.contract import layout, metric_names, roles
from heron_spark.contract.exit_codes import ExitCode
from heron_spark.instance.executor import Stop, TaskExecutor
from heron_spark.instance.shell import build_executor, report_failure
from heron_spark.metrics.client import MetricsClient
from heron_spark.plan.view import PlanView
from heron_spark.proto import metrics_pb2, stmgr_pb2
from heron_spark.wire import arrow_numpy, frames, tuple_batch
from heron_spark.wire.connection import dial_with_retry
from heron_spark.wire.loop import Channel, Loop, loop_traffic

log = logging.getLogger(__name__)


class InstanceRuntime:
    """Runs one task; see the module docstring."""

    def __init__(self, files: ContainerFiles, task_id: int, stmgr_address: str) -> None:
        self.files = files
        self.config = files.load_config()
        plan = files.load_plan()
        self.task_id = task_id
        self.component_name = plan.task_component[task_id]
        self.log_path = str(files.instance_log(self.component_name, task_id))
        self.logger = logging.getLogger(f"{self.component_name}.{task_id}")
        secret = files.load_secret()
        tls = files.load_tls()  # used when the stmgr's local address is TCP
        topology = plan.logical.name
        prepare_arrow(plan, self.component_name)  # before registering: start warm
        self.loop = Loop()
        sock = dial_with_retry(stmgr_address, secret, topology, roles.INSTANCE, task_id,
                               self.config.startup_timeout_secs, tls=tls)
        self.channel = Channel(self.loop, sock, f"instance-{task_id}", self._on_frame,
                               self._on_close, max_frame_bytes=self.config.frame_max_bytes)
        channel = self.channel
        self.executor = build_executor(plan, task_id, self.config, channel.send,
                                       clock=self.loop.clock, push=channel.write_now,
                                       output_queued=lambda: channel.queued_bytes,
                                       wake=self._wake)
        self._offer = self.executor.offer
        self._stmgr_gone = False
        self.metrics = MetricsClient(files, secret, topology, task_id,
                                     self.config.metrics_interval_ms / 1000.0,
                                     self.config.frame_max_bytes, self._metrics_snapshot,
                                     tls=tls).start()
        if self.config.user_code_timeout_secs > 0:
            _process.set_health_check(self._user_code_health, self._on_stuck)
        _process.settle_gc(self.config.python_gc_young_objects)
        self.channel.send(frames.control_frame(stmgr_pb2.InstanceToStmgr(
            register=stmgr_pb2.RegisterInstance(task_id=task_id, pid=os.getpid()))))
        self.loop.flush()

    def _wake(self) -> None:
        """Bring the loop back for a turn (the uploader thread: a checkpoint upload ended)."""
        self.loop.call_soon_threadsafe(_nothing)

    # ---- connection callbacks (loop thread) ------------------------------------------------
    def _on_frame(self, channel: Channel, kind: int, frame: bytes | bytearray) -> None:
        self._offer(kind, frame)

    def _on_close(self, channel: Channel) -> None:
        self._stmgr_gone = True

    # ---- the loop --------------------------------------------------------------------------
    def run(self) -> int:
        """Run the task until shutdown; return the process exit code."""
        try:
            serve(self.executor, self.loop, self.channel, self._check_stmgr)
        except Stop as stop:
            self.executor.close()
            self.channel.flush_blocking(self.config.kill_grace_secs)
            self.metrics.close()
            return stop.code
        except Exception as exc:  # noqa: BLE001 - user code failed: report, then exit non-zero
            if report_failure(self.executor, exc, self.log_path):
                self.channel.flush_blocking(self.config.kill_grace_secs)
            return ExitCode.FAILED
        return ExitCode.OK

    def _check_stmgr(self) -> None:
        if self._stmgr_gone:
            self.executor.take_all_input()  # what came before the close (a shutdown?)
            self.logger.warning("stmgr connection closed; exiting")
            raise Stop(ExitCode.STMGR_LOST)

    # ---- health (watchdog thread) -----------------------------------------------------------
    def _user_code_health(self) -> str | None:
        busy = self.loop.busy_since
        limit = self.config.user_code_timeout_secs
        if busy is None or time.monotonic() - busy <= limit:
            return None
        main = threading.main_thread().ident  # None only before a thread starts
        frame = sys._current_frames().get(main) if main is not None else None
        stack = "".join(traceback.format_stack(frame)) if frame is not None else ""
        return (f"{self.component_name} task {self.task_id} has been inside one call of user "
                f"code for more than {limit:g} s (heron.instance.user.code.timeout.secs); "
                f"killed and restarted. Its stack:\n{stack}")

    def _on_stuck(self, reason: str) -> None:
        """Leave the reason where the stmgr reads it when the connection drops, and exit.

        The loop thread is inside user code: the connection is not ours to write.
        """
        self.logger.error("%s", reason)
        try:
            self.files.stall_note(layout.task_child(self.task_id)).write_text(reason)
        except OSError:
            pass
        logging.shutdown()
        os._exit(ExitCode.FAILED)

    # ---- metrics (metrics thread) -----------------------------------------------------------
    def _metrics_snapshot(self) -> metrics_pb2.MetricsPublish:
        """Build this task's metrics (reads counters only)."""
        publish = metrics_pb2.MetricsPublish(component=self.component_name, task_id=self.task_id,
                                             timestamp_ms=int(time.time() * 1000))
        add = publish.metrics.add
        self.executor.add_metrics(add)
        add(name=metric_names.METRICS_DROPPED, value=self.metrics.dropped)
        loop_traffic(self.loop, add)
        return publish


def _nothing() -> None:
    """Do nothing: a hand-off whose only job is to end the loop's wait."""


def prepare_arrow(plan: PlanView, component: str) -> None:
    """Set Arrow up for ``component``'s task: its memory pool, warm kernels, and no pandas.

    A per-tuple component's process keeps pyarrow from importing pandas for its own probes
    (``arrow_numpy.settle_pandas_probe``); a ``BatchBolt``/``BatchSpout`` may
    take and emit pandas frames, so pyarrow's probe stays as it is there.
    """
    if not issubclass(plan.logical.components[component].component_class,
                      (BatchBolt, BatchSpout)):
        arrow_numpy.settle_pandas_probe()
    tuple_batch.use_lean_memory_pool()
    tuple_batch.warm_up()  # the first real batch does not pay for first use


def serve(executor: TaskExecutor, loop: Loop, channel: Channel,
          after_poll: Callable[[], None]) -> None:
    """Give ``executor`` its turns until it raises (``Stop``, or its user code failed).

    Wait on ``loop`` until the executor's wake-up time (None: until input comes; the
    channel's ``on_frame`` offers what it reads to the executor), call ``after_poll`` (it
    raises ``Stop`` when the stmgr went away), take a turn, write its output, and read from
    the stmgr again only while the executor accepts more.
    """
    clock = loop.clock
    wake_at = None
    while True:
        loop.poll(None if wake_at is None else max(0.0, wake_at - clock()))
        after_poll()
        wake_at = executor.turn(clock())
        loop.flush()
        if executor.accepting():
            channel.resume_reading()
        else:
            channel.pause_reading()
