"""The tracker's answers: Heron's tracker paths for every topology in one state manager.

``TrackerApp.handle(Request) -> Response`` holds no socket: the HTTP shell
(``server.serve``) calls it on its handler threads (thread-safe: it keeps no mutable state
but the authenticator's).

Responses are **bare results, as Heron's FastAPI tracker** returns them (no Tornado
``{"status", "executiontime", "message", "result", "version"}`` envelope); an error is
``{"detail": message}`` with its HTTP status (400 bad parameter, 401 not authenticated,
403 refused, 404 unknown topology / path, 405 method, 503 no live TMaster, 501 not
supported).

Parameters are Heron's: ``cluster``, ``environ``, ``role`` (optional here; when given they
must match the topology's: see ``shapes``), ``topology`` (required on per-topology paths),
``component``, ``instance`` / ``metricname`` (repeatable), ``interval``, ``starttime``,
``endtime``, ``query``, ``container``, ``path``, ``offset``, ``length``.

Stored data (plans, execution state, config) comes from the state manager; live data
(metrics, timelines, queries, exceptions, runtime state, files, pids) from the topology's
TMaster through its control port (``tmaster.client.query_view``, answered by
``tmaster.live_queries``, which calls the TMaster's ``*_view`` methods).
"""

from __future__ import annotations

import html
import logging
from typing import Any, Callable
from urllib.parse import parse_qs

from heron_spark.contract.live_paths import ALIASES, TRACKER_PATHS, LivePath
from heron_spark.contract.topology_view import TMasterLocation, TopologyStatus
from heron_spark.errors import (ClusterCapacityError, HeronSparkError, TopologyNotFoundError,
                                TopologyStateError, TopologyValueError, TrackerRequestError)
from heron_spark.statemgr.base import StateManager
from heron_spark.tracker import prometheus, shapes, static
from heron_spark.tracker.auth import Authenticator, csrf_ok
from heron_spark.tracker.http import Request, Response

log = logging.getLogger(__name__)

VERBS = ("activate", "deactivate", "restart", "update")
_HOW_TO_LOGIN = ("get a login link with `heron-spark ui NAME` (or `handle.ui_link()` in the "
                 "driver), or send `Authorization: Bearer <token>` (`heron-spark ui --token`)")
_LOGIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>heron_spark tracker: {title}</title></head><body>
<h1>{title}</h1><p>{text}</p>
<p>To open the UI, run <code>heron-spark ui NAME</code> (or call <code>handle.ui_link()</code>
in the driver) and open the one-time link it prints. Scripts send
<code>Authorization: Bearer &lt;token&gt;</code> (<code>heron-spark ui --token</code>).</p>
</body></html>
"""


class TrackerApp:
    """See the module docstring.

    ``live(name, path, params) -> (status, result)`` asks a topology's TMaster (default:
    through its control port).
    """

    def __init__(self, statemgr: StateManager, auth: Authenticator, *,
                 vendor: static.VendorFiles | None = None, ui_dir=static.UI_DIR,
                 live: Callable[[str, str, dict], tuple[int, Any]] | None = None) -> None:
        self.statemgr = statemgr
        self.auth = auth
        self.vendor = vendor or static.VendorFiles()
        self.ui_dir = ui_dir
        if live is None:
            from heron_spark.tmaster.client import query_view

            def live(name, path, params):
                return query_view(statemgr, name, path, params)
        self._live = live
        self._routes = {
            "/topologies": self._topologies, "/topologies/states": self._states,
            "/topologies/info": self._info, "/topologies/logicalplan": self._logical_plan,
            "/topologies/packingplan": self._packing_plan,
            "/topologies/physicalplan": self._physical_plan,
            "/topologies/executionstate": self._execution_state,
            "/topologies/metadata": self._metadata, "/topologies/config": self._config}

    # ---- entry -----------------------------------------------------------------------------
    def handle(self, request: Request) -> Response:
        """Authenticate, check the method, route; never raises."""
        try:
            return self._handle(request)
        except TrackerRequestError as exc:
            return Response.error(exc.status, str(exc))
        except HeronSparkError as exc:
            return Response.error(500, str(exc))
        except Exception as exc:  # noqa: BLE001 - one bad request must not kill the thread
            log.error("tracker: %s %s failed", request.method, request.path, exc_info=True)
            return Response.error(500, f"internal error: {type(exc).__name__}: {exc}")

    def _handle(self, request: Request) -> Response:
        path = ALIASES.get(request.path, request.path)
        if path == "/health":  # open, for probes: says only that the tracker answers
            return Response.text("ok")  # as Heron's tracker
        if path == "/login":
            return self._login(request)
        by_bearer = self.auth.bearer_ok(request.header("Authorization"))
        if not by_bearer and not self.auth.session_ok(request.header("Cookie")):
            return self._unauthenticated(path)
        verb = path.rpartition("/")[2] if path.startswith("/topologies/") else ""
        if request.method == "POST" and verb in VERBS:
            if not by_bearer and not csrf_ok(request.headers):
                return Response.error(403, "a POST with the session cookie must carry the "
                                           "X-Heron-Spark-Request header from the tracker's "
                                           "own pages (cross-site requests are refused)")
            return self._verb(verb, _post_params(request))
        if request.method not in ("GET", "HEAD"):
            allow = "GET, HEAD, POST" if verb in VERBS else "GET, HEAD"
            return Response.error(405, f"{request.method} is not allowed on {path}: the "
                                       f"tracker reads with GET; management verbs are POST "
                                       f"/topologies/{{{','.join(VERBS)}}}", ("Allow", allow))
        return self._get(path, request)

    def _get(self, path: str, request: Request) -> Response:
        params = request.query
        etag = request.header("If-None-Match")
        if path == "/" or path == "/index.html":
            response = static.ui_file("index.html", etag, self.ui_dir)
        elif path.startswith("/ui/"):
            response = static.ui_file(path[len("/ui/"):], etag, self.ui_dir)
        elif path.startswith("/vendor/"):
            response = self.vendor.response(path[len("/vendor/"):], etag)
        elif path == "/metrics":
            return Response.text(self._prometheus(), "text/plain; version=0.0.4; charset=utf-8")
        elif path in self._routes:
            return Response.json(self._routes[path](params))
        elif path in TRACKER_PATHS:
            name = self._topology_name(params)
            status, result = self._live(name, path, params)
            if status != 200:
                raise TrackerRequestError(status, str(result))
            return Response.json(result)
        else:
            response = None
        if response is None:
            return Response.error(404, f"no such path: {path}; try /topologies")
        return response

    # ---- auth ------------------------------------------------------------------------------
    def _login(self, request: Request) -> Response:
        token = (request.query.get("token") or [""])[-1]
        if request.method not in ("GET", "HEAD"):
            return Response.error(405, "open the login link with GET", ("Allow", "GET, HEAD"))
        if not token or not self.auth.spend_login(token):
            return _page(403, "This login link is spent or expired",
                         "A login link works once, within 10 minutes.")
        return Response(303, b"", [("Location", "/"), ("Set-Cookie", self.auth.session_cookie()),
                                   ("Cache-Control", "no-store")])

    def _unauthenticated(self, path: str) -> Response:
        challenge = ("WWW-Authenticate", "Bearer")
        if path in ("/", "/index.html") or path.startswith("/ui/"):
            response = _page(401, "Log in to the heron_spark tracker",
                             "This page needs a session: open a fresh login link.")
            response.headers.append(challenge)
            return response
        return Response.error(401, f"not authenticated: {_HOW_TO_LOGIN}", challenge)

    # ---- stored views ----------------------------------------------------------------------
    def _names(self) -> list[str]:
        return self.statemgr.topologies()

    def _topology_name(self, params: dict) -> str:
        name = _one(params, "topology")
        if not name:
            raise TrackerRequestError(400, "missing query parameter", param="topology",
                                      fix="add topology=NAME (see /topologies)")
        names = self._names()
        if name not in names:
            raise TrackerRequestError(404, f"no topology {name!r} in {self.statemgr.location}",
                                      param="topology", fix=f"use one of {names}")
        who = shapes.identity(name, self.statemgr.get_execution_state(name))
        for key in ("cluster", "environ", "role"):
            given = _one(params, key)
            if given and given != who[key]:
                raise TrackerRequestError(404, f"topology {name!r} is in {key} {who[key]!r}",
                                          param=key, value=given,
                                          fix=f"use {key}={who[key]} or leave it out")
        return name

    def _stored(self, name: str) -> dict:
        sm = self.statemgr
        topology = sm.get_topology(name)
        execution = sm.get_execution_state(name)
        packing = sm.get_packing_plan(name)
        plan = sm.get_physical_plan(name)
        location = TMasterLocation.from_stored(sm.get_tmaster_location(name))
        status, live = self._live(name, LivePath.STATUS.value, {}) if location else (503, None)
        state = shapes.execution_state(name, execution, topology, packing, plan, location,
                                       TopologyStatus.from_dict(live) if status == 200
                                       and isinstance(live, dict) else None)
        return {"topology": topology, "execution": execution, "packing": packing,
                "plan": plan, "location": location, "state": state}

    def _topologies(self, params: dict) -> dict:
        result: dict = {}
        for name, who in self._filtered(params):
            result.setdefault(who["cluster"], {}).setdefault(who["role"], []).append(name)
        return result

    def _states(self, params: dict) -> dict:
        result: dict = {}
        for name, who in self._filtered(params):
            state = self._stored(name)["state"]
            result.setdefault(who["cluster"], {}).setdefault(who["environ"], {})[name] = state
        return result

    def _filtered(self, params: dict):
        for name in self._names():
            who = shapes.identity(name, self.statemgr.get_execution_state(name))
            if all(not params.get(key) or who[key] in params[key]
                   for key in ("cluster", "environ", "role")):
                yield name, who

    def _info(self, params: dict) -> dict:
        name = self._topology_name(params)
        s = self._stored(name)
        topology_id = s["state"]["id"]
        runtime = shapes.runtime_state(s["state"])
        return {"execution_state": s["state"], "id": topology_id, "name": name,
                "logical_plan": shapes.logical_plan(s["topology"]),
                "metadata": shapes.metadata(s["state"]),
                "packing_plan": shapes.packing_plan(s["packing"], topology_id),
                "physical_plan": shapes.physical_plan(name, s["plan"], s["topology"]),
                "runtime_state": runtime,
                "scheduler_location": {"name": None, "http_endpoint": None,
                                       "job_page_link": None},
                "tmanager_location": shapes.tmanager_location(name, topology_id, s["location"])}

    def _logical_plan(self, params: dict) -> dict:
        name = self._topology_name(params)
        return shapes.logical_plan(self.statemgr.get_topology(name))

    def _packing_plan(self, params: dict) -> dict:
        name = self._topology_name(params)
        topology = self.statemgr.get_topology(name)
        return shapes.packing_plan(self.statemgr.get_packing_plan(name),
                                   topology.id if topology is not None else "")

    def _physical_plan(self, params: dict) -> dict:
        name = self._topology_name(params)
        return shapes.physical_plan(name, self.statemgr.get_physical_plan(name),
                                    self.statemgr.get_topology(name))

    def _execution_state(self, params: dict) -> dict:
        return self._stored(self._topology_name(params))["state"]

    def _metadata(self, params: dict) -> dict:
        return shapes.metadata(self._execution_state(params))

    def _config(self, params: dict) -> dict:
        topology = self.statemgr.get_topology(self._topology_name(params))
        return dict(topology.config) if topology is not None else {}

    # ---- live ------------------------------------------------------------------------------
    def _prometheus(self) -> str:
        """Return every live topology's per-instance metrics in Prometheus' text format.

        See ``tracker.prometheus``: one family per metric name, typed, the Heron name kept in
        the ``metric`` label.
        """
        def live_rows():
            for name in self._names():
                if not self.statemgr.get_tmaster_location(name):
                    continue
                status, rows = self._live(name, LivePath.PROMETHEUS.value, {})
                if status == 200:
                    yield name, rows

        return prometheus.exposition(live_rows())

    def _verb(self, verb: str, params: dict) -> Response:
        """Run a management verb (POST ``/topologies/<verb>``).

        It goes through the TMaster's control port (``tmaster.client``'s ``<verb>_topology``).
        """
        from heron_spark.tmaster import client

        name = self._topology_name(params)
        call = getattr(client, f"{verb}_topology", None)
        if call is None:
            return Response.error(501, f"this heron_spark has no {verb!r} verb")
        args: list = []
        if verb == "restart":
            container = _one(params, "container")
            args = [int(container) if container not in ("", None) else None]
        elif verb == "update":
            args = [_parallelism(params)]
        try:
            result = call(self.statemgr, name, *args)
        except TopologyStateError as exc:
            return _refused(409, exc)
        except TopologyValueError as exc:
            return _refused(400, exc)
        except TopologyNotFoundError as exc:
            return _refused(400, exc, {"topology": exc.topology})
        except ClusterCapacityError as exc:
            return _refused(503, exc)
        return Response.json({"topology": name, "verb": verb, "result": result})


def _refused(status: int, exc: HeronSparkError, fields: dict | None = None) -> Response:
    """Answer a refused verb: ``{"detail": message, "code": ..., "fields": {...}}``.

    ``code`` and ``fields`` are the error's own (``HeronSparkError.code``, ``fields()``), so a
    script tells refusals apart without reading the message.
    """
    if fields is None:
        fields = exc.fields() if hasattr(exc, "fields") else {}
    return Response.json({"detail": str(exc), "code": exc.code,
                          "fields": {k: v if isinstance(v, (str, int, float, bool, type(None)))
                                     else repr(v) for k, v in fields.items()}}, status)


def _one(params: dict, name: str) -> str:
    values = params.get(name) or []
    return values[-1] if values else ""


def _page(status: int, title: str, text: str) -> Response:
    body = _LOGIN_PAGE.format(title=html.escape(title), text=html.escape(text))
    return Response(status, body.encode(), [("Content-Type", "text/html; charset=utf-8"),
                                            ("Cache-Control", "no-store")])


def _post_params(request: Request) -> dict:
    params = {k: list(v) for k, v in request.query.items()}
    if request.header("Content-Type").startswith("application/x-www-form-urlencoded"):
        for key, values in parse_qs(request.body.decode("utf-8", "replace")).items():
            params.setdefault(key, []).extend(values)
    return params


def _parallelism(params: dict) -> dict[str, int]:
    """Heron's ``--component-parallelism NAME:N`` values (parameter ``component_parallelism``, repeatable)."""
    result = {}
    for item in params.get("component_parallelism") or []:
        component, _, count = item.rpartition(":")
        if not component or not count.isdigit():
            raise TrackerRequestError(400, "expected NAME:N", param="component_parallelism",
                                      value=item, fix="e.g. component_parallelism=count:3")
        result[component] = int(count)
    if not result:
        raise TrackerRequestError(400, "missing query parameter", param="component_parallelism",
                                  fix="add component_parallelism=NAME:N (repeatable)")
    return result
