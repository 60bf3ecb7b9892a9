"""End to end: every grouping routes tuples as Heron specifies.

Two real topologies run on Spark ``local[4]`` with ``topology.stmgrs = 2`` (so tuples cross
containers), once per module, and each test checks one grouping against expectations computed
here, independently of the engine, from what the collecting bolts recorded:

- ``static``: one scripted spout feeding one collector per grouping (fields, all, lowest,
  shuffle, none, custom);
- ``chosen``: bolts that pick destinations while emitting (a direct stream, and
  ``need_task_ids=True`` whose answer is compared with where the tuple really arrived).

Task ids come from the physical plan the TMaster broadcast.
"""

from __future__ import annotations

import collections

import pytest

from heron_spark import Bolt, Grouping, ICustomGrouping, Stream, Topology
from heron_spark.testing import CollectingBolt, ScriptedSpout, run_local

KEYS = 17
TUPLES = 340  # per run; keys k0..k16, each 20 times
SCRIPT = [(f"k{seq % KEYS}", seq) for seq in range(TUPLES)]
EMITTED = collections.Counter(SCRIPT)
CONF = {"topology.stmgrs": 2}
TIMEOUT = 180


# --- components (module level, so instance processes import them by reference) -------------

class ModuloGrouping(ICustomGrouping):
    """Sends tuple ``(key, seq)`` to ``target_tasks[seq % len(target_tasks)]``."""

    def prepare(self, context, component, stream, target_tasks):
        self.targets = sorted(target_tasks)

    def choose_tasks(self, values):
        return [self.targets[values[1] % len(self.targets)]]


class DirectingBolt(Bolt):
    """Re-emits each tuple on direct stream ``d`` to task ``seq % n`` of ``direct_sink``."""

    outputs = [Stream(["key", "seq", "target"], name="d", direct=True)]

    def initialize(self, config, context):
        self.targets = sorted(context.get_component_tasks("direct_sink"))

    def process(self, tup):
        key, seq = tup.values
        target = self.targets[seq % len(self.targets)]
        self.emit([key, seq, target], stream="d", direct_task=target)


class TaskIdsBolt(Bolt):
    """Emits each tuple on ``probe``, asking for its task ids when ``seq`` is even, then
    reports what ``emit`` returned on ``ids`` (comma-separated ids, or ``None``)."""

    outputs = [Stream(["key", "seq"], name="probe"), Stream(["seq", "ids"], name="ids")]

    def process(self, tup):
        key, seq = tup.values
        ids = self.emit([key, seq], stream="probe", need_task_ids=seq % 2 == 0)
        reported = "None" if ids is None else ",".join(str(int(t)) for t in sorted(ids))
        self.emit([seq, reported], stream="ids")


def _static_topology() -> type:
    src = ScriptedSpout.spec(name="src", par=2, script=SCRIPT, fields=("key", "seq"))
    return type("GroupingsStatic", (Topology,), {
        "config": dict(CONF),
        "src": src,
        "fields_sink": CollectingBolt.spec(par=3, inputs={src: Grouping.fields("key")}),
        "all_sink": CollectingBolt.spec(par=2, inputs={src: Grouping.ALL}),
        "lowest_sink": CollectingBolt.spec(par=3, inputs={src: Grouping.GLOBAL}),
        "shuffle_sink": CollectingBolt.spec(par=3, inputs={src: Grouping.SHUFFLE}),
        "none_sink": CollectingBolt.spec(par=2, inputs={src: Grouping.NONE}),
        "custom_sink": CollectingBolt.spec(par=3,
                                           inputs={src: Grouping.custom(ModuloGrouping())}),
    })


def _chosen_topology() -> type:
    src = ScriptedSpout.spec(name="src", par=2, script=SCRIPT, fields=("key", "seq"))
    director = DirectingBolt.spec(name="director", par=2, inputs={src: Grouping.SHUFFLE})
    tagger = TaskIdsBolt.spec(name="tagger", par=2, inputs={src: Grouping.SHUFFLE})
    return type("GroupingsChosen", (Topology,), {
        "config": dict(CONF),
        "src": src,
        "director": director,
        "direct_sink": CollectingBolt.spec(par=3, inputs={director["d"]: Grouping.DIRECT}),
        "tagger": tagger,
        "probe_shuffle": CollectingBolt.spec(par=2, inputs={tagger["probe"]: Grouping.SHUFFLE}),
        "probe_fields": CollectingBolt.spec(par=2,
                                            inputs={tagger["probe"]: Grouping.fields("key")}),
        "ids_sink": CollectingBolt.spec(par=1, inputs={tagger["ids"]: Grouping.GLOBAL}),
    })


class Run:
    """One finished run: collected tuples per component, task ids per component."""

    def __init__(self, local_run) -> None:
        self.status = local_run.status
        plan = local_run.handle.physical_plan
        assert plan is not None, "the topology never broadcast a physical plan"
        self.tasks: dict[str, list[int]] = collections.defaultdict(list)
        self.container: dict[int, int] = {}
        for inst in plan.instances:
            self.tasks[inst.component].append(inst.task_id)
            self.container[inst.task_id] = inst.container_index
        for tasks in self.tasks.values():
            tasks.sort()
        self._run = local_run

    def collected(self, component: str):
        return self._run.collected(component)

    def by_task(self, component: str) -> dict[int, collections.Counter]:
        """{task: multiset of values} over every task of ``component`` (empty ones too)."""
        out = {task: collections.Counter() for task in self.tasks[component]}
        for item in self.collected(component):
            assert item.task in out, f"{component}: tuple recorded by unknown task {item.task}"
            out[item.task][item.values] += 1
        return out


def _run(hconf_for, folder, topology) -> Run:
    run = Run(run_local(topology, conf=hconf_for(folder), timeout=TIMEOUT,
                        collect_dir=folder / "collect", engine="in-process"))
    assert run.status == "FINISHED"
    return run


@pytest.fixture(scope="module")
def static(hconf_for, tmp_path_factory) -> Run:
    return _run(hconf_for, tmp_path_factory.mktemp("static"), _static_topology())


@pytest.fixture(scope="module")
def chosen(hconf_for, tmp_path_factory) -> Run:
    return _run(hconf_for, tmp_path_factory.mktemp("chosen"), _chosen_topology())


def _assert_spans_containers(run: Run, component: str) -> None:
    containers = {run.container[t] for t in run.tasks[component]}
    assert containers == {0, 1}, f"{component} tasks should sit in both containers: {containers}"


def _total(per_task: dict[int, collections.Counter]) -> collections.Counter:
    total = collections.Counter()
    for values in per_task.values():
        total.update(values)
    return total


# --- static groupings -------------------------------------------------------------------------

def test_plan_places_receivers_in_both_containers(static):
    for component in ("fields_sink", "lowest_sink", "shuffle_sink", "custom_sink"):
        assert len(static.tasks[component]) == 3
        _assert_spans_containers(static, component)
    for component in ("all_sink", "none_sink"):
        assert len(static.tasks[component]) == 2
    assert len(static.tasks["src"]) == 2
    _assert_spans_containers(static, "src")


def test_fields_grouping_sends_each_key_to_exactly_one_task(static):
    per_task = static.by_task("fields_sink")
    assert _total(per_task) == EMITTED  # every tuple exactly once
    owner: dict[str, set[int]] = collections.defaultdict(set)
    for task, values in per_task.items():
        for key, _seq in values:
            owner[key].add(task)
    assert set(owner) == {f"k{i}" for i in range(KEYS)}
    assert all(len(tasks) == 1 for tasks in owner.values()), owner
    used = {next(iter(tasks)) for tasks in owner.values()}
    assert len(used) >= 2, f"17 keys should spread over more than one of 3 tasks: {owner}"


def test_all_grouping_delivers_every_tuple_to_every_task(static):
    per_task = static.by_task("all_sink")
    assert len(per_task) == 2
    for task, values in per_task.items():
        assert values == EMITTED, f"task {task} of all_sink missed or repeated tuples"


def test_lowest_grouping_delivers_everything_to_the_lowest_task_only(static):
    per_task = static.by_task("lowest_sink")
    lowest = min(static.tasks["lowest_sink"])
    assert per_task[lowest] == EMITTED
    for task, values in per_task.items():
        if task != lowest:
            assert not values, f"task {task} is not the lowest ({lowest}) but got tuples"


def test_shuffle_grouping_spreads_over_every_task(static):
    per_task = static.by_task("shuffle_sink")
    assert _total(per_task) == EMITTED
    counts = {task: sum(values.values()) for task, values in per_task.items()}
    fair = TUPLES / len(counts)
    for count in counts.values():
        assert 0.5 * fair <= count <= 1.5 * fair, f"unbalanced shuffle: {counts}"


def test_none_grouping_delivers_each_tuple_once(static):
    per_task = static.by_task("none_sink")
    assert _total(per_task) == EMITTED


def test_custom_grouping_sends_each_tuple_where_choose_tasks_said(static):
    per_task = static.by_task("custom_sink")
    assert _total(per_task) == EMITTED
    targets = static.tasks["custom_sink"]
    for task, values in per_task.items():
        for (_key, seq), _n in values.items():
            assert task == targets[seq % len(targets)], f"seq {seq} reached task {task}"
    assert all(per_task.values()), "every custom_sink task is chosen for some seq"


def test_source_task_is_the_emitting_spout_task(static):
    # ScriptedSpout deals item i to spout task index i % 2.
    spouts = static.tasks["src"]
    for item in static.collected("none_sink"):
        assert item.component == "src" and item.stream == "default"
        assert item.source_task == spouts[item.values[1] % 2]


# --- groupings where the emitter chooses -------------------------------------------------------

def test_direct_grouping_reaches_exactly_the_chosen_task(chosen):
    _assert_spans_containers(chosen, "direct_sink")
    per_task = chosen.by_task("direct_sink")
    targets = chosen.tasks["direct_sink"]
    expected = collections.Counter((key, seq, targets[seq % len(targets)])
                                   for key, seq in SCRIPT)
    assert _total(per_task) == expected
    for task, values in per_task.items():
        for (_key, _seq, target), _n in values.items():
            assert task == target
    directors = set(chosen.tasks["director"])
    for item in chosen.collected("direct_sink"):
        assert item.stream == "d" and item.component == "director"
        assert item.source_task in directors


def test_need_task_ids_returns_where_the_tuple_was_delivered(chosen):
    _assert_spans_containers(chosen, "probe_shuffle")
    _assert_spans_containers(chosen, "probe_fields")
    delivered: dict[int, list[int]] = collections.defaultdict(list)
    for component in ("probe_shuffle", "probe_fields"):
        received = chosen.collected(component)
        assert collections.Counter(item.values for item in received) == EMITTED
        for item in received:
            assert item.stream == "probe"
            delivered[item.values[1]].append(item.task)
    reported = {}
    for item in chosen.collected("ids_sink"):
        seq, ids = item.values
        assert seq not in reported, f"seq {seq} reported twice"
        reported[seq] = ids
    assert set(reported) == set(range(TUPLES))
    shuffle_tasks = set(chosen.tasks["probe_shuffle"])
    fields_tasks = set(chosen.tasks["probe_fields"])
    for seq in range(TUPLES):
        if seq % 2:
            assert reported[seq] == "None", f"seq {seq}: emit returned ids unasked"
            continue
        ids = sorted(int(t) for t in reported[seq].split(","))
        assert ids == sorted(delivered[seq]), f"seq {seq}"
        # one task of each subscriber
        assert len(set(ids) & shuffle_tasks) == 1
        assert len(set(ids) & fields_tasks) == 1


def test_fields_grouping_agrees_with_and_without_need_task_ids(chosen):
    # Even seqs were routed by the emitter (need_task_ids), odd ones by the stmgr: a key must
    # still land on one task of probe_fields.
    owner: dict[str, set[int]] = collections.defaultdict(set)
    for item in chosen.collected("probe_fields"):
        owner[item.values[0]].add(item.task)
    assert set(owner) == {f"k{i}" for i in range(KEYS)}
    split = {key: tasks for key, tasks in owner.items() if len(tasks) != 1}
    assert not split, f"keys delivered to several probe_fields tasks: {split}"
