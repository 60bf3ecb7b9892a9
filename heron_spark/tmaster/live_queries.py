"""Answer a tracker's ``ViewQuery`` with the TMaster's live data; fetch container files.

Runs in the Spark driver, on the reader thread of the control connection that asked (one
per connection, so waiting here for a stmgr's ``FileResponse`` never blocks that stmgr's
reader). Tracker paths and parameters are Heron's (``/topologies/metrics?component=...``);
results are Heron's tracker shapes, bare (no ``{"status", "result"}`` envelope).

Live paths: ``/topologies/metrics``, ``/metrics/timeline``, ``/metrics/query``,
``/exceptions``, ``/exceptionsummary`` (through the TMaster's ``*_view`` methods, built by
``tmaster.views``),
``/topologies/runtimestate``, ``/topologies/pid``, ``/topologies/container/filedata`` and
``/filestats`` (through the container's stmgr), ``/topologies/status`` (the TMaster's status),
``prometheus`` (every instance's latest metrics), ``handle`` (what a topology handle shows) and
``ui_link`` (a login link to the tracker beside a TMaster in container 0).
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import TYPE_CHECKING, Callable

from heron_spark.container.file_view import FILE_DATA_MAX_BYTES, check_relative
from heron_spark.contract import ids
from heron_spark.contract.ids import instance_id, stmgr_id
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
        handler = _HANDLERS.get(query.path)
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


def _view(tmaster: "TMaster", method: str):
    view = getattr(tmaster, method, None)
    if view is None:
        raise TrackerRequestError(501, f"this TMaster has no {method}", fix="upgrade heron_spark")
    return view


def _metrics(tmaster, p: _Params):
    return _view(tmaster, "metrics_view")(p.one("component"), p.all("metricname"),
                                          p.all("instance") or None, p.int("interval", -1))


def _timeline(tmaster, p: _Params):
    start, end = p.int("starttime"), p.int("endtime")
    if start > end:
        raise TrackerRequestError(400, "starttime is after endtime", param="starttime",
                                  value=(start, end))
    return _view(tmaster, "timeline_view")(p.one("component"), p.all("metricname"),
                                           p.all("instance") or None, start, end)


def _query(tmaster, p: _Params):
    start, end = p.int("starttime"), p.int("endtime")
    timeline = _view(tmaster, "query_view")(p.one("query"), start, end)
    return {"starttime": start, "endtime": end, "timeline": timeline}


def _exceptions(tmaster, p: _Params):
    return _view(tmaster, "exceptions_view")(p.one("component"), p.all("instance") or None)


def _exception_summary(tmaster, p: _Params):
    return _view(tmaster, "exception_summary_view")(p.one("component"),
                                                    p.all("instance") or None)


def _runtime_state(tmaster, p: _Params):
    with tmaster._lock:
        registered = set(tmaster.registrations)
        count = tmaster.plan.container_count
        has_plan = tmaster.physical_plan is not None
    return {"has_physical_plan": has_plan, "has_packing_plan": True,
            "has_tmanager_location": True, "has_scheduler_location": False,
            "stmgrs": {stmgr_id(i): {"is_registered": i in registered} for i in range(count)}}


def _pid(tmaster, p: _Params):
    wanted = p.one("instance")
    with tmaster._lock:
        plan = tmaster.physical_plan
        instances = list(plan.instances) if plan is not None else []
        stmgrs = list(plan.stmgrs) if plan is not None else []
    for info in instances:
        if instance_id(info.container_index, info.component, info.task_id) == wanted:
            return {"command": f"pid of {wanted}", "stdout": f"{info.pid}\n", "stderr": ""}
    for stmgr in stmgrs:
        if stmgr_id(stmgr.container_index) == wanted:
            return {"command": f"pid of {wanted}", "stdout": f"{stmgr.pid}\n", "stderr": ""}
    raise TrackerRequestError(404, "no such instance in the physical plan", param="instance",
                              value=wanted, fix="use an id from /topologies/physicalplan")


def _container_file(op: str):
    def handler(tmaster, p: _Params):
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
        with tmaster._lock:
            conn = tmaster.stmgrs.get(container)
        if conn is None:
            raise TrackerRequestError(404 if not 0 <= container < tmaster.plan.container_count
                                      else 503, "no stmgr connected for this container",
                                      param="container", value=container,
                                      fix="use an index from /topologies/physicalplan")
        response = tmaster.files.fetch(lambda frame: _try_send(conn, frame), op, path,
                                       offset, length)
        if response.code != 200:
            raise TrackerRequestError(response.code, response.error)
        return json.loads(response.json)
    return handler


def _try_send(conn, frame: bytes) -> bool:
    from heron_spark.wire.connection import ConnectionClosed

    try:
        conn.send(frame)
    except ConnectionClosed:
        return False
    return True


def _status(tmaster, p: _Params):
    return tmaster.status()


HANDLE_VIEW = "handle"  # everything a topology handle shows, in one answer


def _handle(tmaster, p: _Params):
    """Return what a handle reads (status, metrics, physical plan, last failure) at once.

    The handle of a topology whose TMaster runs in container 0 asks for it through a Spark job
    (``scheduler.remote``); protobufs travel base64-encoded.
    """
    import base64

    def encoded(message) -> str | None:
        return None if message is None else base64.b64encode(message.SerializeToString()).decode()

    with tmaster._lock:
        return {"status": tmaster.status(), "metrics": tmaster.metrics_by_component(),
                "physical_plan": encoded(tmaster.physical_plan),
                "failure": encoded(tmaster.failure), "updating": tmaster.updating,
                "tracker_url": getattr(tmaster, "tracker_url", None)}


UI_LINK_VIEW = "ui_link"  # a fresh one-time login link to the tracker beside the TMaster


def _ui_link(tmaster, p: _Params):
    """Return ``{"url": link}``: a one-time login link to the tracker in container 0.

    Minted here, where the tracker token is (the state manager's owner side), so a Spark
    Connect client gets a link without ever holding the token; asking needs the topology's
    secret, as every control request does.
    """
    make = getattr(tmaster, "login_link", None)
    if make is None:
        raise TrackerRequestError(404, "this TMaster runs no tracker beside it",
                                  fix="set heron.tracker.port to 0 (any free port) or a port "
                                      "number to run one in container 0")
    return {"url": make()}


def _prometheus(tmaster, p: _Params):
    """Every instance's latest metrics: ``[[component, instance id, metric, value], ...]``."""
    with tmaster._lock:
        rows = []
        for (component, task), values in sorted(tmaster.metrics.items()):
            if ids.is_stmgr_metrics_task(task):  # a stmgr's own metrics
                ident = stmgr_id(ids.stmgr_container(task))
            elif task in tmaster.plan.task_container:
                ident = tmaster.plan.instance_id(task)
            else:
                continue  # a task of an earlier plan
            rows.extend([component, ident, name, value] for name, value in sorted(values.items()))
    return rows


_HANDLERS = {
    "/topologies/metrics": _metrics,
    "/topologies/metrics/timeline": _timeline,
    "/topologies/metrics/query": _query,
    "/topologies/exceptions": _exceptions,
    "/topologies/exceptionsummary": _exception_summary,
    "/topologies/runtimestate": _runtime_state,
    "/topologies/pid": _pid,
    "/topologies/container/filedata": _container_file("data"),
    "/topologies/container/filestats": _container_file("stats"),
    "/topologies/status": _status,
    "prometheus": _prometheus,
    HANDLE_VIEW: _handle,
    UI_LINK_VIEW: _ui_link,
}
