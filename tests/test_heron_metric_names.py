"""Instances and stream managers publish Heron's metric names, per stream, with exact counts:
executors fed frames with a fake clock (no processes), read the way the metrics thread reads."""

from __future__ import annotations

import numpy as np
import test_executor as te

from heron_spark.instance.bolt_executor import BoltExecutor
from heron_spark.instance.spout_executor import SpoutExecutor
from heron_spark.instance.task_metrics import IntervalMean
from heron_spark.proto import stmgr_pb2
from heron_spark.stmgr.backpressure import Backpressure
from heron_spark.wire import frames, tree_ids, tuple_batch


def _published(executor) -> dict[str, float]:
    values: dict[str, float] = {}
    executor.add_metrics(lambda name, value: values.__setitem__(name, value))
    return values


def _deliver(bolt, spout_task, values, first_root=None):
    batch = tuple_batch.build(["n"], [(v,) for v in values])
    count = len(values)
    if first_root is not None:
        base = spout_task << tree_ids.ROOT_TASK_SHIFT
        roots = np.arange(base + first_root, base + first_root + count, dtype=np.uint64)
        batch = tuple_batch.with_roots(batch, roots, np.ones(count, dtype=np.int64))
        batch = tuple_batch.with_keys(batch, np.arange(1, count + 1, dtype=np.uint64))
    bolt.on_frame(frames.DATA, frames.data_frame(frames.TUPLES, spout_task, bolt.task_id, count,
                                                 b"default", tuple_batch.encode_batch(batch)))


def test_bolt_publishes_execute_ack_and_latency_per_input_stream():
    view = te._view(reliable=True)
    bolt, sent, clock = te._executor(BoltExecutor, view, "echo")
    spout_task = view.component_tasks["numbers"][0]
    before = _published(bolt)
    assert before["__execute-count/numbers/default"] == 0  # every input from the start
    assert "__execute-latency/numbers/default" not in before  # no tuple yet: no mean
    _deliver(bolt, spout_task, [1, 2, 3], first_root=1)
    _deliver(bolt, spout_task, [4, 5], first_root=4)
    bolt.end_turn(clock(), force=True)
    values = _published(bolt)
    assert values["__execute-count/numbers/default"] == 5
    assert values["__ack-count/numbers/default"] == 5
    assert values["__fail-count/numbers/default"] == 0
    assert values["__emit-count/default"] == 5
    assert values["__execute-latency/numbers/default"] > 0  # ns per tuple over the interval
    assert values["__process-latency/numbers/default"] >= 0
    assert values["__execute-count"] == 5 and values["__ack-count"] == 5  # kept for handle.metrics()
    again = _published(bolt)  # nothing new this interval: counts stay, no latency mean
    assert again["__execute-count/numbers/default"] == 5
    assert "__execute-latency/numbers/default" not in again


def test_at_most_once_bolt_has_no_ack_metrics():
    view = te._view(reliable=False)
    bolt, sent, clock = te._executor(BoltExecutor, view, "echo")
    _deliver(bolt, view.component_tasks["numbers"][0], [1, 2])
    values = _published(bolt)
    assert values["__execute-count/numbers/default"] == 2
    assert not any(name.startswith("__ack-count") for name in values)


def test_spout_publishes_next_tuple_ack_fail_and_timeout_per_stream():
    view = te._view(reliable=True)
    spout, sent, clock = te._executor(SpoutExecutor, view, "numbers")
    spout.run_slice(clock())
    spout.end_turn(clock())
    opened = stmgr_pb2.InstanceToStmgr.FromString(
        te._joined(sent[0])[frames.PREFIX_BYTES:]).opened
    roots = tree_ids.unpack(opened.roots)
    clock.now += 0.25
    spout.on_frame(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
        trees=stmgr_pb2.TreesDone(acked=tree_ids.pack(roots[:3]),
                                  failed=tree_ids.pack(roots[3:4])))))
    clock.now += 100  # past the message timeout: the last tree times out
    spout.on_time(clock())
    values = _published(spout)
    assert values["__next-tuple-count"] == 6  # five emits, then one call that emitted nothing
    assert values["__next-tuple-latency"] > 0
    assert values["__emit-count/default"] == 5
    assert values["__ack-count/default"] == 3 and values["__fail-count/default"] == 1
    assert values["__timeout-count/default"] == 1
    assert values["__complete-latency/default"] == 0.25e9  # ns, the mean over the acked trees
    assert values["__fail-latency/default"] == 0.25e9


def test_interval_mean_restarts_with_the_totals():
    means = IntervalMean()
    assert means.mean("x", 2, 10.0) == 5.0
    assert means.mean("x", 2, 10.0) is None
    assert means.mean("x", 6, 30.0) == 5.0
    assert means.mean("x", 1, 7.0) == 7.0  # totals started again (a restore)


def test_backpressure_time_initiated_here_is_kept_apart():
    bp = Backpressure(100, 50)
    bp.tick(0.0)
    assert bp.observe(200) is True
    bp.tick(1.0, ("count",))
    bp.set_remote(3, True)
    assert bp.observe(0) is False
    bp.tick(3.0)
    assert bp.initiated_secs == 1.0 and bp.component_secs == {"count": 1.0}
    assert bp.total_secs >= 2.0
