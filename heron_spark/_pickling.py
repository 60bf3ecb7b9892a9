"""Serialize user objects by value, so classes defined in ``__main__`` or a notebook travel.

The standalone ``cloudpickle`` package is used, not PySpark's bundled copy (the same code):
a pickle by value names the module of cloudpickle's helpers, and loading one that names
``pyspark.cloudpickle`` runs ``pyspark/__init__`` in every instance, stmgr and metrics
manager (about 7 MB each, and start-up time) for nothing. The output loads with plain
``pickle.loads`` wherever ``cloudpickle`` is importable (a dependency of heron_spark; the
submit's executor check reports it if an executor lacks it).
"""

from __future__ import annotations

import pickle
import sys
from typing import Any


def dumps(obj: Any) -> bytes:
    """Pickle ``obj`` by value with cloudpickle.

    Modules registered by value with PySpark's copy (``pyspark.cloudpickle
    .register_pickle_by_value``, as PySpark users ship a module of their own) travel by value
    here too.
    """
    import cloudpickle

    _follow_pyspark_registrations(cloudpickle)
    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _follow_pyspark_registrations(cloudpickle) -> None:
    pyspark_copy = sys.modules.get("pyspark.cloudpickle.cloudpickle")
    listed = getattr(pyspark_copy, "list_registry_pickle_by_value", None)
    if listed is None:
        return  # pyspark not imported (nothing registered with it) or a copy without registry
    ours = cloudpickle.list_registry_pickle_by_value()
    for name in listed() - ours:
        module = sys.modules.get(name)
        if module is not None:
            cloudpickle.register_pickle_by_value(module)


def loads(data: bytes) -> Any:
    """Unpickle ``data``, making ``heronpy`` importable first.

    User modules that import ``heronpy`` load even where heron_spark is shipped
    (``--py-files``) rather than installed, so ``heronpy`` is not on the path yet.
    """
    from heron_spark import heronpy_alias

    heronpy_alias.install()
    return pickle.loads(data)
