"""The tracker's request and response values: what the HTTP shell hands the app and sends back.

Plain data, no I/O: the app (``app.TrackerApp``) is tested on these without a socket.
"""

from __future__ import annotations

import dataclasses
import json


@dataclasses.dataclass
class Request:
    """One HTTP request.

    ``query`` maps each parameter to its values (as ``parse_qs``); ``headers`` has lower-case
    names.
    """

    method: str
    path: str
    query: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    body: bytes = b""

    def header(self, name: str) -> str:
        """Return the header ``name`` (any case), or ``""``."""
        return self.headers.get(name.lower(), "")


@dataclasses.dataclass
class Response:
    """One HTTP response; ``headers`` is a list of (name, value), Content-Length excluded."""

    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    @classmethod
    def json(cls, data, status: int = 200) -> "Response":
        """Return a JSON body (``application/json``), never cached."""
        return cls(status, json.dumps(data, indent=1, sort_keys=True).encode(),
                   [("Content-Type", "application/json"), ("Cache-Control", "no-store")])

    @classmethod
    def error(cls, status: int, message: str, *headers: tuple[str, str]) -> "Response":
        """Return an error as the FastAPI tracker answers one: ``{"detail": message}``."""
        response = cls.json({"detail": message}, status)
        response.headers.extend(headers)
        return response

    @classmethod
    def text(cls, text: str, content_type: str = "text/plain; charset=utf-8",
             status: int = 200) -> "Response":
        """Return a text body of ``content_type`` with ``status``."""
        return cls(status, text.encode(), [("Content-Type", content_type),
                                           ("Cache-Control", "no-store")])
