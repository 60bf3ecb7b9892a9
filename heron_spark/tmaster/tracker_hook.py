"""The tracker that container 0's TMaster serves beside it, registered by the top package.

With ``heron.tmaster.placement`` container the TMaster child (``python -m heron_spark.tmaster``)
also runs the tracker HTTP server and UI, as a thread of its own process. The tracker sits
above the TMaster in the package layers (it asks TMasters for live data), so the TMaster never
imports it: ``heron_spark/__init__.py``, which Python runs before any submodule, registers the
function that starts one here (as it registers the scheduler's ``submit`` with the user API).
Runs in container 0's TMaster child only.
"""

from __future__ import annotations

from typing import Any, Callable

from heron_spark.errors import WrongPlaceError

# (statemgr url, host, port, **limits) -> (server, login_link): the server has ``url`` and
# ``shutdown()``; ``login_link()`` mints a one-time login link to it.
_start: Callable[..., tuple[Any, Callable[[], str]]] | None = None


def register(start: Callable[..., tuple[Any, Callable[[], str]]]) -> None:
    """Set the function that starts a tracker beside the TMaster (``heron_spark/__init__``)."""
    global _start
    _start = start


def start(statemgr_url: str, host: str, port: int, **limits: Any) -> tuple[Any, Callable[[], str]]:
    """Start the tracker on ``host:port`` (0: any free port); return ``(server, login_link)``."""
    if _start is None:
        msg = ("no tracker is registered to run beside the TMaster: import heron_spark (its "
               "__init__ registers it) before starting the TMaster child")
        raise WrongPlaceError(msg)
    return _start(statemgr_url, host, port, **limits)
