"""The tracker API: a small JSON-over-HTTP view of a running topology, served by the driver.

``GET /topology`` (state), ``/topology/physicalplan``, ``/topology/metrics``, and
``/metrics`` in Prometheus text format. Read-only: control goes through the control port
(``heron-spark kill``). Like every heron_spark port it answers only requests that carry the
topology secret: ``Authorization: Bearer <secret>`` (the secret is in the state manager,
readable by its owner only).
"""

from __future__ import annotations

import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict

from heron_spark.tmaster.master import TMaster


def start_tracker(tmaster: TMaster, host: str, port: int, secret: str) -> ThreadingHTTPServer:
    """Serve the tracker API for ``tmaster`` on ``host:port`` (0 = any free port)."""
    expected = f"Bearer {secret}".encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            given = (self.headers.get("Authorization") or "").encode()
            if not hmac.compare_digest(given, expected):
                self.send_error(401, "send Authorization: Bearer <topology secret>")
                return
            if self.path == "/topology":
                self._json(tmaster.status())
            elif self.path == "/topology/physicalplan":
                plan = tmaster.physical_plan
                self._json(MessageToDict(plan) if plan is not None else {})
            elif self.path == "/topology/metrics":
                self._json(tmaster.metrics_by_component())
            elif self.path == "/metrics":
                self._text(_prometheus(tmaster))
            else:
                self.send_error(404, "unknown path; try /topology")

        def _json(self, data) -> None:
            self._reply(json.dumps(data, indent=1).encode(), "application/json")

        def _text(self, text: str) -> None:
            self._reply(text.encode(), "text/plain; version=0.0.4")

        def _reply(self, body: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="tracker", daemon=True).start()
    return server


def _prometheus(tmaster: TMaster) -> str:
    lines = []
    for component, values in sorted(tmaster.metrics_by_component().items()):
        for name, value in sorted(values.items()):
            metric = "heron_" + "".join(c if c.isalnum() else "_" for c in name.strip("_"))
            lines.append(f'{metric}{{topology="{tmaster.name}",component="{component}"}} {value}')
    return "\n".join(lines) + "\n"
