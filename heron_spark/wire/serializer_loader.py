"""Give the wire a serializer it has not seen, through a loader the top package registers.

A column written by a topology's ``IHeronSerializer`` carries the class's dotted name
(``tuple_batch.SERIALIZER_KEY``). A process that holds no serializer of that class
(``tuple_batch.register_serializer``) loads one through the loader set here. Loading a user
class is the user API's job (``api.serializer``), and the wire never imports the layers above
it, so ``heron_spark/__init__.py``, which Python runs before any ``heron_spark.wire`` module,
registers ``api.serializer.load_serializer_named``. Any thread; set once, at import.
"""

from __future__ import annotations

from typing import Any, Callable

_loader: Callable[[str], Any] | None = None


def register(loader: Callable[[str], Any]) -> None:
    """Set the function that returns an initialized serializer for a dotted class name."""
    global _loader
    _loader = loader


def load(class_name: str) -> Any:
    """Return a serializer of class ``class_name`` (dotted path), from the registered loader."""
    if _loader is None:
        msg = (f"no serializer loader is registered to read columns written by {class_name!r}: "
               f"import heron_spark (its __init__ registers it) first")
        raise RuntimeError(msg)
    return _loader(class_name)
