"""``import heronpy`` without installing Heron's heronpy (whose protobuf pin conflicts with ours).

heron_spark installs its ``heron_spark/heronpy`` package as top-level ``heronpy`` (see setup.py), so
an installed heron_spark needs nothing from here. ``install`` covers a heron_spark that is on
``sys.path`` without being installed (a source checkout): it registers the same package under
the name ``heronpy``. The CLI and every Heron Instance process call it before user code loads.
"""

from __future__ import annotations

import importlib
import sys


def install() -> None:
    """Make ``heronpy`` importable, resolving to heron_spark's (idempotent)."""
    if getattr(sys.modules.get("heronpy"), "__heron_spark__", False):
        return
    try:
        module = importlib.import_module("heronpy")
    except ImportError:
        module = None
    if module is not None and getattr(module, "__heron_spark__", False):
        return
    if module is not None:
        from heron_spark.errors import WorkerEnvironmentError

        problem = (f"another heronpy is installed ({getattr(module, '__file__', module)}); "
                   "heron_spark ships its own heronpy")
        raise WorkerEnvironmentError(problem, python=sys.executable, host=None, missing=None,
                                     fix="pip uninstall heronpy, then pip install heron_spark "
                                         "again")
    sys.modules["heronpy"] = importlib.import_module("heron_spark.heronpy")
