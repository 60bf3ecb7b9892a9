"""Answer a tracker's ``ViewQuery`` with the TMaster's live data; fetch container files.

Runs in the Spark driver, on the reader thread of the control connection that asked (one
per connection, so waiting here for a stmgr's ``FileResponse`` never blocks that stmgr's
reader). This module parses the query (Heron's paths and parameters,
``/topologies/metrics?component=...``; the paths are ``contract.live_paths.LivePath``) and
calls the TMaster's view methods, which read under its lock; it never takes the lock itself.
Results are Heron's tracker shapes, bare (no ``{"status", "result"}`` envelope);
``handle`` is a ``HandleView``, ``/topologies/status`` a ``TopologyStatus``, in their JSON
form.
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import TYPE_CHECKING, Any, Callable

from heron_spark.container.file_view import FILE_DATA_MAX_BYTES, check_relative
from heron_spark.contract.live_paths import LivePath
from heron_spark.errors import MetricsQueryError, TrackerRequestError
from heron_spark.proto import tmaster_pb2
from heron_spark.wire import frames

if TYPE_CHECKING:
    from heron_spark.tmaster.master import TMaster

FILE_TIMEOUT_SECS = 10.0
PENDING_FILES_MAX = 64  # file requests waiting for stmgrs at once (beyond: 503)


class FileFetcher:
    """Requests to stmgrs for container files, matched to their responses by request id.

    Thread-safe: requesters wait on their own event; the stmgr reader thread completes them.
    """

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, list] = {}  # id -> [event, response]

    def fetch(self, send: Callable[[bytes], bool], op: str, path: str, offset: int = 0,
              length: int = 0, timeout: float = FILE_TIMEOUT_SECS) -> tmaster_pb2.FileResponse:
        """Send a ``FileRequest`` with ``send``; wait for its response or raise 503/504."""
        with self._lock:
            if len(self._pending) >= PENDING_FILES_MAX:
                raise TrackerRequestError(503, "too many container file requests in flight",
                                          fix="retry in a moment")
            request_id = next(self._ids)
            slot = self._pending[request_id] = [threading.Event(), None]
        try:
            request = tmaster_pb2.FileRequest(request_id=request_id, op=op, path=path,
                                              offset=offset, length=length)
            if not send(frames.control_frame(tmaster_pb2.TmasterToStmgr(file_request=request))):
                raise TrackerRequestError(503, "the container's stmgr is not connected",
                                          param="container", fix="retry once it registers")
            if not slot[0].wait(timeout):
                raise TrackerRequestError(504, f"the container's stmgr did not answer within "
                                          f"{timeout:g} s", param="container")
            return slot[1]
        finally:
            with self._lock:
                self._pending.pop(request_id, None)

    def on_response(self, response: tmaster_pb2.FileResponse) -> None:
        """Complete the request ``response`` answers (late answers are dropped)."""
        with self._lock:
            slot = self._pending.get(response.request_id)
            if slot is not None:
                slot[1] = response
                slot[0].set()


def answer(tmaster: "TMaster", query: tmaster_pb2.ViewQuery) -> tmaster_pb2.ControlResponse:
    """Run ``query`` against ``tmaster``; 200 with JSON, or the error's status and message."""
    try:
        params = json.loads(query.params_json or "{}")
        handler = _BY_PATH.get(query.path)
        if handler is None:
            raise TrackerRequestError(404, "the TMaster serves no such view", value=query.path)
        result = handler(tmaster, _Params(params))
    except TrackerRequestError as exc:
        return tmaster_pb2.ControlResponse(ok=False, code=exc.status, detail=str(exc))
    except MetricsQueryError as exc:  # a bad component, instance, query token or range
        return tmaster_pb2.ControlResponse(ok=False, code=400, detail=str(exc))
    except (ValueError, KeyError, TypeError) as exc:  # a view refusing its arguments
        return tmaster_pb2.ControlResponse(ok=False, code=400, detail=str(exc))
    return tmaster_pb2.ControlResponse(ok=True, code=200, json=json.dumps(result))


class _Params:
    """Query parameters as Heron's tracker reads them (every value a list of strings)."""

    def __init__(self, raw: dict) -> None:
        self.raw = {k: [str(v) for v in (vs if isinstance(vs, list) else [vs])]
                    for k, vs in raw.items()}

    def all(self, name: str) -> list[str]:
        return self.raw.get(name, [])

    def one(self, name: str, default: str | None = None) -> str:
        values = self.raw.get(name)
        if values:
            return values[-1]
        if default is None:
            raise TrackerRequestError(400, "missing query parameter", param=name,
                                      fix=f"add {name}=... to the URL")
        return default

    def int(self, name: str, default: int | None = None) -> int:
        text = self.one(name, None if default is None else str(default))
        try:
            return int(text)
        except ValueError:
            raise TrackerRequestError(400, "not an integer", param=name, value=text) from None


def _metrics(tmaster: "TMaster", p: _Params):
    return tmaster.metrics_view(p.one("component"), p.all("metricname"),
                                p.all("instance") or None, p.int("interval", -1))


def _timeline(tmaster: "TMaster", p: _Params):
    start, end = p.int("starttime"), p.int("endtime")
    if start > end:
        raise TrackerRequestError(400, "starttime is after endtime", param="starttime",
                                  value=(start, end))
    return tmaster.timeline_view(p.one("component"), p.all("metricname"),
                                 p.all("instance") or None, start, end)


def _query(tmaster: "TMaster", p: _Params):
    start, end = p.int("starttime"), p.int("endtime")
    timeline = tmaster.query_view(p.one("query"), start, end)
    return {"starttime": start, "endtime": end, "timeline": timeline}


def _exceptions(tmaster: "TMaster", p: _Params):
    return tmaster.exceptions_view(p.one("component"), p.all("instance") or None)


def _exception_summary(tmaster: "TMaster", p: _Params):
    return tmaster.exception_summary_view(p.one("component"), p.all("instance") or None)


def _container_file(op: str):
    def handler(tmaster: "TMaster", p: _Params):
        text = p.one("container")
        try:
            container = int(text)
        except ValueError:
            raise TrackerRequestError(400, "not a container index", param="container",
                                      value=text) from None
        path = p.one("path", ".")
        check_relative(path)
        offset = p.int("offset", 0) if op == "data" else 0
        length = p.int("length", -1) if op == "data" else 0
        if op == "data":
            length = FILE_DATA_MAX_BYTES if length == -1 else min(length, FILE_DATA_MAX_BYTES)
        return tmaster.container_file(container, op, path, offset, length)
    return handler


def _ui_link(tmaster: "TMaster", p: _Params):
    """Return ``{"url": link}``: a one-time login link to the tracker serving the topology.

    Minted here, where the tracker token is (the state manager's owner side), so a Spark
    Connect client gets a link without ever holding the token; asking needs the topology's
    secret, as every control request does.
    """
    if tmaster.login_link is None:
        raise TrackerRequestError(404, "this TMaster runs no tracker beside it",
                                  fix="set heron.tracker.port to 0 (any free port) or a port "
                                      "number to run one in container 0")
    return {"url": tmaster.login_link()}


_HANDLERS: dict[LivePath, Callable[["TMaster", _Params], Any]] = {
    LivePath.METRICS: _metrics,
    LivePath.TIMELINE: _timeline,
    LivePath.QUERY: _query,
    LivePath.EXCEPTIONS: _exceptions,
    LivePath.EXCEPTION_SUMMARY: _exception_summary,
    LivePath.RUNTIME_STATE: lambda tmaster, p: tmaster.runtime_state_view(),
    LivePath.PID: lambda tmaster, p: tmaster.pid_view(p.one("instance")),
    LivePath.FILE_DATA: _container_file("data"),
    LivePath.FILE_STATS: _container_file("stats"),
    LivePath.STATUS: lambda tmaster, p: tmaster.status().as_dict(),
    LivePath.PROMETHEUS: lambda tmaster, p: tmaster.prometheus_view(),
    LivePath.HANDLE: lambda tmaster, p: tmaster.handle_view().as_dict(),
    LivePath.UI_LINK: _ui_link,
}
_BY_PATH = {path.value: handler for path, handler in _HANDLERS.items()}
