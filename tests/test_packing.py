"""Packing plans: round-robin and first-fit-decreasing by resources."""

import pytest

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder, TopologyValueError
from heron_spark.plan.logical import build_logical_plan
from heron_spark.plan.packing import pack

GiB = 1024 ** 3


class S(Spout):
    outputs = ["w"]

    def next_tuple(self):
        pass


class B(Bolt):
    outputs = ["w"]

    def process(self, tup):
        pass


def _plan(config, big_ram=None):
    builder = TopologyBuilder("p")
    spout = builder.add_spout("s", S, par=2)
    builder.add_bolt("big", B, par=3, inputs={spout: Grouping.SHUFFLE},
                     config={"topology.component.ram": big_ram} if big_ram else None)
    builder.add_bolt("small", B, par=2, inputs={spout: Grouping.fields("w")})
    builder.set_config(config)
    return build_logical_plan(builder.build())


def test_round_robin_spreads_tasks_and_numbers_them_from_one():
    packing = pack(_plan({"topology.stmgrs": 3}))
    layout = [[i.task_id for i in c.instances] for c in packing.containers]
    assert layout == [[1, 4, 7], [2, 5], [3, 6]]
    assert sorted(t for c in layout for t in c) == list(range(1, 8))


def test_first_fit_decreasing_packs_by_ram():
    plan = _plan({"topology.container.max.ram.hint": 4 * GiB,
                  "topology.container.max.cpu.hint": 8}, big_ram=2 * GiB)
    packing = pack(plan, "first_fit_decreasing")
    for container in packing.containers:
        assert container.ram_bytes <= 4 * GiB
    bigs = [[i.component for i in c.instances].count("big") for c in packing.containers]
    assert bigs == [2, 1]  # two 2 GiB instances fill the first container
    assert sum(len(c.instances) for c in packing.containers) == 7


def test_first_fit_decreasing_refuses_an_instance_larger_than_a_container():
    plan = _plan({"topology.container.max.ram.hint": GiB}, big_ram=2 * GiB)
    with pytest.raises(TopologyValueError) as info:
        pack(plan, "first_fit_decreasing")
    assert (info.value.kind, info.value.component) == ("resources", "big")
