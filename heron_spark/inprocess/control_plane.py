"""Simulate a topology's control plane at any size in one process: the real cores, counted.

``ControlPlaneSim`` builds the TMaster's core (``tmaster.core.TMasterCore``) and one
``stmgr.core.StmgrCore`` per container, as the Spark runner does, and joins them by an
in-memory transport (``transport``, the in-process runner's too) that counts every frame and
its bytes per channel (``traffic``). What the real shells do around the cores, it does on a
simulated clock (``now``, seconds):

- start-up (``start``): each task's instance connects and registers with its stmgr core; each
  stmgr core, once all its instances registered, sends its registration to the TMaster core
  (``register_message``, as ``stmgr.server`` does); the TMaster core builds the physical plan
  and broadcasts it; each stmgr core applies it, is told its peers (``retarget_peers``: the
  links a real stmgr dials, one per other container) and starts its instances;
- every ``heron.heartbeat.interval.ms``: one ``StmgrHeartbeat`` per stmgr to the TMaster (the
  message ``stmgr.server`` sends), except from the containers in ``silent`` (a test's way to
  make a stmgr go quiet: the TMaster core drops it after its heartbeat timeout);
- every ``heron.metrics.interval.ms``: each task publishes its metrics (the counters its
  executor, ``instance.shell.build_executor``, adds) and each stmgr its core's
  ``metrics_snapshot`` to its container's metrics manager, and each metrics manager forwards one
  ``MetricsSnapshot`` of them all to the TMaster core (``on_metrics``), as
  ``metrics.manager`` does;
- each step: every stmgr core's ``tick``, the TMaster core's ``tick`` and ``check_liveness``;
  frames between stmgr cores are delivered in order.

What it does not run: user code (instances are registered, and their executors built for their
metrics, but take no turns, so no data flows) and anything with a process or a socket. It is
for counting what the control plane costs as the number of containers grows: the plan's size,
the links of the stmgr mesh, heartbeat and metrics traffic, the TMaster core's CPU time
(``tmaster_cpu_secs``, thread CPU spent inside its calls). Everything runs on the caller's
thread.
"""

from __future__ import annotations

import os

from heron_spark.inprocess.transport import StmgrLink, TMasterLink, Traffic, Wires, as_frame, \
    body_name
from heron_spark.instance.shell import build_executor
from heron_spark.plan.prepare import prepare
from heron_spark.proto import metrics_pb2, stmgr_pb2, tmaster_pb2
from heron_spark.stmgr.core import StmgrCore
from heron_spark.tmaster.core import TMasterCore
from heron_spark.wire import frames

_SIM_LOG = "(simulated control plane: no log)"


class _Counted:
    """The simulator's instances as a stmgr core's ``InstanceEnds``: frames counted, not run."""

    def __init__(self, traffic: Traffic) -> None:
        self.traffic = traffic

    def offer(self, task: int, frame) -> bool:
        data = as_frame(frame)[1]
        self.traffic.add(f"stmgr->instance:{body_name(data, stmgr_pb2.StmgrToInstance)}", data)
        return True

    def set_reading(self, task: int, reading: bool) -> None:
        """Instances take no turns: nothing to stop reading."""

    def queued_bytes(self, task: int) -> int:
        return 0


class ControlPlaneSim:
    """A topology's TMaster and stmgr cores on a simulated clock; see the module docstring."""

    def __init__(self, topology, conf: dict | None = None, name: str | None = None) -> None:
        prepared = prepare(topology, conf, name)
        self.config = prepared.system
        self.view = prepared.view
        self.now = 0.0
        self.traffic = Traffic()
        self.wires = Wires(self.view.container_count, self._clock, self.traffic)
        self.silent: set[int] = set()  # containers whose stmgr sends no more heartbeats
        instances = _Counted(self.traffic)
        self.links = [StmgrLink(self.wires, i, instances, _SIM_LOG)
                      for i in range(self.view.container_count)]
        self.cores = [StmgrCore(self.view, self.config, i, self.links[i], self._clock)
                      for i in range(self.view.container_count)]
        self.wires.cores = self.cores
        self._tmaster_link = TMasterLink(self.wires)
        self.tmaster = TMasterCore(self.view, f"{prepared.logical.name}-sim", self._tmaster_link,
                                   restart_max=self.config.instance_restart_max,
                                   restart_window_secs=self.config.restart_window_secs,
                                   stmgr_heartbeat_timeout_secs=(
                                       self.config.tmaster_stmgr_heartbeat_timeout_secs))
        self.wires.tmaster = self.tmaster
        self.executors = {task: build_executor(self.view, task, self.config, lambda frame: None,
                                               clock=self._clock)
                          for task in sorted(self.view.task_component)}
        # Simulated seconds of the next heartbeats (one per stmgr) and metrics interval.
        self._next_heartbeat = self.config.heartbeat_interval_ms / 1000.0
        self._next_metrics = self.config.metrics_interval_ms / 1000.0

    def _clock(self) -> float:
        return self.now

    # ---- delivery ---------------------------------------------------------------------------
    @property
    def tmaster_cpu_secs(self) -> float:
        """Thread CPU seconds spent inside the TMaster core's events so far."""
        return self.wires.tmaster_cpu_secs

    def tmaster_call(self, event, *args):
        """Run one TMaster core event (``transport.Wires.tmaster_call``): timed, then delivered."""
        return self.wires.tmaster_call(event, *args)

    def _pump(self) -> None:
        """Deliver queued TMaster -> stmgr and stmgr -> stmgr frames until none is left."""
        self.wires.deliver()

    # ---- start-up ----------------------------------------------------------------------------
    def start(self) -> None:
        """Register every instance and stmgr; deliver the plan; the TMaster core is RUNNING."""
        pid = os.getpid()
        for index, core in enumerate(self.cores):
            for task in sorted(self.view.tasks_in(index)):
                core.instance_connected(task)
                core.on_instance_frame(task, frames.CONTROL, frames.control_frame(
                    stmgr_pb2.InstanceToStmgr(register=stmgr_pb2.RegisterInstance(
                        task_id=task, pid=pid))))
        for index, core in enumerate(self.cores):
            register = core.register_message(f"sim-host-{index}", 1 + index, pid, 0)
            self.links[index].to_tmaster(frames.control_frame(register))
            self._pump()

    # ---- the clock ---------------------------------------------------------------------------
    def run(self, secs: float, step_secs: float = 0.1) -> None:
        """Advance the clock by ``secs`` in steps of ``step_secs``: heartbeats, metrics, ticks."""
        end = self.now + secs
        heartbeat = self.config.heartbeat_interval_ms / 1000.0
        interval = self.config.metrics_interval_ms / 1000.0
        while self.now < end - 1e-9:
            self.now = min(end, self.now + step_secs)
            if self.now >= self._next_heartbeat - 1e-9:
                self._next_heartbeat += heartbeat
                self._heartbeats()
            if self.now >= self._next_metrics - 1e-9:
                self._next_metrics += interval
                self._metrics()
            for core in self.cores:
                core.tick(self.now)
            self.tmaster_call(self.tmaster.tick, self.now)
            self.tmaster_call(self.tmaster.check_liveness, self.now)
            self._pump()

    def _heartbeats(self) -> None:
        sent_at_ms = int(self.now * 1000)
        for index, link in enumerate(self.links):
            if index in self.silent:
                continue
            link.to_tmaster(frames.control_frame(tmaster_pb2.StmgrToTmaster(
                heartbeat=tmaster_pb2.StmgrHeartbeat(container_index=index,
                                                     sent_at_ms=sent_at_ms))))

    def _metrics(self) -> None:
        stamp = int(self.now * 1000)
        for index, core in enumerate(self.cores):
            publishes = []
            for task in sorted(self.view.tasks_in(index)):
                publish = metrics_pb2.MetricsPublish(
                    component=self.view.task_component[task], task_id=task, timestamp_ms=stamp)
                self.executors[task].add_metrics(publish.metrics.add)
                self.traffic.add("instance->metricsmgr", frames.control_frame(publish))
                publishes.append(publish)
            publish = core.metrics_snapshot(0, stamp)
            self.traffic.add("stmgr->metricsmgr", frames.control_frame(publish))
            publishes.append(publish)
            snapshot = metrics_pb2.MetricsSnapshot(container_index=index, publishes=publishes)
            self.traffic.add("metricsmgr->tmaster", frames.control_frame(snapshot))
            self.tmaster_call(self.tmaster.on_metrics, snapshot)

    # ---- figures ------------------------------------------------------------------------------
    @property
    def plan_bytes(self) -> int:
        """Bytes of the serialized physical plan the TMaster core built (0 before start)."""
        plan = self.tmaster.physical_plan
        return 0 if plan is None else plan.ByteSize()

    @property
    def dropped_stmgrs(self) -> list[int]:
        """Containers whose stmgr the TMaster core dropped (found silent), in order."""
        return list(self._tmaster_link.dropped)

    def peer_links(self) -> list[int]:
        """Return per stmgr, the number of peers it holds a link to (a real stmgr dials each)."""
        return [len(link.peers) for link in self.links]
