"""The packages form layers: the import contracts in pyproject.toml hold, lazy imports included.

import-linter (grimp) reads every import statement, at module level or inside a function, so
an import that would make a lower package reach a higher one, or the user API reach the
runtime, fails this test with the offending chain.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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
    """``heron_spark/__init__`` composes the layers (it registers the runtime's entry points
    with the API): a module importing it would close a cycle through the top (the version lives
    in ``_version`` for that)."""
    import grimp

    graph = grimp.build_graph("heron_spark", cache_dir=None)
    assert graph.find_modules_that_directly_import("heron_spark") == set()


@pytest.mark.parametrize("package", ["heron_spark.api", "heron_spark.wire"])
def test_contracts_name_the_bottom_packages(package):
    """The forbidden contracts exist for the user API and the wire (a config typo would drop them)."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"]
    assert any(c["type"] == "forbidden" and c["source_modules"] == [package] for c in contracts)


def test_the_wire_loads_an_unseen_serializer_through_the_registered_loader(monkeypatch):
    """A receiver that never registered the writer's serializer class still reads its columns:
    the wire asks the loader ``heron_spark/__init__`` registered (the user API's)."""
    import heron_spark  # noqa: F401 - registers the loader, as every process does
    from heron_spark.wire import tuple_batch

    writer = _Reversed()
    batch = tuple_batch.decode(tuple_batch.encode_batch(tuple_batch.build_rows(
        ["obj"], [({"a": 1},)], writer)[0]))
    monkeypatch.setattr(tuple_batch, "_SERIALIZERS", {})  # as in another process
    assert tuple_batch.rows(batch, 1) == [({"a": 1},)]
    loaded = tuple_batch._SERIALIZERS[f"{__name__}._Reversed".encode()]
    assert type(loaded) is _Reversed and loaded is not writer
    assert loaded.config == {"topology.serializer.classname": f"{__name__}._Reversed"}


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
