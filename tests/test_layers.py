"""The packages form layers: the import contracts in pyproject.toml hold, lazy imports included.

import-linter (grimp) reads every import statement, at module level or inside a function, so
an import that would make a lower package reach a higher one, or the user API reach the
runtime, fails this test with the offending chain.
"""

from __future__ import annotations

import importlib
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from heron_spark import Bolt, Spout

ROOT = Path(__file__).resolve().parent.parent


def test_the_import_contracts_hold():
    # lint-imports as CI and scripts/check run it, in its own process: its CLI reconfigures
    # logging (disabling every existing logger) and changes sys.path, which must not leak into
    # the tests that follow.
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                               "sys.exit(lint_imports_command())", "--no-cache"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (
        "an import breaks the layers; fix the import, or move the code:\n" + result.stdout
        + result.stderr)


def test_the_contracts_see_lazy_imports():
    """A function-level import counts: grimp's default, which the contracts must keep."""
    import grimp

    graph = grimp.build_graph("heron_spark", cache_dir=None)
    # heron_spark/__init__.submit imports the scheduler inside the function, and only there
    assert graph.direct_import_exists(importer="heron_spark",
                                      imported="heron_spark.scheduler.submit")


def test_nothing_imports_the_top_package():
    """``heron_spark/__init__`` re-exports the user API and ``submit``: a module importing it
    would close a cycle through the top (the version lives in ``_version`` for that)."""
    import grimp

    graph = grimp.build_graph("heron_spark", cache_dir=None)
    assert graph.find_modules_that_directly_import("heron_spark") == set()


def test_every_child_process_runs_a_composition_root_of_the_entry_package():
    """The command line of each child (``contract.child_args``) names a module of
    ``heron_spark.entry``, the top layer, with a ``main``; nothing else imports them."""
    import grimp

    from heron_spark.contract import child_args

    kinds = [child_args.MetricsManagerArgs, child_args.StmgrArgs, child_args.InstanceArgs,
             child_args.TMasterArgs]
    assert set(child_args.ChildArgs.__subclasses__()) == set(kinds)
    graph = grimp.build_graph("heron_spark", cache_dir=None)
    for kind in kinds:
        assert kind.MODULE.startswith("heron_spark.entry."), kind
        assert callable(importlib.import_module(kind.MODULE).main), kind
        assert graph.find_modules_that_directly_import(kind.MODULE) == set(), kind


def test_the_upward_calls_are_imports_import_linter_sees():
    """The user API's submit and the TMaster child's tracker are real imports (the first one
    named in the contracts' ``ignore_imports``), not functions registered at import time."""
    import grimp

    graph = grimp.build_graph("heron_spark", cache_dir=None)
    assert graph.direct_import_exists(importer="heron_spark.api.topology",
                                      imported="heron_spark.scheduler.submit")
    assert graph.direct_import_exists(importer="heron_spark.entry.tmaster",
                                      imported="heron_spark.tracker.service")


@pytest.mark.parametrize("package", ["heron_spark.api", "heron_spark.wire"])
def test_contracts_name_the_bottom_packages(package):
    """The forbidden contracts exist for the user API and the wire (a config typo would drop them)."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"]
    assert any(c["type"] == "forbidden" and c["source_modules"] == [package] for c in contracts)


def test_the_wire_loads_an_unseen_serializer_with_the_loader_its_reader_passes(monkeypatch):
    """A receiver that never registered the writer's serializer class reads its columns through
    the loader it passes (the user API's); without one, the wire refuses, naming the class."""
    from heron_spark.api.serializer import load_serializer_named
    from heron_spark.errors import ConfigError
    from heron_spark.wire import tuple_batch

    writer = _Reversed()
    batch = tuple_batch.decode(tuple_batch.encode_batch(tuple_batch.build_rows(
        ["obj"], [({"a": 1},)], writer)[0]))
    monkeypatch.setattr(tuple_batch, "_SERIALIZERS", {})  # as in another process
    with pytest.raises(ConfigError) as refused:
        tuple_batch.rows(batch, 1)
    assert (refused.value.key, refused.value.value) == (
        "topology.serializer.classname", f"{__name__}._Reversed")
    assert tuple_batch.rows(batch, 1, load_serializer_named) == [({"a": 1},)]
    loaded = tuple_batch._SERIALIZERS[f"{__name__}._Reversed".encode()]
    assert type(loaded) is _Reversed and loaded is not writer
    assert loaded.config == {"topology.serializer.classname": f"{__name__}._Reversed"}


def test_a_bolt_reads_columns_whose_serializer_its_process_never_registered(monkeypatch):
    """The bolt executor passes the user API's loader to the wire: an instance process reads
    columns another process's serializer wrote."""
    from heron_spark import TopologyBuilder
    from heron_spark.config import SystemConfig
    from heron_spark.instance.bolt_executor import BoltExecutor
    from heron_spark.plan.logical import build_logical_plan
    from heron_spark.plan.packing import pack
    from heron_spark.plan.view import PlanView
    from heron_spark.proto import stmgr_pb2
    from heron_spark.wire import frames, tuple_batch

    builder = TopologyBuilder("serialized")
    source = builder.add_spout("source", _Objects, par=1)
    builder.add_bolt("keep", _Keep, par=1, inputs=[source])
    builder.set_config({"topology.serializer.classname": f"{__name__}._Reversed"})
    logical = build_logical_plan(builder.build())
    view = PlanView(logical, pack(logical))
    task = view.component_tasks["keep"][0]
    bolt = BoltExecutor(view, task, SystemConfig(), lambda frame: None,
                        logging.getLogger("test"))
    bolt.on_frame(frames.CONTROL, frames.control_frame(stmgr_pb2.StmgrToInstance(
        start=stmgr_pb2.StartProcessing(generation=0))))
    body = tuple_batch.encode_batch(tuple_batch.build_rows(["obj"], [({"b": 2},)],
                                                           _Reversed())[0])
    monkeypatch.setattr(tuple_batch, "_SERIALIZERS", {})  # written by another process
    _KEPT.clear()
    bolt.on_frame(frames.DATA, frames.data_frame(
        frames.TUPLES, view.component_tasks["source"][0], task, 1, b"default", body))
    bolt.turn(time.monotonic())
    assert _KEPT == [({"b": 2},)]


_KEPT: list = []


class _Objects(Spout):
    outputs = ["obj"]

    def next_tuple(self):
        pass


class _Keep(Bolt):
    def process(self, tup):
        _KEPT.append(tup.values)


class _Reversed:
    """A serializer (pickle, bytes reversed) the receiver must load by its class path."""

    def initialize(self, config):
        self.config = config

    def serialize(self, obj):
        import pickle

        return pickle.dumps(obj)[::-1]

    def deserialize(self, data):
        import pickle

        return pickle.loads(data[::-1])
