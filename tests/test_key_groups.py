"""Key groups (``contract.key_groups``): the fields grouping sends a key to the task owning its
key group, and a stateful task's keyed state is the groups it owns."""

import pytest

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.contract import key_groups
from heron_spark.errors import TopologyValueError
from heron_spark.plan import grouping
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.proto.topology_pb2 import GroupingType
from heron_spark.wire import hashing, tuple_batch

KEYS = ["", "a", "word", "ünïcode", "x" * 300, "\ud800", 7, 1.5, None,
        *[f"w{i}" for i in range(500)]]


@pytest.mark.parametrize("max_par", [1, 7, 100, 128, 32768])
def test_every_key_group_has_one_owner_and_each_task_one_contiguous_range(max_par):
    for par in {1, 2, 3, 5, min(max_par, 64), max_par}:
        if par > max_par:
            continue
        ranges = [key_groups.key_group_range(i, par, max_par) for i in range(par)]
        assert [g for r in ranges for g in r] == list(range(max_par))  # in order, no gap
        assert all(len(r) for r in ranges)
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1  # balanced
        for index, owned in enumerate(ranges):
            assert {key_groups.task_of_key_group(g, par, max_par) for g in owned} == {index}
        if max_par <= 128:
            assert key_groups.owners(par, max_par) == tuple(
                i for i, r in enumerate(ranges) for _ in r)


def test_flinks_rule_on_the_default_128_key_groups():
    assert list(key_groups.key_group_range(0, 2, 128)) == list(range(0, 64))
    assert list(key_groups.key_group_range(1, 3, 128)) == list(range(43, 86))
    assert list(key_groups.key_group_range(2, 3, 128)) == list(range(86, 128))
    assert key_groups.task_of_key_group(42, 3, 128) == 0
    assert key_groups.task_of_key_group(43, 3, 128) == 1


def test_a_state_key_has_the_group_of_the_grouping_hash():
    """The state key ``word`` and a one-field grouping on ``word`` hash alike (the vectorised
    Arrow hash, computed apart from the scalar one); a tuple key combines its items' hashes
    as a grouping on several fields combines its columns."""
    vectorised = hashing.string_hash(tuple_batch.canonical_keys(KEYS)).tolist()
    for max_par in (128, 100):
        assert [key_groups.key_group(k, max_par) for k in KEYS] == [h % max_par for h in vectorised]
    pairs = [(f"w{i}", i % 3) for i in range(50)]
    columns = [tuple_batch.canonical_keys([p[0] for p in pairs]),
               tuple_batch.canonical_keys([p[1] for p in pairs])]
    assert [key_groups.key_hash(p) for p in pairs] == tuple_batch.key_hash(columns).tolist()


def _target(par: int, max_par: int, fields=(0,)) -> grouping.Target:
    return grouping.Target(GroupingType.FIELDS, list(range(10, 10 + par)), list(fields),
                           max_parallelism=max_par)


@pytest.mark.parametrize("max_par", [128, 100, 7])
@pytest.mark.parametrize("par", [1, 2, 3, 7])
def test_the_fields_grouping_sends_each_key_to_the_owner_of_its_group(par, max_par):
    target = _target(par, max_par)
    rows = [(k, i) for i, k in enumerate(KEYS)]
    want = [10 + key_groups.task_of_key_group(key_groups.key_group(k, max_par), par, max_par)
            for k in KEYS]
    assert [target.choose(row, None)[0] for row in rows] == want
    assert [10 + s for s in target.row_slots(rows).tolist()] == want
    batch = tuple_batch.build(["k", "v"], rows)
    reordered, parts = grouping.StreamRouting([target]).partition(batch)
    sent = {}
    for task, part in parts.items():
        for key, _ in tuple_batch.rows(grouping.take(reordered, part), 2):
            sent.setdefault(str(key), set()).add(task)
    assert sent == {str(k): {w} for k, w in zip(KEYS, want)}
    few = grouping.KeySlots(par, max_par)
    words = [k for k in KEYS if isinstance(k, str)]
    assert [10 + few.slots([w])[0] for w in words] == [w for k, w in zip(KEYS, want)
                                                       if isinstance(k, str)]


def test_a_rescale_moves_whole_key_groups():
    """From 2 to 3 tasks and back to 1: every key stays with its group, and each new task's
    keys are exactly those of the groups it owns."""
    words = [f"w{i}" for i in range(2000)]
    for par in (2, 3, 1):
        target = _target(par, 128)
        for word in words:
            task = target.choose((word,), None)[0] - 10
            assert key_groups.key_group(word, 128) in key_groups.key_group_range(task, par, 128)


class S(Spout):
    outputs = ["k"]

    def next_tuple(self):
        pass


class B(Bolt):
    def process(self, tup):
        pass


def _plan(par: int, config: dict):
    builder = TopologyBuilder("kg")
    spout = builder.add_spout("s", S, par=1)
    builder.add_bolt("count", B, par=par, inputs={spout: Grouping.fields("k")})
    builder.set_config(config)
    return build_logical_plan(builder.build())


def test_max_parallelism_is_checked_at_submit():
    plan = _plan(3, {"topology.max.parallelism": 3})
    assert plan.topology_config.max_parallelism == 3
    assert _plan(3, {}).topology_config.max_parallelism == 128
    routing = grouping.stream_routing(PlanView(plan, pack(plan)), "s")["default"]
    assert routing.targets[0].max_parallelism == 3
    with pytest.raises(TopologyValueError) as info:
        _plan(4, {"topology.max.parallelism": 3})
    assert info.value.component == "count" and info.value.value == 4
    for bad in (0, -1, "x", 1.5, 32769):
        with pytest.raises(TopologyValueError) as info:
            _plan(1, {"topology.max.parallelism": bad})
        assert info.value.kind == "config" and info.value.value == bad
