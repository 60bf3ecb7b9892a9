"""Invalid topologies fail before launch, naming the component and the problem."""

import subprocess
import sys
import threading

import pytest

from heron_spark import (Bolt, Grouping, ICustomGrouping, Spout, Stream, Topology, TopologyBuilder,
                         TopologyValueError, _pickling)
from heron_spark.api.component import GlobalStreamId
from heron_spark.plan.logical import build_logical_plan


class WordSpout(Spout):
    outputs = ["word"]

    def next_tuple(self):
        self.emit(["w"])


class EchoBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        self.emit(list(tup.values))


def _invalid(build) -> TopologyValueError:
    with pytest.raises(TopologyValueError) as info:
        build_logical_plan(build())
    return info.value


def _builder(*bolts, spout_par=1, config=None):
    builder = TopologyBuilder("t")
    spout = builder.add_spout("spout", WordSpout, par=spout_par)
    for name, cls, par, inputs in bolts:
        builder.add_bolt(name, cls, par=par, inputs=inputs(spout) if callable(inputs) else inputs)
    if config:
        builder.set_config(config)
    return builder.build()


def test_unknown_input_component():
    error = _invalid(lambda: _builder(("b", EchoBolt, 1, {"nope": Grouping.SHUFFLE})))
    assert (error.kind, error.component, error.value) == ("unknown_component", "b", "nope")


def test_unknown_input_stream():
    error = _invalid(lambda: _builder(
        ("b", EchoBolt, 1, lambda s: {GlobalStreamId("spout", "other"): Grouping.SHUFFLE})))
    assert (error.kind, error.component, error.value) == ("unknown_stream", "b", "other")


def test_fields_grouping_on_undeclared_field():
    error = _invalid(lambda: _builder(("b", EchoBolt, 1, lambda s: {s: Grouping.fields("x")})))
    assert (error.kind, error.component, error.value) == ("unknown_field", "b", ["x"])


def test_duplicate_names_builder():
    builder = TopologyBuilder("t")
    builder.add_spout("same", WordSpout, par=1)
    with pytest.raises(TopologyValueError) as info:
        builder.add_spout("same", WordSpout, par=1)
    assert (info.value.kind, info.value.component) == ("duplicate_name", "same")


def test_duplicate_names_class_based():
    with pytest.raises(TopologyValueError) as info:
        type("T", (Topology,), {"a": WordSpout.spec(name="x"), "b": WordSpout.spec(name="x")})
    assert (info.value.kind, info.value.component) == ("duplicate_name", "x")


@pytest.mark.parametrize("par", [0, -1, "2", True, 1.5])
def test_parallelism_below_one_or_not_int(par):
    error = _invalid(lambda: _builder(("b", EchoBolt, par, lambda s: [s])))
    assert (error.kind, error.component, error.value) == ("parallelism", "b", par)


def test_cycle():
    def build():
        a = EchoBolt.spec(name="a", par=1, inputs=None)
        b = EchoBolt.spec(name="b", par=1, inputs={a: Grouping.SHUFFLE})
        spout = WordSpout.spec(name="spout")
        a.inputs = {spout: Grouping.SHUFFLE, b: Grouping.SHUFFLE}
        return type("T", (Topology,), {"spout": spout, "a": a, "b": b})

    error = _invalid(build)
    assert error.kind == "cycle" and error.component in ("a", "b")
    assert "a" in error.value and "b" in error.value


def test_class_that_cannot_be_pickled():
    class LockedBolt(EchoBolt):
        lock = threading.Lock()

    error = _invalid(lambda: _builder(("locked", LockedBolt, 1, lambda s: [s])))
    assert (error.kind, error.component) == ("pickle", "locked")


def test_spout_needs_no_inputs_and_bolt_needs_inputs():
    error = _invalid(lambda: _builder(("b", EchoBolt, 1, None)))
    assert (error.kind, error.component) == ("inputs", "b")


def test_direct_grouping_needs_direct_stream():
    error = _invalid(lambda: _builder(("b", EchoBolt, 1, lambda s: {s: Grouping.DIRECT})))
    assert (error.kind, error.component) == ("grouping", "b")

    class DirectSpout(WordSpout):
        outputs = [Stream(["word"], name="d", direct=True)]

    builder = TopologyBuilder("t")
    spout = builder.add_spout("spout", DirectSpout, par=1)
    builder.add_bolt("b", EchoBolt, par=1, inputs={spout["d"]: Grouping.SHUFFLE})
    error = _invalid(builder.build)
    assert (error.kind, error.component) == ("grouping", "b")


def test_missing_next_tuple_or_process():
    class Lazy(Spout):
        outputs = ["x"]

    builder = TopologyBuilder("t")
    builder.add_spout("lazy", Lazy, par=1)
    error = _invalid(builder.build)
    assert (error.kind, error.component) == ("class", "lazy")


def test_more_containers_than_instances():
    error = _invalid(lambda: _builder(("b", EchoBolt, 1, lambda s: [s]),
                                      config={"topology.stmgrs": 5}))
    assert (error.kind, error.value) == ("config", 5)


def test_reserved_field_name():
    class Reserved(WordSpout):
        outputs = ["__hs_dests"]

    builder = TopologyBuilder("t")
    builder.add_spout("r", Reserved, par=1)
    error = _invalid(builder.build)
    assert (error.kind, error.component) == ("fields", "r")


def test_effectively_once_needs_a_positive_checkpoint_interval():
    error = _invalid(lambda: _builder(("b", EchoBolt, 1, lambda s: [s]),
                                      config={"topology.reliability.mode": "EFFECTIVELY_ONCE",
                                              "topology.stateful.checkpoint.interval.seconds": 0}))
    assert error.kind == "config"


def test_submit_fails_before_spark_starts(tmp_path):
    """submit() of a broken topology raises without creating a SparkContext."""
    script = tmp_path / "bad.py"
    script.write_text(
        "import heron_spark\n"
        "from heron_spark import Spout, Bolt, TopologyBuilder, Grouping, TopologyValueError\n"
        "class S(Spout):\n    outputs=['w']\n    def next_tuple(self): pass\n"
        "b = TopologyBuilder('bad'); s = b.add_spout('s', S, par=1)\n"
        "b.add_bolt('count', S, par=1, inputs={s: Grouping.fields('missing')})\n"
        "try:\n    heron_spark.submit(b)\nexcept TopologyValueError as e:\n"
        "    from pyspark import SparkContext\n"
        "    assert SparkContext._active_spark_context is None\n"
        "    print('REFUSED', e.component)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert "REFUSED count" in out.stdout, out.stderr


# --- names: what Heron accepts, we accept -------------------------------------------------------

class SideSpout(WordSpout):
    outputs = ["word", Stream(["word", "n"], name="__side"), Stream(["x"], name="")]


@pytest.mark.parametrize("name", ["__integration_test_aggregator_bolt", "__x", "word count",
                                  "compteur-é", "a.b:c", "-lead"])
def test_component_names_heron_accepts_are_accepted(name):
    builder = TopologyBuilder("t")
    spout = builder.add_spout("__spout", SideSpout, par=1)
    builder.add_bolt(name, EchoBolt, par=2, inputs={spout: Grouping.SHUFFLE,
                                                    spout["__side"]: Grouping.fields("n"),
                                                    spout[""]: Grouping.ALL})
    plan = build_logical_plan(builder.build())
    assert sorted(plan.components) == sorted(["__spout", name])
    assert sorted(plan.components["__spout"].outputs) == ["", "__side", "default"]
    assert plan.sources(name) == {("default", "__spout"): Grouping.SHUFFLE,
                                  ("__side", "__spout"): 2, ("", "__spout"): Grouping.ALL}


@pytest.mark.parametrize("name", ["a/b", 'say "hi"', "back\\slash", "two\nlines", "nul\0", ""])
def test_component_names_that_would_break_files_keys_or_labels_are_refused(name):
    error = _invalid(lambda: _builder((name, EchoBolt, 1, lambda s: [s])))
    assert (error.kind, error.value) == ("name", name)
    assert error.fix


def test_the_system_component_name_is_reserved():
    error = _invalid(lambda: _builder(("__system", EchoBolt, 1, lambda s: [s])))
    assert (error.kind, error.component, error.value) == ("reserved_name", "__system", "__system")


def test_the_tick_stream_name_is_reserved():
    class Ticking(WordSpout):
        outputs = [Stream(["word"], name="__tick")]

    builder = TopologyBuilder("t")
    builder.add_spout("ticking", Ticking, par=1)
    error = _invalid(builder.build)
    assert (error.kind, error.component, error.value) == ("reserved_name", "ticking", "__tick")


@pytest.mark.parametrize("name", [".", "..", "a/b", 'q"uote'])
def test_topology_names_that_would_break_state_paths_are_refused(name):
    with pytest.raises(TopologyValueError) as info:
        build_logical_plan(_builder(("b", EchoBolt, 1, lambda s: [s])), name=name)
    assert (info.value.kind, info.value.value) == ("name", name)


def test_topology_names_heron_accepts_are_accepted():
    plan = build_logical_plan(_builder(("b", EchoBolt, 1, lambda s: [s])), name="my topology_2")
    assert plan.name == "my topology_2"


def test_a_stream_declared_twice_keeps_its_last_declaration_as_in_heronpy():
    class Twice(WordSpout):
        outputs = ["word", Stream(["a"], name="s"), Stream(["b", "c"], name="s")]

    builder = TopologyBuilder("t")
    builder.add_spout("twice", Twice, par=1)
    plan = build_logical_plan(builder.build())
    assert plan.components["twice"].outputs["s"].fields == ("b", "c")


def test_stream_names_heron_refuses_by_type_are_refused():
    for bad in (None, 3):
        with pytest.raises(TypeError):
            Stream(["x"], name=bad)


class EvenOdd(ICustomGrouping):
    """Module level, so Grouping.custom can find it by path."""

    def prepare(self, context, component, stream, target_tasks):
        self.targets = sorted(target_tasks)

    def choose_tasks(self, values):
        return [self.targets[0]]


def test_custom_grouping_by_class_path_as_heronpy_allows():
    grouping = Grouping.custom(f"{__name__}.EvenOdd")
    assert Grouping.is_grouping_sane(grouping)
    assert type(_pickling.loads(grouping.python_serialized)).__name__ == "EvenOdd"
    with pytest.raises(TopologyValueError) as info:
        Grouping.custom("no_such_module_here.Grouper")
    assert info.value.value == "no_such_module_here.Grouper"
