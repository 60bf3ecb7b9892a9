"""``install_heronpy_alias``: heron_spark's heronpy under the name ``heronpy``, or a clear error."""

from __future__ import annotations

import sys
import types

import pytest

from heron_spark import heronpy_alias
from heron_spark.errors import WorkerEnvironmentError


def test_install_resolves_heronpy_to_heron_spark_s():
    heronpy_alias.install()
    heronpy_alias.install()  # idempotent

    import heronpy

    assert heronpy.__heron_spark__


def test_another_heronpy_is_refused_with_the_fix(monkeypatch):
    foreign = types.ModuleType("heronpy")
    foreign.__file__ = "/site-packages/heronpy/__init__.py"
    monkeypatch.setitem(sys.modules, "heronpy", foreign)

    with pytest.raises(WorkerEnvironmentError) as caught:
        heronpy_alias.install()

    error = caught.value
    assert error.python == sys.executable
    assert error.host is None
    assert foreign.__file__ in error.problem
    assert error.fix.startswith("pip uninstall heronpy")
