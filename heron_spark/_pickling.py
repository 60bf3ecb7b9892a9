"""Serialize user objects by value, so classes defined in ``__main__`` or a notebook travel.

PySpark's bundled cloudpickle is used (imported lazily: the user API must import without
pyspark doing anything); the output loads with plain ``pickle.loads`` wherever pyspark is
importable.
"""

from __future__ import annotations

import pickle
from typing import Any


def dumps(obj: Any) -> bytes:
    """Pickle ``obj`` by value with PySpark's cloudpickle."""
    from pyspark import cloudpickle

    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes) -> Any:
    """Unpickle ``data``, making ``heronpy`` importable first.

    User modules that import ``heronpy`` load even where heron_spark is shipped
    (``--py-files``) rather than installed, so ``heronpy`` is not on the path yet.
    """
    from heron_spark import heronpy_alias

    heronpy_alias.install()
    return pickle.loads(data)
