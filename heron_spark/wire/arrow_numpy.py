"""Arrow to NumPy without pandas: what keeps a per-tuple instance from importing it.

pyarrow imports pandas (a large import) on its own, in two places an instance reaches on
every batch: ``Array.to_numpy`` goes through Arrow's pandas conversion, whose C++ side imports
pandas to learn its null sentinels; and the first ``pa.array(...)`` asks pyarrow's pandas shim
whether the input is a pandas object, which imports pandas to find out. ``numbers`` reads a
numeric column without the first; ``settle_pandas_probe`` answers the second once, "no
pandas", in a process whose user code has not imported pandas (pyarrow still imports it the
moment a call needs it: ``to_pandas``, ``RecordBatch.from_pandas``).
"""

from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder

import numpy as np
import pyarrow as pa


_DTYPES: dict[pa.DataType, np.dtype] = {}  # Arrow integer/float type -> its NumPy dtype


def numbers(array: pa.Array, zero_copy_only: bool = True) -> np.ndarray:
    """Return a fixed-width numeric ``array`` as NumPy, like ``array.to_numpy(zero_copy_only)``.

    An array without nulls is a read-only view of its Arrow buffer; anything else (nulls,
    another type) takes ``to_numpy``, which raises as it does there.
    """
    kind = array.type
    dtype = _DTYPES.get(kind)
    if dtype is None and (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        dtype = _DTYPES[kind] = np.dtype(kind.to_pandas_dtype())
    if dtype is not None and array.null_count == 0:
        out = np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array),
                            offset=array.offset * dtype.itemsize)
        out.flags.writeable = False  # as to_numpy's zero-copy view: the batch is shared
        return out
    return array.to_numpy(zero_copy_only=zero_copy_only)


class _NoPandas(MetaPathFinder):
    """Make ``import pandas`` fail while it is on ``sys.meta_path``."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas":
            msg = "pandas is not imported here"
            raise ImportError(msg)
        return None


def settle_pandas_probe() -> bool:
    """Have pyarrow's pandas shim note "no pandas" now, unless pandas is imported already.

    Return whether it did. Later calls that need pandas (``to_pandas``, ``from_pandas``) make
    pyarrow import it then; until one does, pyarrow takes no object for a pandas one, which
    only matters to code that passes pandas objects to pyarrow without having imported pandas
    when this ran: call it in processes whose user code does not use pandas.
    """
    if "pandas" in sys.modules:
        return False
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.lib._pandas_api.have_pandas  # noqa: B018 - the property runs the shim's one probe
    finally:
        sys.meta_path.remove(finder)
    return True
