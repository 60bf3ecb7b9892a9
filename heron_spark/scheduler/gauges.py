"""The JVM bridge's topology gauges and executor losses for a driver's TMaster. Driver only.

With the JVM bridge loaded (``scheduler.jvm_bridge``, a classic session ``submit`` made),
``publish`` runs in a daemon thread per topology until its TMaster closes: it copies the
TMaster's per-component metrics into Spark's metrics system every ``heron.metrics.interval.ms``
and hands Spark's loss of an executor that hosted a container to the TMaster (which restarts
the stage now rather than waiting for Spark to fail it).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from heron_spark.config import SystemConfig
from heron_spark.scheduler import jvm_bridge
from heron_spark.scheduler.executors import ContainerExecutors
from heron_spark.scheduler.spark_scheduler import job_group
from heron_spark.tmaster.master import TMaster

log = logging.getLogger(__name__)


def publish(spark, tmaster: TMaster, system: SystemConfig) -> None:
    """Copy the TMaster's per-component metrics into Spark's metrics system until the end.

    Also hand Spark's loss of an executor hosting a container to the TMaster.
    """
    interval = system.metrics_interval_ms / 1000.0
    executors = ContainerExecutors(job_group(tmaster.name))
    lock = threading.Lock()

    def on_event(event: dict) -> None:  # from any topology's publisher thread
        with lock:
            loss = executors.on_event(event, tmaster.generation)
        if loss is not None:
            tmaster.executor_lost(loss.executor, loss.containers, loss.reason, loss.generation)

    with _LOCK:
        _LISTENERS[id(on_event)] = on_event
    try:
        while True:
            ended = tmaster.closed.wait(interval)
            if not ended:  # the final copy is the run's, at its end (a closer from submit)
                copy(spark, tmaster)
            _dispatch_events(spark)
            if ended:
                return
    finally:
        with _LOCK:
            _LISTENERS.pop(id(on_event), None)


# The bridge's event queue is one per JVM: whichever topology's publisher drains it hands every
# event to every topology of this driver.
_LOCK = threading.Lock()
_LISTENERS: dict[int, Any] = {}


def _dispatch_events(spark) -> None:
    with _LOCK:
        events = jvm_bridge.drain_events(spark)
        listeners = list(_LISTENERS.values())
    for event in events:
        if event.get("type") != "task_start":
            log.warning("Spark event: %s", event)
        for listener in listeners:
            listener(event)


def copy(spark, tmaster: TMaster) -> None:
    """Set one Spark gauge per metric of each component (``<topology>.<component>.<metric>``).

    All of them in one call to the JVM.
    """
    jvm_bridge.set_gauges(spark, {
        f"{tmaster.name}.{component}.{metric.strip('_')}": value
        for component, values in tmaster.metrics_by_component().items()
        for metric, value in values.items()})
