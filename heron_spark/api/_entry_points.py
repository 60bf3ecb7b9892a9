"""The runtime entry points the user API calls, registered by the top package.

``Topology.submit`` and ``TopologyBuilder.build_and_submit`` hand a topology to the scheduler,
but the user API never imports the runtime, not even inside a function (the import contract in
``pyproject.toml`` checks it). So ``heron_spark/__init__.py``, which Python runs before any
``heron_spark.api`` module, registers the scheduler's functions here. Driver only, like what
they call.
"""

from __future__ import annotations

from typing import Any, Callable

from heron_spark.errors import WrongPlaceError

_submit: Callable[..., Any] | None = None
_submit_from_builder: Callable[[type], Any] | None = None


def register(submit: Callable[..., Any], submit_from_builder: Callable[[type], Any]) -> None:
    """Set the functions ``submit`` and ``submit_from_builder`` call (``heron_spark/__init__``)."""
    global _submit, _submit_from_builder
    _submit, _submit_from_builder = submit, submit_from_builder


def submit(topology: type, **kwargs: Any) -> Any:
    """Submit ``topology`` through the registered scheduler; return its handle."""
    return _registered(_submit)(topology, **kwargs)


def submit_from_builder(topology: type) -> Any:
    """``TopologyBuilder.build_and_submit``'s submit (the CLI takes over under ``heron-spark``)."""
    return _registered(_submit_from_builder)(topology)


def _registered(function: Callable[..., Any] | None) -> Callable[..., Any]:
    if function is None:
        msg = ("no scheduler is registered to submit topologies: import heron_spark (its "
               "__init__ registers it) before submitting")
        raise WrongPlaceError(msg)
    return function
