"""The TMaster's control port: run one ``ControlRequest`` and answer a ``ControlResponse``.

Kill, status and the management verbs Heron's CLI has (``heron activate``, ``deactivate``,
``restart``, ``update``). A refusal (wrong state, bad value, no room for the new containers)
travels back as ``ok=False`` with the error's class name and message, and
``tmaster.client`` raises the same class. Runs on a connection reader thread of the TMaster,
in the Spark driver; the verbs take the TMaster's lock themselves.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from heron_spark import errors
from heron_spark.proto import tmaster_pb2

if TYPE_CHECKING:
    from heron_spark.tmaster.master import TMaster

log = logging.getLogger(__name__)

# The refusals a client re-raises as the same class (see client._raise_refusal).
REFUSALS = (errors.TopologyStateError, errors.TopologyValueError, errors.ClusterCapacityError)


def handle(tmaster: "TMaster", request: tmaster_pb2.ControlRequest) -> tmaster_pb2.ControlResponse:
    """Run ``request`` on ``tmaster``; never raises for a refused verb."""
    body = request.WhichOneof("body")
    detail = ""
    try:
        if body == "kill":
            tmaster.kill("killed through the control port")
        elif body in ("activate", "deactivate"):
            tmaster.set_paused(body == "deactivate")
        elif body == "restart":
            restart = request.restart
            targets = tmaster.restart(None if restart.all else restart.container)
            detail = f"restarting containers {targets}"
        elif body == "update":
            generation = tmaster.update(dict(request.update.parallelism),
                                        queued=request.update.queued)
            detail = f"updating: generation {generation} starts with the new parallelism"
    except REFUSALS as exc:
        log.warning("control request %s refused: %s", body, exc)
        return tmaster_pb2.ControlResponse(ok=False, state=tmaster.state.value, detail=str(exc),
                                           error=type(exc).__name__)
    with tmaster._lock:
        return tmaster_pb2.ControlResponse(ok=True, state=tmaster.state.value,
                                           detail=detail or tmaster.detail)
