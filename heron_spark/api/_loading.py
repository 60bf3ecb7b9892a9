"""Resolve the classes a topology config names (serializer, auto task hooks).

Driver and instances; imports the named module, nothing else.
"""

from __future__ import annotations

import importlib

from heron_spark.errors import ConfigError


def load_class(value, key: str, component: str | None = None) -> type:
    """Return the class ``value`` names: a class itself, or its dotted path ``"package.module.Class"``.

    Raise ``ConfigError`` naming ``key``, the value and the fix (``component``: whose config it
    is, for the message).
    """
    if isinstance(value, type):
        return value
    where = f" (component {component!r})" if component else ""
    if not isinstance(value, str) or "." not in value.strip("."):
        raise ConfigError(key, value, f"name a class by its dotted path 'package.module.Class', "
                                      f"or pass the class itself{where}")
    module_name, _, class_name = value.strip().rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(key, value, f"make module {module_name!r} importable where the topology "
                                      f"is built and run (install it, or ship it with --py-files)"
                                      f"{where}; importing it failed: {exc}") from exc
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise ConfigError(key, value, f"module {module_name!r} has no class {class_name!r}; check "
                                      f"the spelling{where}")
    return cls
