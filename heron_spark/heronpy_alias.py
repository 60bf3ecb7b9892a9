"""Make ``import heronpy.api...`` resolve to ``heron_spark.api`` so heronpy topologies run as is.

The real heronpy package is never imported (its protobuf pin conflicts with ours). The CLI and
every Heron Instance process install the alias before user code is loaded.
"""

from __future__ import annotations

import sys
import types

# heronpy module path -> heron_spark module that provides its names
_ALIASES = {
    "heronpy.api.api_constants": "heron_spark.api.api_constants",
    "heronpy.api.bolt.bolt": "heron_spark.api.bolt",
    "heronpy.api.bolt.base_bolt": "heron_spark.api.bolt",
    "heronpy.api.spout.spout": "heron_spark.api.spout",
    "heronpy.api.spout.base_spout": "heron_spark.api.spout",
    "heronpy.api.stream": "heron_spark.api.stream",
    "heronpy.api.topology": "heron_spark.api.topology",
    "heronpy.api.component.component_spec": "heron_spark.api.component",
    "heronpy.api.component.base_component": "heron_spark.api.component",
    "heronpy.api.custom_grouping": "heron_spark.api.custom_grouping",
    "heronpy.api.metrics": "heron_spark.api.metrics",
    "heronpy.api.tuple": "heron_spark.api.tuple",
    "heronpy.api.topology_context": "heron_spark.api.context",
}
_PACKAGES = {
    "heronpy": None,
    "heronpy.api": "heron_spark.api",
    "heronpy.api.bolt": "heron_spark.api.bolt",
    "heronpy.api.spout": "heron_spark.api.spout",
    "heronpy.api.component": "heron_spark.api.component",
}


def install() -> None:
    """Register the ``heronpy`` alias modules in ``sys.modules`` (idempotent)."""
    import importlib

    if getattr(sys.modules.get("heronpy"), "__heron_spark_alias__", False):
        return
    for name, source in _PACKAGES.items():
        package = types.ModuleType(name, f"heronpy alias onto {source or 'heron_spark'}")
        package.__path__ = []  # a package: submodules resolve through sys.modules
        package.__heron_spark_alias__ = True
        if source:
            package.__dict__.update(_public(importlib.import_module(source)))
        sys.modules[name] = package
    for name, source in _ALIASES.items():
        sys.modules[name] = importlib.import_module(source)
    for name in [*_PACKAGES, *_ALIASES]:
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, sys.modules[name])


def _public(module: types.ModuleType) -> dict:
    return {k: v for k, v in vars(module).items() if not k.startswith("_")}
