"""heronpy's metrics family and global_metrics: each metric's sampling semantics, and their
values published per component by a topology run in this process (``run_local``)."""

from __future__ import annotations

import logging

import pytest

from heron_spark import Bolt, DuplicateMetricError, Grouping, Spout, TopologyBuilder
from heron_spark.api import global_metrics
from heron_spark.api.metrics import (AssignableMetric, AssignableMetrics, CountMetric, IReducer,
                                     MeanReducedMetric, MeanReducer, MultiAssignableMetrics,
                                     MultiCountMetric, MultiMeanReducedMetric, MultiReducedMetric,
                                     ReducedMetric)
from heron_spark.config import SystemConfig
from heron_spark.instance.bolt_executor import BoltExecutor
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.proto import stmgr_pb2
from heron_spark.testing import run_local
from heron_spark.wire import frames

N = 60  # tuples per spout task


class MaxReducer(IReducer):
    def init(self):
        self.best = None

    def reduce(self, value):
        self.best = value if self.best is None else max(self.best, value)

    def extract(self):
        return self.best


def test_counters_reset_on_each_sample():
    count = CountMetric()
    count.incr()
    count.incr(4)
    assert count.get_value_and_reset() == 5
    assert count.get_value_and_reset() == 0
    multi = MultiCountMetric()
    multi.add_key("idle")
    multi.incr("a")
    multi.incr("a", 2)
    assert multi.get_value_and_reset() == {"idle": 0, "a": 3}
    assert multi.get_value_and_reset() == {"idle": 0, "a": 0}


def test_reduced_metrics_fold_each_period_with_their_reducer():
    mean = MeanReducedMetric()
    assert isinstance(mean, ReducedMetric)
    assert mean.get_value_and_reset() is None
    for value in (1, 2, 6):
        mean.update(value)
    assert mean.get_value_and_reset() == 3.0
    assert mean.get_value_and_reset() is None
    biggest = ReducedMetric(MaxReducer)
    biggest.update(3)
    biggest.update(7)
    biggest.update(5)
    assert biggest.get_value_and_reset() == 7
    assert biggest.get_value_and_reset() is None
    reducer = MeanReducer()
    reducer.init()
    assert reducer.extract() is None


def test_multi_reduced_metrics_keep_one_reduction_per_key():
    means = MultiMeanReducedMetric()
    assert isinstance(means, MultiReducedMetric)
    means.add_key("quiet")
    means.update("a", 1)
    means.update("a", 3)
    means.update("b", 10)
    assert means.get_value_and_reset() == {"quiet": None, "a": 2.0, "b": 10.0}
    assert means.get_value_and_reset() == {"quiet": None, "a": None, "b": None}
    maxes = MultiReducedMetric(MaxReducer)
    maxes.update("x", 1)
    maxes.update("x", 9)
    assert maxes.get_value_and_reset() == {"x": 9}


def test_gauges_keep_their_value():
    assert AssignableMetric is AssignableMetrics
    gauge = AssignableMetrics(5)
    assert gauge.get_value_and_reset() == 5
    gauge.update(8)
    assert gauge.get_value_and_reset() == 8
    assert gauge.get_value_and_reset() == 8
    gauges = MultiAssignableMetrics()
    gauges.update("a", 1)
    gauges.update("a", 2)
    gauges.update("b", 3)
    assert gauges.get_value_and_reset() == {"a": 2, "b": 3}
    assert gauges.get_value_and_reset() == {"a": 2, "b": 3}


def test_heronpy_paths_are_the_same_objects():
    import heronpy.api.global_metrics as heronpy_global_metrics
    from heronpy.api.metrics import MultiMeanReducedMetric as HeronpyMultiMean

    assert heronpy_global_metrics is global_metrics
    assert HeronpyMultiMean is MultiMeanReducedMetric
    assert global_metrics.root_name == "__auto__"


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.n = 0

    def next_tuple(self):
        if self.n == N:
            self.declare_exhausted()
            return
        self.n += 1
        global_metrics.incr("emitted")
        self.emit([self.n])


class Measure(Bolt):
    """Publishes one metric of each kind, and global counts."""

    def initialize(self, config, context):
        self.mean = MeanReducedMetric()
        self.by_parity = MultiMeanReducedMetric()
        self.by_parity.add_key("quiet")  # never updated: its None is not published
        self.biggest = ReducedMetric(MaxReducer)
        self.last = AssignableMetrics(-1)
        self.last_by_parity = MultiAssignableMetrics()
        self.seen = CountMetric()
        for name, metric in (("mean", self.mean), ("by-parity", self.by_parity),
                             ("biggest", self.biggest), ("last", self.last),
                             ("last-by-parity", self.last_by_parity), ("seen", self.seen)):
            context.register_metric(name, metric, 60)

    def process(self, tup):
        n = tup.values[0]
        parity = "even" if n % 2 == 0 else "odd"
        self.mean.update(n)
        self.by_parity.update(parity, n)
        self.biggest.update(n)
        self.last.update(7)
        self.last_by_parity.update(parity, 1)
        self.seen.incr()
        global_metrics.incr("seen")
        global_metrics.safe_incr(parity, 2)


def test_a_topology_publishes_its_metrics_and_global_counts_per_component():
    builder = TopologyBuilder("metrics_family")
    numbers = builder.add_spout("numbers", Numbers, par=2)
    builder.add_bolt("measure", Measure, par=1, inputs={numbers: Grouping.SHUFFLE})
    # one sample at start, the next at the end: every value of the run is in the last one
    run = run_local(builder, conf={"heron.metrics.interval.ms": 600_000})
    assert run.status == "FINISHED"
    metrics = run.handle.metrics()
    measure, spout = metrics["measure"], metrics["numbers"]
    assert spout["__auto__/emitted"] == 2 * N       # counted by the task that ran the code
    assert "__auto__/seen" not in spout
    assert measure["__auto__/seen"] == 2 * N
    assert measure["__auto__/even"] == measure["__auto__/odd"] == 2 * N
    assert measure["seen"] == 2 * N
    assert measure["mean"] == pytest.approx((N + 1) / 2)
    assert measure["by-parity/even"] == pytest.approx((N + 2) / 2)
    assert measure["by-parity/odd"] == pytest.approx(N / 2)
    assert "by-parity/quiet" not in measure
    assert measure["biggest"] == N
    assert measure["last"] == 7
    assert measure["last-by-parity/even"] == measure["last-by-parity/odd"] == 1


class Twice(Bolt):
    def process(self, tup):
        pass


def _bolt_executor(clock):
    builder = TopologyBuilder("metrics_unit")
    numbers = builder.add_spout("numbers", Numbers, par=1)
    builder.add_bolt("twice", Twice, par=1, inputs={numbers: Grouping.SHUFFLE})
    logical = build_logical_plan(builder.build())
    view = PlanView(logical, pack(logical))
    executor = BoltExecutor(view, view.component_tasks["twice"][0],
                            SystemConfig(metrics_interval_ms=1000), [].append,
                            logging.getLogger("test"), clock=clock)
    executor.on_frame(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
        start=stmgr_pb2.StartProcessing(generation=0))))
    return executor


def test_global_counts_are_sampled_each_metrics_interval():
    now = [100.0]
    executor = _bolt_executor(lambda: now[0])
    executor.enter()
    global_metrics.incr("k", 3)
    executor.gather_user_metrics(now[0])          # registered at start: not due yet
    assert "__auto__/k" not in executor.user_metrics
    now[0] += 1.0                                 # heron.metrics.interval.ms later
    executor.gather_user_metrics(now[0])
    assert executor.user_metrics["__auto__/k"] == 3
    global_metrics.incr("k")
    now[0] += 0.5                               # not due yet: the last sample stays
    executor.gather_user_metrics(now[0])
    assert executor.user_metrics["__auto__/k"] == 3
    now[0] += 0.6
    executor.gather_user_metrics(now[0])
    assert executor.user_metrics["__auto__/k"] == 1


def test_a_metric_is_first_sampled_one_bucket_after_registration():
    now = [100.0]
    executor = _bolt_executor(lambda: now[0])
    counted = CountMetric()
    executor.context.register_metric("early", counted, 10)
    counted.incr(2)                                 # e.g. counted in initialize
    executor.gather_user_metrics(now[0])
    assert "early" not in executor.user_metrics
    now[0] += 10.0
    counted.incr()
    executor.gather_user_metrics(now[0])
    assert executor.user_metrics["early"] == 3


def test_a_metric_name_is_registered_once_per_task():
    executor = _bolt_executor(lambda: 0.0)
    executor.context.register_metric("mine", CountMetric(), 10)
    with pytest.raises(DuplicateMetricError) as caught:  # a RuntimeError, as Heron raises
        executor.context.register_metric("mine", CountMetric(), 10)
    assert caught.value.name == "mine" and caught.value.component == "twice"
    with pytest.raises(DuplicateMetricError):
        executor.context.register_metric(global_metrics.root_name, CountMetric(), 10)
