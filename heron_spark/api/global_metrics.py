"""Counters any code of a task can bump without a context (heronpy's ``global_metrics``).

``incr("key")`` from user code anywhere (a helper module, a library called by ``process``)
counts under the running task; the counts are published like a registered
``MultiCountMetric`` named ``__auto__``, i.e. as metrics ``__auto__/<key>``, every
``heron.metrics.interval.ms``, and read from ``handle.metrics()[component]``.

The runtime points ``metricsContainer`` at the running task's counters: the task's process
when it runs on Spark (one task per process, as in Heron), each task in turn under the
in-process runner (``testing.run_local``). Outside a task (the driver, a unit test calling
user code directly) the counts go to a container nobody publishes.

``incr`` is for the task-execution thread; ``safe_incr`` takes a lock, for threads user code
started itself.
"""

from __future__ import annotations

import threading

from heron_spark.api.metrics import MultiCountMetric

root_name = "__auto__"
"""The name the counters are published under (``__auto__/<key>``)."""

lock = threading.Lock()
metricsContainer = MultiCountMetric()  # noqa: N816 - heronpy's name; the runtime swaps it per task


def incr(key, to_add: int = 1) -> None:
    """Add ``to_add`` to counter ``key`` of the running task (task-execution thread)."""
    metricsContainer.incr(key, to_add)


def safe_incr(key, to_add: int = 1) -> None:
    """``incr`` under a lock, for threads other than the task-execution thread."""
    with lock:
        metricsContainer.incr(key, to_add)


def init(metrics_collector, metrics_bucket) -> None:
    """Do nothing: heron_spark registers every task's counters itself.

    Heronpy's instance calls this to register the counters; heron_spark registers every task's
    counters itself before ``initialize``, so there is nothing left to do.
    """


def use(container: MultiCountMetric) -> None:
    """Send ``incr`` to ``container`` from now on (the runtime calls this; not user code)."""
    global metricsContainer
    metricsContainer = container


__all__ = ["incr", "init", "lock", "metricsContainer", "root_name", "safe_incr"]
