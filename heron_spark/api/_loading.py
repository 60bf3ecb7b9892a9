"""Resolve classes named by dotted path.

The classes a topology config names (serializer, auto task hooks) and components given by
class path (``HeronComponentSpec("w", "pkg.mod.Cls", ...)``). Driver and instances; imports
the named module, nothing else. A component's path is checked on the driver when it imports
there (``class_here``) and imported where its tasks run (``load_component_class``).
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


def import_class_path(path: str) -> type:
    """Import ``"package.module.Class"`` (or ``"package.module.Outer.Inner"``); return the class.

    Raise ``ValueError`` when ``path`` is no dotted path of identifiers, ``ImportError`` when
    its module does not import (``exc.name``: the module missing), ``LookupError`` when the
    module has no such class. Any other exception the module raises while importing propagates.
    Runs where it is called (driver or executor) and imports there.
    """
    parts = path.split(".") if isinstance(path, str) else []
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        msg = f"{path!r} is not a dotted path 'package.module.Class'"
        raise ValueError(msg)
    first_error: ModuleNotFoundError | None = None
    for cut in range(len(parts) - 1, 0, -1):  # the longest prefix that is a module
        module_name = ".".join(parts[:cut])
        try:
            found: object = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if cut > 1 and exc.name == module_name:  # perhaps a nested class: try shorter
                first_error = first_error or exc
                continue
            raise (first_error or exc) from None
        for attr in parts[cut:]:
            found = getattr(found, attr, None)
        if isinstance(found, type):
            return found
        if first_error is not None:
            raise first_error
        msg = f"module {module_name!r} has no class {'.'.join(parts[cut:])!r}"
        raise LookupError(msg)
    raise AssertionError(path)  # unreachable: the loop returns or raises at cut == 1


def load_component_class(component: str, path: str) -> type:
    """Import component ``component``'s class from its path (on an executor, or in-process).

    Raise ``ComponentClassError`` naming the component, the path, this Python
    (``sys.executable``) and its ``sys.path`` when it cannot be imported.
    """
    import sys

    from heron_spark.errors import ComponentClassError

    def refuse(problem: str, missing: str | None) -> ComponentClassError:
        return ComponentClassError(problem, component=component, path=path,
                                   python=sys.executable, sys_path=sys.path, missing=missing)

    try:
        return import_class_path(path)
    except ImportError as exc:
        problem = f"cannot import it ({type(exc).__name__}: {exc})"
        raise refuse(problem, exc.name or path.rpartition(".")[0]) from exc
    except (LookupError, ValueError) as exc:
        raise refuse(str(exc), None) from exc
    except Exception as exc:  # noqa: BLE001 - the user's module raised while importing
        problem = f"importing its module raised {type(exc).__name__}: {exc}"
        raise refuse(problem, None) from exc


def class_here(component: str | None, path: str) -> type | None:
    """Return the class ``path`` names when its module imports in this process, else None.

    A module that does not import here (``ImportError``) may import where the tasks run, so
    that is not an error on the driver. A module that imports but has no such class, or that
    raises something else while importing, is a ``TopologyValueError`` (kind ``class``).
    """
    from heron_spark.errors import TopologyValueError

    try:
        return import_class_path(path)
    except ImportError:
        return None
    except (LookupError, ValueError) as exc:
        problem = f"class path {path!r}: {exc}"
        raise TopologyValueError(problem, component=component, value=path, kind="class",
                                 fix="name a Spout or Bolt subclass by its dotted path "
                                     "'package.module.Class'") from exc
    except Exception as exc:  # noqa: BLE001 - the user's module raised while importing
        problem = f"class path {path!r}: importing its module raised {type(exc).__name__}: {exc}"
        raise TopologyValueError(problem, component=component, value=path, kind="class",
                                 fix="fix the module so that it imports") from exc
