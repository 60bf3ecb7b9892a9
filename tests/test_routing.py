"""Vectorised routing in the stmgr, checked row by row against the grouping's definition."""

import collections

from heron_spark import Bolt, Grouping, Spout, Stream, TopologyBuilder
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack
from heron_spark.plan.view import PlanView
from heron_spark.stmgr.routing import Router
from heron_spark.wire import tuple_batch


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
    return Router(view), view


def _received(destinations, rows):
    out = collections.defaultdict(list)
    for task, indices in destinations.items():
        out[task].extend(range(rows) if indices is None else indices.tolist())
    return out


def test_every_grouping_routes_as_specified():
    router, view = _router()
    keys = [f"k{i % 7}" for i in range(100)]
    batch = tuple_batch.decode(tuple_batch.encode(["k", "v"], [(k, i) for i, k in enumerate(keys)]))
    got = _received(router.route(1, "default", batch), 100)
    tasks = view.component_tasks
    shuffle = [len(got[t]) for t in tasks["shuffle"]]
    assert sum(shuffle) == 100 and max(shuffle) - min(shuffle) <= 1
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
    batch = tuple_batch.decode(tuple_batch.encode(["k"], [(str(i),) for i in range(10)], dests=chosen))
    got = _received(router.route(1, "d", batch), 10)
    assert got[targets[0]] == [0, 2, 4, 6, 8] and got[targets[1]] == [1, 3, 5, 7, 9]
