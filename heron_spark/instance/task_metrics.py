"""A task's counters under Heron's metric names (``contract.metric_names``), for a metrics publish.

The loop thread keeps cumulative totals (tuples, and nanoseconds spent on them, per stream);
the metrics thread turns them into Heron's metrics here: counts as they are (cumulative), and
latencies as the mean over the interval since the last publish (Heron's MeanReducedMetric,
in ns): (total ns now - total ns then) / (count now - count then). An interval without a
tuple publishes no latency, as Heron's reducer does.

``IntervalMean`` belongs to the metrics thread (one per task executor); the functions only
read the executor's totals.
"""

from __future__ import annotations

from typing import Callable

from heron_spark.contract import metric_names as names

Add = Callable[..., object]


class IntervalMean:
    """Means over the publishing interval from cumulative (count, total) pairs.

    Used by one thread only (the metrics thread). A count below the last one means the totals
    started again (an effectively-once restore): the whole totals are the interval's.
    """

    def __init__(self) -> None:
        self._marks: dict[str, tuple[float, float]] = {}

    def mean(self, key: str, count: float, total: float) -> float | None:
        """Return the mean of what ``key`` added since the last call (None: nothing added)."""
        last_count, last_total = self._marks.get(key, (0, 0.0))
        self._marks[key] = (count, total)
        if count < last_count:
            last_count, last_total = 0, 0.0
        added = count - last_count
        return (total - last_total) / added if added > 0 else None


def _latency(add: Add, means: IntervalMean, name: str, count: float, total_ns: float) -> None:
    value = means.mean(name, count, total_ns)
    if value is not None:
        add(name=name, value=value)


def add_spout_metrics(add: Add, means: IntervalMean, executor) -> None:
    """Add a spout's Heron metrics.

    Next-tuple count and latency; per stream acks, fails, timeouts, complete and fail latencies
    (at-least-once).
    """
    add(name=names.NEXT_TUPLE_COUNT, value=executor.next_tuple_calls)
    _latency(add, means, names.NEXT_TUPLE_LATENCY, executor.next_tuple_calls,
             executor.next_tuple_ns)
    trees = executor.trees
    if trees is None:
        return
    streams = set(executor.decl.outputs) | set(trees.by_stream)
    for stream in sorted(streams):
        tally = trees.by_stream.get(stream)
        acked = tally.acked if tally else 0
        failed = tally.failed if tally else 0
        add(name=names.scoped(names.ACK_COUNT, stream), value=acked)
        add(name=names.scoped(names.FAIL_COUNT, stream), value=failed)
        add(name=names.scoped(names.TIMEOUT_COUNT, stream), value=tally.timed_out if tally else 0)
        if tally is not None:
            _latency(add, means, names.scoped(names.COMPLETE_LATENCY, stream), acked, tally.ack_ns)
            _latency(add, means, names.scoped(names.FAIL_LATENCY, stream), failed, tally.fail_ns)


def add_bolt_metrics(add: Add, means: IntervalMean, executor) -> None:
    """Add a bolt's Heron metrics per input (component, stream).

    Execute count and latency; at-least-once also ack and fail counts, process and fail
    latencies.
    """
    for (component, stream), (executed, ns) in sorted(list(executor.input_stats.items())):
        add(name=names.scoped(names.EXECUTE_COUNT, component, stream), value=executed)
        add(name=names.scoped(names.EXECUTE_TIME_NS, component, stream), value=ns)
        _latency(add, means, names.scoped(names.EXECUTE_LATENCY, component, stream), executed, ns)
    if not executor.reliable:
        return
    by_input = executor.acks.by_input
    for source in sorted(set(executor.input_stats) | set(by_input)):
        tally = by_input.get(source)
        acked = tally.acked if tally else 0
        failed = tally.failed if tally else 0
        add(name=names.scoped(names.ACK_COUNT, *source), value=acked)
        add(name=names.scoped(names.FAIL_COUNT, *source), value=failed)
        if tally is not None:
            _latency(add, means, names.scoped(names.PROCESS_LATENCY, *source), acked, tally.ack_ns)
            _latency(add, means, names.scoped(names.FAIL_LATENCY, *source), failed, tally.fail_ns)
