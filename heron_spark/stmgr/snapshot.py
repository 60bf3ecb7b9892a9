"""The stream manager's metrics: one ``MetricsPublish`` built from its core's parts.

Heron's ``__server/*`` and back-pressure names, and the stmgr's own (routing, trees, queues
per local component). Built on the core's thread: it reads queues the loop changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from heron_spark.contract import ids
from heron_spark.contract import metric_names as names
from heron_spark.proto import metrics_pb2

if TYPE_CHECKING:
    from heron_spark.stmgr.core import StmgrCore


def metrics_publish(core: "StmgrCore", peer_frames_dropped: int,
                    timestamp_ms: int = 0) -> metrics_pb2.MetricsPublish:
    """Build ``core``'s metrics, stamped ``timestamp_ms`` (wall-clock ms; 0: unstamped)."""
    relay, acks, backpressure = core.relay, core.acks, core.backpressure
    publish = metrics_pb2.MetricsPublish(component=ids.STMGR_COMPONENT,
                                         task_id=ids.stmgr_metrics_task(core.index),
                                         timestamp_ms=timestamp_ms)
    add = publish.metrics.add
    add(name=names.TUPLES_ROUTED, value=relay.tuples_routed)
    add(name=names.BACKPRESSURE_SECS, value=backpressure.total_secs)
    add(name=names.BACKPRESSURE_EPISODES, value=backpressure.episodes)
    for component, secs in list(backpressure.component_secs.items()):
        add(name=names.scoped(names.BACKPRESSURE_SECS, component), value=secs)
    add(name=names.TUPLES_DROPPED, value=relay.tuples_dropped)
    add(name=names.TUPLES_FROM_WORKERS, value=relay.tuples_from_workers)
    add(name=names.BYTES_FROM_WORKERS, value=relay.bytes_from_workers)
    add(name=names.TUPLES_TO_WORKERS, value=relay.tuples_to_workers)
    add(name=names.BYTES_TO_WORKERS, value=relay.bytes_to_workers)
    add(name=names.TUPLES_FROM_STMGRS, value=relay.tuples_from_stmgrs)
    add(name=names.BYTES_FROM_STMGRS, value=relay.bytes_from_stmgrs)
    add(name=names.TIME_SPENT_BACK_PRESSURE_INITIATED,
        value=round(backpressure.initiated_secs * 1000.0, 3))
    add(name=names.TIME_SPENT_BACK_PRESSURE_AGGR, value=round(backpressure.total_secs * 1000.0, 3))
    for component, secs in list(backpressure.component_secs.items()):
        add(name=names.scoped(names.TIME_SPENT_BACK_PRESSURE_BY_COMPID, component),
            value=round(secs * 1000.0, 3))
    add(name=names.INSTANCES_LOST, value=core.instances_lost)
    add(name=names.INSTANCES_REREGISTERED, value=core.instance_registrations)
    add(name=names.TREES_OPEN, value=len(acks.ledger))
    add(name=names.TREES_ACKED, value=acks.trees_acked)
    add(name=names.TREES_FAILED, value=acks.trees_failed)
    add(name=names.TREES_EXPIRED, value=acks.trees_expired)
    add(name=names.PEER_FRAMES_DROPPED, value=peer_frames_dropped)
    if core.gateway is not None:
        add(name=names.CHECKPOINT_HELD_FRAMES, value=core.gateway.held_frames)
        add(name=names.RESTORE_DROPPED_FRAMES, value=relay.frames_dropped_in_restore)
        for task, secs in sorted(core.gateway.alignment_secs.items()):
            add(name=names.scoped(names.CHECKPOINT_ALIGNMENT_MS, str(task)),
                value=round(secs * 1000.0, 3))
    now = core.clock()
    queued: dict[str, int] = {}
    age: dict[str, float] = {}
    for task in core.local_tasks - core.spout_tasks:
        component = core.plan.task_component[task]
        queued[component] = queued.get(component, 0) + relay.queued_tuples(task)
        age[component] = max(age.get(component, 0.0), relay.queue_age_secs(task, now))
    for component in sorted(queued):
        add(name=names.scoped(names.QUEUED_TUPLES, component), value=queued[component])
        add(name=names.scoped(names.QUEUE_AGE_MAX_MS, component), value=round(age[component] * 1000, 1))
    return publish
