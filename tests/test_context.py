"""The context answers as Heron's Python instance does (``TopologyContextImpl``), checked from
inside a running topology against expectations written here, not derived from the context code.

Also: components and streams named with a leading ``__`` (Heron's integration tests name a bolt
``__integration_test_aggregator_bolt``) run and give exact results.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from heron_spark import Bolt, Grouping, Spout, Stream, TopologyBuilder
from heron_spark.errors import DuplicateMetricError
from heron_spark.api.metrics import CountMetric
from heron_spark.testing import COLLECT_DIR, CollectingBolt, run_local

TIMEOUT = 30

# Heron's topology.proto Grouping numbers, written out rather than read from our code.
SHUFFLE, FIELDS, ALL, LOWEST = 1, 2, 3, 4


class Numbers(Spout):
    """Emits 0..limit-1 (split over its tasks) on "default" and, tagged, on "__side"."""

    outputs = ["n", Stream(["n", "tag"], name="__side")]

    def initialize(self, config, context):
        self.next = context.get_task_index()
        self.step = len(context.get_component_tasks(context.get_component_id()))
        self.limit = config["limit"]

    def next_tuple(self):
        if self.next >= self.limit:
            self.declare_exhausted()
            return
        self.emit([self.next])
        self.emit([self.next, "side"], stream="__side")
        self.next += self.step


class Words(Spout):
    """Emits one word, then ends."""

    outputs = ["word"]

    def initialize(self, config, context):
        self.done = False

    def next_tuple(self):
        if not self.done:
            self.emit(["w"])
            self.done = True
        else:
            self.declare_exhausted()


class ContextProbe(Bolt):
    """Records what its context answers, in ``initialize``, to ``<collect dir>/probe-<task>``."""

    outputs = ["n"]

    def initialize(self, config, context):
        answers = {
            "task_id": context.get_task_id(),
            "component_id": context.get_component_id(),
            "topology_name": context.get_topology_name(),
            "config_is_cluster_config": config is context.get_cluster_config(),
            "limit": context.get_cluster_config()["limit"],
            "probe_flag": context.get_cluster_config()["probe.flag"],
            "this_sources": context.get_this_sources(),
            "sources_of_self": context.get_sources(context.get_component_id()),
            "sources_of_spout": context.get_sources("numbers"),
            "sources_of_unknown": context.get_sources("no-such-component"),
            "tasks": {name: context.get_component_tasks(name)
                      for name in ("numbers", "words", "__probe", "sink")},
            "tasks_of_unknown": context.get_component_tasks("no-such-component"),
            "pex_path": context.get_topology_pex_path(),
        }
        # What Heron's integration-test bolts do: count upstream tasks via .component_name.
        upstream = {key.component_name for key in context.get_this_sources()}
        answers["upstream_tasks"] = sum(len(context.get_component_tasks(c)) for c in upstream)
        answers["stream_ids"] = sorted((key.id, key.component_name)
                                       for key in context.get_this_sources())
        context.register_metric("probe-count", CountMetric(), 60)
        try:
            context.register_metric("probe-count", CountMetric(), 60)
        except DuplicateMetricError as exc:
            answers["duplicate_metric"] = (type(exc).__name__, isinstance(exc, RuntimeError),
                                           exc.name)
        collector = context.get_metrics_collector()
        collector.register_metric("via-collector", CountMetric(), 60)
        answers["collector_names"] = sorted(collector.metrics_map)
        path = Path(config[COLLECT_DIR]) / f"probe-{context.get_task_id()}.pkl"
        path.write_bytes(pickle.dumps(answers))

    def process(self, tup):
        if tup.stream == "default" and tup.component == "numbers":
            self.emit([tup.values[0]])


def _probe_topology():
    builder = TopologyBuilder("context-probe")
    numbers = builder.add_spout("numbers", Numbers, par=2)
    words = builder.add_spout("words", Words, par=1)
    probe = builder.add_bolt("__probe", ContextProbe, par=3,
                             inputs={numbers: Grouping.fields("n"),
                                     numbers["__side"]: Grouping.ALL,
                                     words: Grouping.LOWEST},
                             config={"probe.flag": True})
    builder.add_bolt("sink", CollectingBolt, par=1, inputs={probe: Grouping.SHUFFLE})
    builder.set_config({"limit": 10})
    return builder.build()


@pytest.fixture(scope="module")
def probe_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("probe")
    run = run_local(_probe_topology(), timeout=TIMEOUT, collect_dir=folder)
    answers = [pickle.loads(p.read_bytes()) for p in sorted(folder.glob("probe-*.pkl"))]
    return run, answers


def test_the_probe_topology_runs_to_its_end(probe_run):
    run, answers = probe_run
    assert run.status == "FINISHED"
    assert sorted(c.values[0] for c in run.collected("sink")) == list(range(10))
    assert len(answers) == 3


def test_sources_are_keyed_by_stream_id_with_grouping_numbers(probe_run):
    _, answers = probe_run
    expected = {("default", "numbers"): FIELDS, ("__side", "numbers"): ALL,
                ("default", "words"): LOWEST}
    for got in answers:
        sources = got["this_sources"]
        assert {(key.id, key.component_name): value for key, value in sources.items()} == expected
        assert all(type(key).__name__ == "StreamId" and key._fields == ("id", "component_name")
                   for key in sources)
        # a namedtuple: equal to (and hashed as) the plain (id, component_name) tuple
        assert sources[("__side", "numbers")] == ALL
        assert got["sources_of_self"] == sources
        assert got["sources_of_spout"] == {}
        assert got["sources_of_unknown"] is None
        assert got["stream_ids"] == sorted(expected)


def test_component_tasks_match_the_physical_plan(probe_run):
    run, answers = probe_run
    plan: dict[str, list[int]] = {}
    for instance in run.handle.physical_plan.instances:
        plan.setdefault(instance.component, []).append(instance.task_id)
    assert {name: len(tasks) for name, tasks in plan.items()} == \
        {"numbers": 2, "words": 1, "__probe": 3, "sink": 1}
    for got in answers:
        assert got["tasks"] == {name: sorted(tasks) for name, tasks in plan.items()}
        assert got["tasks_of_unknown"] == []
        assert got["upstream_tasks"] == 2 + 1
    assert sorted(got["task_id"] for got in answers) == sorted(plan["__probe"])
    assert {got["component_id"] for got in answers} == {"__probe"}


def test_config_name_metrics_and_pex_path(probe_run):
    _, answers = probe_run
    for got in answers:
        assert got["topology_name"] == "context-probe"
        assert got["config_is_cluster_config"] is True
        assert (got["limit"], got["probe_flag"]) == (10, True)
        assert got["duplicate_metric"] == ("DuplicateMetricError", True, "probe-count")
        # global_metrics' counters come first, as "__auto__", as in Heron's instance
        assert got["collector_names"] == ["__auto__", "probe-count", "via-collector"]
        assert got["pex_path"] == os.path.abspath(__file__)


class Double(Bolt):
    """Doubles ``n`` from "__numbers" onto "__doubled"."""

    outputs = [Stream(["n", "twice"], name="__doubled")]

    def process(self, tup):
        self.emit([tup.values[0], 2 * tup.values[0]], stream="__doubled")


class Source(Spout):
    """Emits 0..limit-1 on "__numbers" (split over its tasks)."""

    outputs = [Stream(["n"], name="__numbers")]

    def initialize(self, config, context):
        self.next = context.get_task_index()
        self.step = len(context.get_component_tasks(context.get_component_id()))
        self.limit = config["limit"]

    def next_tuple(self):
        if self.next >= self.limit:
            self.declare_exhausted()
            return
        self.emit([self.next], stream="__numbers")
        self.next += self.step


def test_double_underscore_components_and_streams_run_exactly(tmp_path):
    builder = TopologyBuilder("__underscored")
    source = builder.add_spout("__source", Source, par=2)
    double = builder.add_bolt("__double", Double, par=2,
                              inputs={source["__numbers"]: Grouping.fields("n")})
    builder.add_bolt("__integration_test_aggregator_bolt", CollectingBolt, par=1,
                     inputs={double["__doubled"]: Grouping.SHUFFLE})
    builder.set_config({"limit": 50})
    run = run_local(builder.build(), timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    got = run.collected("__integration_test_aggregator_bolt")
    assert sorted(c.values for c in got) == [(n, 2 * n) for n in range(50)]
    assert {(c.component, c.stream) for c in got} == {("__double", "__doubled")}


def test_heronpy_names_for_the_sources_keys_and_values(probe_run):
    from heronpy.proto import topology_pb2

    _, answers = probe_run
    sources = answers[0]["this_sources"]
    assert sources[topology_pb2.StreamId(id="default", component_name="numbers")] == \
        topology_pb2.Grouping.Value("FIELDS")
    assert {topology_pb2.Grouping.Name(v) for v in sources.values()} == {"FIELDS", "ALL", "LOWEST"}
