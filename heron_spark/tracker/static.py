"""Static files: the web UI (``tracker/ui/``) and Spark's vendored JS/CSS libraries.

``/`` is ``ui/index.html``; ``/ui/<file>`` any file under ``ui/`` (read on each request, so
a UI change shows on reload; revalidated with an ETag). ``/vendor/<name>`` is a file of
Spark's UI (``org/apache/spark/ui/static/<name>`` in pyspark's ``spark-core_*.jar``: d3,
dagre-d3, vis-timeline-graph2d, ...), read once with ``zipfile`` and cached in memory (the
folder is a few MB), so the UI works offline with no new dependency. Thread-safe.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
import threading
import zipfile
from pathlib import Path

from heron_spark.tracker.http import Response

UI_DIR = Path(__file__).resolve().parent / "ui"
VENDOR_PREFIX = "org/apache/spark/ui/static/"
_NAME = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")
_TYPES = {".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".html": "text/html; charset=utf-8",
          ".json": "application/json", ".svg": "image/svg+xml", ".png": "image/png",
          ".ico": "image/x-icon", ".map": "application/json"}


def content_type(name: str) -> str:
    """Return the Content-Type of a file named ``name``."""
    suffix = Path(name).suffix.lower()
    return _TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def file_response(name: str, body: bytes, if_none_match: str, cache_control: str) -> Response:
    """200 with ``body`` (or 304 if the client has it), with ETag and Cache-Control."""
    etag = _etag(body)
    headers = [("ETag", etag), ("Cache-Control", cache_control),
               ("X-Content-Type-Options", "nosniff")]
    if etag in [t.strip() for t in if_none_match.split(",")]:
        return Response(304, b"", headers)
    return Response(200, body, [("Content-Type", content_type(name)), *headers])


def ui_file(name: str, if_none_match: str = "", ui_dir: Path = UI_DIR) -> Response | None:
    """Return the UI file ``name`` (relative to ``ui_dir``), or None if there is no such file."""
    if not _NAME.match(name) or ".." in name.split("/"):
        return None
    path = ui_dir / name
    if not path.is_file():
        return None
    return file_response(name, path.read_bytes(), if_none_match, "no-cache")


class VendorFiles:
    """Spark's UI static files, out of pyspark's spark-core jar, cached in memory."""

    def __init__(self, jar: Path | None = None) -> None:
        self._jar = jar
        self._lock = threading.Lock()
        self._files: dict[str, bytes] | None = None

    def _load(self) -> dict[str, bytes]:
        with self._lock:
            if self._files is None:
                files = {}
                jar = self._jar or spark_core_jar()
                if jar is not None:
                    with zipfile.ZipFile(jar) as archive:
                        for entry in archive.namelist():
                            name = entry[len(VENDOR_PREFIX):]
                            if entry.startswith(VENDOR_PREFIX) and name and "/" not in name:
                                files[name] = archive.read(entry)
                self._files = files
            return self._files

    def names(self) -> list[str]:
        """Return the file names available under ``/vendor/``."""
        return sorted(self._load())

    def response(self, name: str, if_none_match: str = "") -> Response | None:
        """Return the vendored file ``name``, or None if Spark's jar has no such file."""
        body = self._load().get(name)
        if body is None:
            return None
        return file_response(name, body, if_none_match, "public, max-age=86400")


def spark_core_jar() -> Path | None:
    """Pyspark's ``spark-core_*.jar``, or None if pyspark is not installed."""
    try:
        import pyspark
    except ImportError:
        return None
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar"))
    return jars[-1] if jars else None
