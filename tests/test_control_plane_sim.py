"""The simulated control plane (``inprocess.control_plane``) at 64 containers: the real TMaster
and stmgr cores in one process. Its counts are checked against figures computed here from the
topology alone: the plan, the full stmgr mesh, heartbeats and metrics per simulated second."""

from __future__ import annotations

import time

from heron_spark import Grouping, TopologyBuilder
from heron_spark.inprocess.control_plane import ControlPlaneSim
from heron_spark.contract import ids
from heron_spark.proto import tmaster_pb2
from idle_components import Count, Words

CONTAINERS = 64
SECS = 20


def _topology(containers: int):
    builder = TopologyBuilder(f"sim_{containers}")
    words = builder.add_spout("word", Words, par=containers)
    builder.add_bolt("count", Count, par=containers, inputs={words: Grouping.fields("word")})
    builder.set_config({"topology.stmgrs": containers})
    return builder.build()


def test_64_containers_plan_mesh_and_traffic_as_computed():
    started = time.monotonic()
    sim = ControlPlaneSim(_topology(CONTAINERS))
    sim.start()
    assert sim.tmaster.state.value == "RUNNING"
    plan = sim.tmaster.physical_plan
    assert sorted(s.container_index for s in plan.stmgrs) == list(range(CONTAINERS))
    assert len(plan.instances) == 2 * CONTAINERS
    per_container = {}
    for instance in plan.instances:
        per_container.setdefault(instance.container_index, []).append(instance.component)
    assert all(sorted(c) == ["count", "word"] for c in per_container.values())  # round robin
    # The full mesh: each stmgr links to every other one; N(N-1) links in all.
    assert sim.peer_links() == [CONTAINERS - 1] * CONTAINERS
    traffic = sim.traffic.snapshot()
    assert traffic["stmgr->tmaster:register"][0] == CONTAINERS
    frames, sent = traffic["tmaster->stmgr:plan"]
    message = tmaster_pb2.TmasterToStmgr(plan=plan).ByteSize()  # the plan and its envelope
    assert frames == CONTAINERS and sent == CONTAINERS * message  # the same plan to everyone
    assert sim.plan_bytes == plan.ByteSize()
    assert traffic["stmgr->instance:start"][0] == 2 * CONTAINERS  # each instance started once

    sim.run(SECS)
    traffic = sim.traffic.snapshot()
    # One heartbeat per stmgr per second (heron.heartbeat.interval.ms 1000), none dropped.
    assert traffic["stmgr->tmaster:heartbeat"][0] == CONTAINERS * SECS
    assert sim.dropped_stmgrs == []
    # One metrics snapshot per container per second, of its two tasks' and its stmgr's
    # publishes; each metrics manager takes three publishes per second.
    assert traffic["metricsmgr->tmaster"][0] == CONTAINERS * SECS
    assert traffic["instance->metricsmgr"][0] == 2 * CONTAINERS * SECS
    assert traffic["stmgr->metricsmgr"][0] == CONTAINERS * SECS
    # The TMaster holds the latest metrics of every task and every stmgr.
    tasks = {(component, task) for task, component in sim.view.task_component.items()}
    stmgrs = {(ids.STMGR_COMPONENT, ids.stmgr_metrics_task(i)) for i in range(CONTAINERS)}
    assert set(sim.tmaster.metrics) == tasks | stmgrs
    assert time.monotonic() - started < 10


def test_a_silent_stmgr_is_reported_dead_then_dropped_when_overdue():
    """Silent past the heartbeat timeout: reported dead, its connection kept (a host cut off by
    a partition comes back on healing); silent for a second timeout: dropped (the stage
    restarts)."""
    sim = ControlPlaneSim(_topology(4), {"heron.tmaster.stmgr.heartbeat.timeout.secs": 5})
    sim.start()
    sim.run(3)
    sim.silent.add(2)
    sim.run(4)
    assert sim.tmaster.liveness.dead_since == {}  # silent for 4 s < 5 s
    sim.run(3)
    assert list(sim.tmaster.liveness.dead_since) == [2]
    assert sim.dropped_stmgrs == []  # dead for under 5 s: kept
    sim.run(6)
    assert sim.dropped_stmgrs == [2]
