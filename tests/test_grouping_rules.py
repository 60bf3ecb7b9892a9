"""Groupings as the emitting instance applies them (``plan.grouping``), checked row by row
against each grouping's definition, per batch and per tuple."""

import collections

import numpy as np
import pytest

from heron_spark import Bolt, Grouping, Spout, Stream, TopologyBuilder
from heron_spark.contract import key_groups
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.plan import grouping
from heron_spark.proto.topology_pb2 import GroupingType
from heron_spark.wire import hashing, tuple_batch


class S(Spout):
    outputs = ["k", "v", Stream(["k"], name="d", direct=True)]

    def next_tuple(self):
        pass


class B(Bolt):
    def process(self, tup):
        pass


def _router():
    builder = TopologyBuilder("r")
    spout = builder.add_spout("s", S, par=1)
    builder.add_bolt("shuffle", B, par=3, inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("fields", B, par=4, inputs={spout: Grouping.fields("k")})
    builder.add_bolt("all", B, par=2, inputs={spout: Grouping.ALL})
    builder.add_bolt("lowest", B, par=3, inputs={spout: Grouping.LOWEST})
    builder.add_bolt("direct", B, par=2, inputs={spout["d"]: Grouping.DIRECT})
    view = PlanView(*(lambda p: (p, pack(p)))(build_logical_plan(builder.build())))
    return grouping.stream_routing(view, "s"), view


def _received(destinations, rows):
    out = collections.defaultdict(list)
    for task, indices in destinations.items():
        out[task].extend(grouping.as_indices(indices, rows).tolist())
    return out


def test_every_grouping_routes_as_specified():
    router, view = _router()
    keys = [f"k{i % 7}" for i in range(100)]
    batch = tuple_batch.build(["k", "v"], [(k, i) for i, k in enumerate(keys)])
    got = _received(router["default"].partition(batch)[1], 100)
    tasks = view.component_tasks
    shuffle = [len(got[t]) for t in tasks["shuffle"]]
    assert sorted(shuffle) == [33, 33, 34]  # 100 rows >= 32 per task: sliced evenly
    small = tuple_batch.build(["k", "v"], [("a", i) for i in range(10)])
    got_small = _received(router["default"].partition(small)[1], 10)
    assert sorted(len(got_small[t]) for t in tasks["shuffle"]) == [0, 0, 10]  # whole
    owner = {}
    for task in tasks["fields"]:
        for row in got[task]:
            assert owner.setdefault(keys[row], task) == task  # one key, one task
    assert sum(len(got[t]) for t in tasks["fields"]) == 100
    for task in tasks["all"]:
        assert got[task] == list(range(100))
    assert got[tasks["lowest"][0]] == list(range(100))
    assert all(t not in got for t in tasks["lowest"][1:])


def test_direct_rows_go_to_the_chosen_task():
    router, view = _router()
    targets = view.component_tasks["direct"]
    chosen = [[targets[i % 2]] for i in range(10)]
    batch = tuple_batch.build(["k"], [(str(i),) for i in range(10)])
    got = _received(router["d"].partition(batch, chosen, [False] * 10)[1], 10)
    assert got[targets[0]] == [0, 2, 4, 6, 8] and got[targets[1]] == [1, 3, 5, 7, 9]


def test_shuffle_stays_balanced_over_many_batches():
    router, view = _router()
    totals = collections.Counter()
    sizes = [1, 2, 5, 1, 1, 7, 3, 1, 2, 4] * 30 + [800, 1000, 799] + [3] * 10
    for size in sizes:
        batch = tuple_batch.build(["k", "v"], [("a", i) for i in range(size)])
        parts = {task: len(grouping.as_indices(rows, size))
                 for task, rows in router["default"].partition(batch)[1].items()
                 if task in view.component_tasks["shuffle"]}
        if size >= grouping.SHUFFLE_SLICE_ROWS * 3:  # big: sliced evenly over the 3 tasks
            assert max(parts.values()) - min(parts.values()) <= 1 and len(parts) == 3
        else:  # small: whole, to one task
            assert list(parts.values()) == [size]
        totals.update(parts)
        counts = [totals[t] for t in view.component_tasks["shuffle"]]
        assert max(counts) - min(counts) <= 7, counts  # within the biggest small batch


def test_rows_routed_per_tuple_skip_the_batched_groupings():
    router, view = _router()
    routing = router["default"]
    rows = [(f"k{i}", i) for i in range(6)]
    batch = tuple_batch.build(["k", "v"], rows)
    # rows 1 and 4 were emitted with need_task_ids: their destinations were chosen per tuple
    chosen = [None] * 6
    routed = [False] * 6
    for row in (1, 4):
        chosen[row] = [d for t in routing.targets for d in t.choose(rows[row], None)]
        routed[row] = True
    got = _received(routing.partition(batch, chosen, routed)[1], 6)
    for task in view.component_tasks["all"]:
        assert got[task] == list(range(6))  # chosen rows joined in emission order
    fields_rows = sorted(r for t in view.component_tasks["fields"] for r in got[t])
    assert fields_rows == list(range(6))
    per_tuple = {r: t for t in view.component_tasks["fields"] for r in got[t]}
    for row in range(6):  # per-tuple and batched fields hashing agree
        expected = [d for d in routing.targets[1].choose(rows[row], None)]
        assert [per_tuple[row]] == expected


def test_a_lone_fields_grouping_reorders_the_batch_into_one_slice_per_task():
    builder = TopologyBuilder("f")
    spout = builder.add_spout("s", S, par=1)
    builder.add_bolt("fields", B, par=3, inputs={spout: Grouping.fields("k")})
    view = PlanView(*(lambda p: (p, pack(p)))(build_logical_plan(builder.build())))
    routing = grouping.stream_routing(view, "s")["default"]
    rows = [(f"k{i % 11}", i) for i in range(200)]
    reordered, parts = routing.partition(tuple_batch.build(["k", "v"], rows))
    owner = {}
    seen = []
    for task, part in parts.items():
        assert isinstance(part, slice)
        got = tuple_batch.rows(grouping.take(reordered, part), 2)
        assert [v for _, v in got] == sorted(v for _, v in got)  # emission order kept
        for key, value in got:
            assert owner.setdefault(key, task) == task
            assert [task] == routing.targets[0].choose((key, value), None)  # per tuple agrees
        seen.extend(v for _, v in got)
    assert sorted(seen) == list(range(200))


def test_remembered_key_slots_agree_with_the_hash():
    """A one-field fields grouping remembers each key's task; new keys are hashed in plain
    Python (a few) or with NumPy (many): every way gives the task the hash gives."""
    keys = ["", "a", "w1", "ünïcode", "x" * 300, "\ud800", *[f"k{i}" for i in range(50)]]
    hashed = tuple_batch.key_hash([tuple_batch.canonical_keys(keys)]).tolist()
    expected = np.array([key_groups.task_of_key_group(h % 128, 7, 128) for h in hashed])
    few, many = grouping.KeySlots(7, 128), grouping.KeySlots(7, 128)
    by_few = [int(few.slots([key])[0]) for key in keys]  # one new key at a time
    assert by_few == expected.tolist()
    assert many.slots(keys).tolist() == expected.tolist()  # all new at once
    assert many.slots(keys[::-1]).tolist() == expected.tolist()[::-1]  # all remembered
    assert [hashing.text_hash(k.encode("utf-8", "surrogatepass")) for k in keys] == \
        hashing.string_hash(tuple_batch.canonical_keys(keys)).tolist()


class Pairs(Spout):
    outputs = ["k", "j", "v"]

    def next_tuple(self):
        pass


@pytest.mark.parametrize("fields", [("k",), ("k", "j")])
def test_rows_ordered_before_their_batch_is_built_go_where_the_batch_would_send_them(fields):
    """An emitter holding Python rows orders them by task (``row_order``: plain Python for a
    few rows, ``row_slots`` and ``slot_order`` for many): each key reaches the task the Arrow
    batch's hash and the per-tuple choice name, whatever its type (1, 1.0 and True are three
    keys), and each task's rows keep their order; both ways give the same order and slices."""
    builder = TopologyBuilder("f")
    spout = builder.add_spout("s", Pairs, par=1)
    builder.add_bolt("fields", B, par=3, inputs={spout: Grouping.fields(*fields)})
    view = PlanView(*(lambda p: (p, pack(p)))(build_logical_plan(builder.build())))
    target = grouping.stream_routing(view, "s")["default"].sorter
    keys = ["a", "b", 1, 1.0, True, None, b"x", "\ud800", 2 ** 70, *[f"w{i}" for i in range(3000)]]
    rows = [(key, str(i % 5), i) for i, key in enumerate(keys)]
    single = [row for row in rows if target.choose(row, None) == target.choose(rows[0], None)]
    # few rows, mixed types, one task only, the most and one more than plain Python orders,
    # more than a dictionary's
    for chunk in (rows[:9], rows[:12], single[:5], rows[:256], rows[:257], rows):
        order, parts = target.row_order(chunk)
        numpy_order, numpy_parts = target.slot_order(target.row_slots(chunk))
        assert order == (None if numpy_order is None else numpy_order.tolist())
        assert parts == numpy_parts
        ordered = chunk if order is None else [chunk[i] for i in order]
        position = {row[2]: at for at, row in enumerate(chunk)}
        batch = tuple_batch.build(["k", "j", "v"], chunk)
        arrow_slots = [key_groups.task_of_key_group(h % 128, 3, 128) for h in tuple_batch.key_hash(
            tuple_batch.key_columns(batch, target.key_indices)).tolist()]
        for task, part in parts.items():
            got = ordered if part is None else ordered[part]
            assert [v for *_, v in got] == sorted(v for *_, v in got)
            for row in got:
                assert [task] == target.choose(row, None)
                assert target.task_list[int(arrow_slots[position[row[2]]])] == task


def _batches_of_every_key_layout(rows):
    """The rows as the Arrow batches an emitter may hold: built from Python values (mixed types
    go pickled), native strings with nulls, and dictionary-typed strings."""
    yield tuple_batch.build(["k", "j", "v"], rows)
    strings = [(None if k is None else str(k), j, v) for k, j, v in rows]
    yield tuple_batch.build(["k", "j", "v"], strings)
    if all(k is not None for k, *_ in strings):
        native = tuple_batch.build(["k", "j", "v"], strings)
        yield native.set_column(0, "k", native.column(0).dictionary_encode())


@pytest.mark.parametrize("task_count", [1, 2, 3, 12])
@pytest.mark.parametrize("fields", [(0,), (0, 1)])
def test_every_arrow_path_sends_a_key_where_the_per_tuple_choice_does(task_count, fields):
    """A fields grouping's Arrow paths agree with ``Target.choose`` row by row: the reorder of
    a whole batch (``sorted_partition``: a mask for 2 tasks, a division for 3 and 12; a
    pass per task up to 8 tasks, a sort beyond), ``partition`` beside another grouping, and
    ``row_slots`` on Python rows; for keys of mixed types with nulls, native and dictionary
    string columns, and batches whose key bytes span several hashing chunks."""
    tasks = list(range(10, 10 + task_count))
    fields_target = grouping.Target(GroupingType.FIELDS, tasks, fields)
    alone = grouping.StreamRouting([fields_target])
    beside = grouping.StreamRouting([grouping.Target(GroupingType.FIELDS, tasks, fields),
                                     grouping.Target(GroupingType.SHUFFLE, [99], [])])
    odd = ["a", 1, 1.0, True, None, b"x", "\ud800", 2 ** 70, "", "x" * 5000, "ü漢"]
    mixed = [(k, i % 5, i) for i, k in enumerate(odd)]
    # > 128 KiB of keys (batches spanning several hashing chunks) for one task count: the
    # chunking does not depend on it
    words = [(f"w{i % 2000}", i % 5, 100 + i) for i in range(40_000 if task_count == 3 else 4_000)]
    chosen: dict = {}

    def expected(row):
        key = tuple((type(row[i]), row[i]) for i in fields)
        if key not in chosen:
            chosen[key] = fields_target.choose(row, None)
        return chosen[key]

    for rows in (mixed, mixed + words, words):
        slots = fields_target.row_slots(rows)
        assert [[tasks[s]] for s in slots.tolist()] == [expected(r) for r in rows]
        for batch in _batches_of_every_key_layout(rows):
            values = tuple_batch.rows(batch, 3)
            reordered, parts = alone.partition(batch)
            got = {}
            for task, part in parts.items():
                sent = tuple_batch.rows(grouping.take(reordered, part), 3)
                assert [v for *_, v in sent] == sorted(v for *_, v in sent)  # order kept
                got.update((v, task) for *_, v in sent)
            assert len(got) == len(rows)
            same, parts = beside.partition(batch)
            assert same is batch
            for task, part in parts.items():
                if task != 99:
                    for row in grouping.as_indices(part, len(rows)).tolist():
                        assert got[values[row][2]] == task
            for row in values:
                assert [got[row[2]]] == expected(row)
