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
from typing import Any


def dumps(obj: Any) -> bytes:
    """Pickle ``obj`` by value with cloudpickle."""
    import cloudpickle

    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> Any:
    """Unpickle ``data``, making ``heronpy`` importable first.

    User modules that import ``heronpy`` load even where heron_spark is shipped
    (``--py-files``) rather than installed, so ``heronpy`` is not on the path yet.
    """
    from heron_spark import heronpy_alias

    heronpy_alias.install()
    return pickle.loads(data)
