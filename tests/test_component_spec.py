"""heronpy 0.20.5's component spec, as its sources define it: ``HeronComponentSpec`` with a
class path string, its argument checks, ``spec["stream"]``, ``get_out_streamids``,
``GlobalStreamId`` and the ``Topology`` metaclass over such specs; and the same topology built
from classes and from class paths (driver-importable, executor-only, unimportable)."""

from __future__ import annotations

import sys

import pytest

import class_path_components as comps
from heron_spark import (Bolt, ComponentClassError, ComponentSpecError, GlobalStreamId, Grouping,
                         HeronComponentSpec, Stream, Topology, TopologyBuilder, TopologyTypeError,
                         TopologyValueError)
from heron_spark.plan.logical import build_logical_plan
from heron_spark.scheduler.update import topology_proto
from heron_spark.testing import run_local

MODULE = "class_path_components"


def test_spec_keeps_a_class_path_string_and_heronpys_attributes():
    spec = HeronComponentSpec("words", "my_pkg.spouts.WordSpout", True, 3, outputs=["word"],
                              config={"k": 1})
    assert (spec.name, spec.python_class_path, spec.is_spout, spec.parallelism) == \
        ("words", "my_pkg.spouts.WordSpout", True, 3)
    assert (spec.inputs, spec.outputs, spec.custom_config) == (None, ["word"], {"k": 1})
    assert spec.component_class is None and isinstance(spec.uuid, str)
    assert HeronComponentSpec(None, "a.B", False, 1).uuid != spec.uuid


def test_spec_from_a_class_keeps_the_class_and_its_path():
    spec = comps.SentenceSpout.spec(name="s", par=2)
    assert spec.component_class is comps.SentenceSpout
    assert spec.python_class_path == "class_path_components.SentenceSpout"
    assert spec.outputs == ["sentence"] and spec.outputs is not comps.SentenceSpout.outputs


@pytest.mark.parametrize(("args", "kind"), [
    ((5, "a.B", True, 1), "name"),
    (("c", 5, True, 1), "class"),
    (("c", None, True, 1), "class"),
    (("c", {}, True, 1), "class"),
    (("c", "a.B", "yes", 1), "is_spout"),
    (("c", "a.B", True, 0), "parallelism"),
    (("c", "a.B", True, -2), "parallelism"),
    (("c", "a.B", True, "2"), "parallelism"),
    (("c", "a.B", True, 1.5), "parallelism"),
])
def test_bad_arguments_raise_heronpys_assertion_error(args, kind):
    with pytest.raises(AssertionError) as info:
        HeronComponentSpec(*args)
    assert isinstance(info.value, ComponentSpecError) and isinstance(info.value, TopologyValueError)
    assert info.value.kind == kind


def test_optional_outputs_are_added_and_checked_as_heronpys_spec():
    spec = comps.SplitBolt.spec(name="split", optional_outputs=[Stream(["w"], name="side")])
    assert spec.get_out_streamids() == {"default", "side"} and comps.SplitBolt.outputs == ["word"]
    assert HeronComponentSpec("c", "a.B", False, 1, outputs=["x"],
                              optional_outputs=["y"]).outputs == ["x", "y"]
    for bad in ("word", ["word", 5]):
        with pytest.raises(AssertionError) as info:
            comps.SplitBolt.spec(name="split", optional_outputs=bad)
        assert info.value.kind == "outputs"


def test_spec_par_is_checked_when_spec_is_called():
    with pytest.raises(ComponentSpecError) as info:
        comps.SplitBolt.spec(name="split", par=0)
    assert (info.value.component, info.value.value) == ("split", 0)


def test_getitem_gives_a_global_stream_id_of_a_declared_stream():
    spec = HeronComponentSpec("up", "a.B", True, 1, outputs=["x", Stream(["y"], name="side")])
    gsid = spec["side"]
    assert isinstance(gsid, GlobalStreamId)
    assert (gsid.component_id, gsid.stream_id) == ("up", "side")
    assert spec["default"] == GlobalStreamId("up", "default")
    with pytest.raises(ValueError) as info:  # heronpy: ValueError
        spec["nope"]
    assert isinstance(info.value, TopologyValueError) and info.value.value == "nope"


def test_get_out_streamids():
    spec = HeronComponentSpec("c", "a.B", False, 1,
                              outputs=["a", "b", Stream(["c"], name="s"), Stream(["d"])])
    assert spec.get_out_streamids() == {"default", "s"}
    assert HeronComponentSpec("c", "a.B", False, 1).get_out_streamids() == set()
    for bad in ("word", ["word", 5]):
        with pytest.raises(TypeError) as info:
            HeronComponentSpec("c", "a.B", False, 1, outputs=bad).get_out_streamids()
        assert isinstance(info.value, TopologyTypeError)


def test_global_stream_id_resolves_a_spec_once_it_has_a_name():
    spec = HeronComponentSpec(None, "a.B", True, 1, outputs=["x"])
    gsid = spec["default"]
    assert spec.uuid in gsid.component_id  # heronpy's placeholder before the name is set
    spec.name = "named"
    assert gsid.component_id == "named" and str(gsid) == "named:default"
    assert gsid == GlobalStreamId("named", "default")
    assert hash(gsid) == hash(GlobalStreamId("named", "default"))
    assert gsid != GlobalStreamId("named", "other")
    with pytest.raises(TypeError):
        GlobalStreamId(5, "default")
    with pytest.raises(TypeError):
        GlobalStreamId("c", 5)


def test_topology_class_names_string_specs_and_checks_them_as_heronpy():
    topology = comps.class_style(MODULE, "t")
    assert [s.name for s in topology._heron_specs] == ["sentence", "split", "count", "sink"]

    def define(**specs):
        return type("T", (Topology,), {"s": comps.SentenceSpout.spec(), **specs})

    with pytest.raises(TypeError):  # heronpy: TypeError for a non-str config key
        define(b=HeronComponentSpec(None, "a.B", False, 1, inputs=["s"], config={1: "x"}))
    with pytest.raises(TypeError):
        define(b=HeronComponentSpec(None, "a.B", False, 1, inputs=["s"], config="x"))
    with pytest.raises(TypeError):
        define(b=HeronComponentSpec(None, "a.B", False, 1, inputs=["s"], outputs=[5]))
    with pytest.raises(TypeError):
        define(b=HeronComponentSpec(None, "a.B", False, 1, inputs=5))
    with pytest.raises(ValueError, match="grouping"):
        define(b=HeronComponentSpec(None, "a.B", False, 1, inputs={"s": "shuffle"}))
    with pytest.raises(ValueError):
        define(b=HeronComponentSpec(None, "a.B", False, 1, inputs=[5]))


def _proto(topology):
    return topology_proto(build_logical_plan(topology), "id", b"")


def test_class_and_string_specs_build_the_same_topology():
    class Classes(Topology):
        topology_name = "same"
        config = {"topology.stmgrs": 2}
        sentence = comps.SentenceSpout.spec(par=2)
        split = comps.SplitBolt.spec(par=2, inputs={sentence: Grouping.SHUFFLE})
        count = comps.CountBolt.spec(par=2, inputs={split["default"]: Grouping.fields("word")})
        sink = HeronComponentSpec(None, "heron_spark.testing.CollectingBolt", False, 1,
                                  inputs=[count])

    strings = _proto(comps.class_style(MODULE, "same"))
    assert _proto(Classes) == strings
    assert _proto(comps.builder_style(MODULE, "same", importable_here=True).build()) == strings
    assert {c.name: c.class_name for c in strings.components}["split"] == f"{MODULE}.SplitBolt"


def test_a_path_the_driver_imports_is_checked_there_and_shipped_as_a_path():
    plan = build_logical_plan(comps.class_style(MODULE, "t"))
    decl = plan.components["split"]
    assert decl.given_class is None and decl.class_path == f"{MODULE}.SplitBolt"
    assert decl.component_class is comps.SplitBolt  # imported where it is asked for
    builder = TopologyBuilder("t")
    spec = builder.add_spout("s", f"{MODULE}.SentenceSpout", 1)
    assert (spec.outputs, spec.component_class) == (["sentence"], None)

    with pytest.raises(TopologyValueError) as info:  # imports here, but is no Bolt
        build_logical_plan(type("T", (Topology,), {
            "s": spec, "b": HeronComponentSpec("b", f"{MODULE}.NotAComponent", False, 1,
                                               inputs=[spec])}))
    assert (info.value.kind, info.value.component) == ("class", "b")
    missing = builder.add_bolt("b", f"{MODULE}.Missing", 1, inputs=[spec])  # built, as heronpy
    assert (missing.python_class_path, missing.component_class) == (f"{MODULE}.Missing", None)
    with pytest.raises(TopologyValueError) as info:  # the module imports, the class is missing
        build_logical_plan(builder.build())
    assert (info.value.kind, info.value.component, info.value.value) == \
        ("class", "b", f"{MODULE}.Missing")


def test_a_path_only_the_executors_import_waits_for_them():
    builder = comps.builder_style("no_such_module_anywhere", "t", importable_here=False)
    plan = build_logical_plan(builder.build())  # accepted: it may import on the executors
    assert plan.components["sentence"].outputs["default"].fields == ("sentence",)
    with pytest.raises(ComponentClassError) as info:
        plan.resolve_classes()
    error = info.value
    assert isinstance(error, ImportError)
    assert (error.component, error.path, error.python, error.missing) == \
        ("sentence", "no_such_module_anywhere.SentenceSpout", sys.executable,
         "no_such_module_anywhere")
    assert error.sys_path == sys.path and "py-files" in str(error)


def test_runs_in_process_with_exact_counts(tmp_path):
    for topology in (comps.class_style(MODULE, "classpaths"),
                     comps.builder_style(MODULE, "classpaths", importable_here=True)):
        run = run_local(topology, timeout=120, collect_dir=tmp_path / topology.__class__.__name__)
        assert run.status == "FINISHED"
        assert comps.final_counts(run.collected("sink")) == comps.expected_counts(2)


def test_an_unimportable_path_fails_in_process_once_before_starting(tmp_path):
    topology = comps.class_style("no_such_module_anywhere", "t")
    with pytest.raises(ComponentClassError) as info:
        run_local(topology, timeout=60, collect_dir=tmp_path)
    assert (info.value.component, info.value.missing) == ("sentence", "no_such_module_anywhere")


def test_a_class_still_works_as_a_component_class():
    class Echo(Bolt):
        outputs = ["sentence"]

        def process(self, tup):
            self.emit(list(tup.values))

    builder = TopologyBuilder("t")
    spout = builder.add_spout("s", comps.SentenceSpout, 1)
    builder.add_bolt("e", Echo, 1, inputs=[spout])
    decl = build_logical_plan(builder.build()).components["e"]
    assert decl.given_class is Echo and decl.component_class is Echo
    assert decl.class_path.endswith("Echo")


def test_a_path_into_the_drivers_main_module_carries_the_class(monkeypatch):
    main = sys.modules["__main__"]
    monkeypatch.setattr(main, "MainScriptSpout", comps.SentenceSpout, raising=False)
    topology = type("T", (Topology,), {
        "s": HeronComponentSpec(None, "__main__.MainScriptSpout", True, 1, outputs=["sentence"])})
    decl = build_logical_plan(topology).components["s"]
    assert decl.given_class is comps.SentenceSpout  # executors have another __main__


# Placeholder paths as heronpy's own tests and programs write them: built as specs, refused at
# submit (on the driver when nothing could import them, where the tasks run otherwise).
DRIVER_REFUSED = ["classpath", "sp_clspath", "", "a..B", "string.path", f"{MODULE}.Missing"]


def _placeholder_topology(path: str) -> type:
    spout = HeronComponentSpec("spout", path, True, 1, outputs=["word"])
    bolt = HeronComponentSpec("bolt", "heron_spark.testing.CollectingBolt", False, 1,
                              inputs={spout: Grouping.SHUFFLE})
    return type("Placeholder", (Topology,), {"spout": spout, "bolt": bolt})


@pytest.mark.parametrize("path", [*DRIVER_REFUSED, "my_pkg.spouts.WordSpout"])
def test_a_spec_with_a_placeholder_path_builds_as_in_heronpy(path):
    spout = HeronComponentSpec("spout", path, True, 1, outputs=["word"])
    bolt = HeronComponentSpec(None, path, False, 2, inputs=[spout])
    assert (spout.python_class_path, spout.component_class) == (path, None)
    assert bolt._sanitize_inputs() == {GlobalStreamId("spout", "default"): Grouping.SHUFFLE}
    assert _placeholder_topology(path)._heron_specs[0].python_class_path == path
    builder = TopologyBuilder("t")
    added = builder.add_spout("spout", path, 1, optional_outputs=["word"])
    builder.add_bolt("bolt", path, 1, inputs=[added])
    assert added.outputs == ["word"] and builder.build().topology_name == "t"


@pytest.mark.parametrize("path", DRIVER_REFUSED)
def test_submit_refuses_a_placeholder_path_before_launch(path, tmp_path):
    from heron_spark import submit

    state = tmp_path / "state"
    with pytest.raises(TopologyValueError) as info:
        submit(_placeholder_topology(path), conf={"heron.statemgr": f"file://{state}"},
               master="local[2]")
    error = info.value
    assert (type(error), error.kind, error.component, error.value) == \
        (TopologyValueError, "class", "spout", path)
    assert "package.module.Class" in error.fix
    assert not state.exists()  # refused before the state manager was even opened


@pytest.mark.parametrize("path", DRIVER_REFUSED)
def test_run_local_refuses_a_placeholder_path_before_starting(path, tmp_path):
    with pytest.raises(TopologyValueError) as info:
        run_local(_placeholder_topology(path), timeout=60, collect_dir=tmp_path / "collect")
    assert (info.value.kind, info.value.component, info.value.value) == ("class", "spout", path)
    assert info.value.fix and not (tmp_path / "collect").exists()


def test_run_local_refuses_a_path_no_module_provides_before_starting(tmp_path):
    path = "my_pkg.spouts.WordSpout"
    with pytest.raises(ComponentClassError) as info:
        run_local(_placeholder_topology(path), timeout=60, collect_dir=tmp_path / "collect")
    error = info.value
    assert (error.component, error.path, error.missing) == ("spout", path, "my_pkg")
    assert "my_pkg" in error.fix and not (tmp_path / "collect").exists()
