"""Read a container's work dir for the tracker: file slices and directory listings.

Runs in the stmgr process of the container (which answers the TMaster's ``FileRequest``), so
the tracker sees a container's logs wherever it runs. Every path is relative to the work dir:
absolute paths, ``..`` and symlinks leading outside it are refused (``TrackerRequestError``
400). Results use Heron's shell shapes: ``{"offset", "length", "data"}`` for a slice,
``{name: {"formatted_stat", "is_dir", "path"}}`` for a listing. Stateless; any thread.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path, PurePosixPath

from heron_spark.errors import TrackerRequestError
from heron_spark.proto import tmaster_pb2

FILE_DATA_MAX_BYTES = 256 * 1024  # one slice at most; callers page with offset/length
LISTING_MAX_ENTRIES = 1000


def check_relative(path: str) -> PurePosixPath:
    """Return ``path`` as a relative path inside a work dir; raise 400 if it may leave it."""
    pure = PurePosixPath(path or ".")
    if pure.is_absolute() or ".." in pure.parts or "\0" in path:
        raise TrackerRequestError(400, "only relative paths inside the container's work dir "
                                  "are allowed", param="path", value=path,
                                  fix="drop the leading '/' and any '..' (e.g. path=logs)")
    return pure


def _resolve(root: Path, path: str) -> Path:
    relative = check_relative(path)
    base = root.resolve()
    target = (base / relative).resolve()
    if target != base and base not in target.parents:  # a symlink pointing outside
        raise TrackerRequestError(400, "the path leads outside the container's work dir",
                                  param="path", value=path, fix="name a file inside it")
    return target


def file_data(root: Path, path: str, offset: int, length: int,
              max_bytes: int = FILE_DATA_MAX_BYTES) -> dict:
    """Return up to ``length`` bytes (at most ``max_bytes``) of ``path`` from ``offset``.

    As Heron's shell: ``offset`` -1 means the end of the file, ``length`` -1 the rest (both
    capped at ``max_bytes``). Bytes that are not UTF-8 are replaced.
    """
    target = _resolve(root, path)
    if not target.is_file():
        raise TrackerRequestError(404, "no such file in the container's work dir",
                                  param="path", value=path,
                                  fix="list the folder with /topologies/container/filestats")
    if offset < -1 or length < -1:
        raise TrackerRequestError(400, "offset and length must be >= -1", param="offset",
                                  value=(offset, length))
    size = target.stat().st_size
    start = size if offset == -1 else min(offset, size)
    wanted = size - start if length == -1 else length
    wanted = min(wanted, max_bytes)
    with open(target, "rb") as handle:
        handle.seek(start)
        data = handle.read(wanted)
    text = data.decode("utf-8", "replace")
    return {"offset": start, "length": len(data), "data": text, "size": size}


def file_stats(root: Path, path: str) -> dict:
    """List the folder ``path`` (or describe the file) as Heron's shell ``filestats`` does."""
    target = _resolve(root, path)
    if not target.exists():
        raise TrackerRequestError(404, "no such file or folder in the container's work dir",
                                  param="path", value=path, fix="try path=. or path=logs")
    relative = check_relative(path)
    names = sorted(os.listdir(target))[:LISTING_MAX_ENTRIES] if target.is_dir() else []
    if not target.is_dir():
        names, relative, target = [target.name], relative.parent, target.parent
    stats = {}
    for name in names:
        try:
            info = os.stat(target / name)
        except OSError:
            continue
        stats[name] = {"formatted_stat": _format(info), "is_dir": stat.S_ISDIR(info.st_mode),
                       "path": str(relative / name), "size": info.st_size,
                       "mtime": info.st_mtime}
    return stats


def _format(info: os.stat_result) -> str:
    mode = stat.filemode(info.st_mode)
    when = time.strftime("%b %d %H:%M", time.localtime(info.st_mtime))
    return f"{mode} {info.st_nlink:3d} {info.st_size:10d} {when}"


def answer(root: Path, request: tmaster_pb2.FileRequest) -> tmaster_pb2.FileResponse:
    """Answer a ``FileRequest`` for the work dir ``root`` (runs in the stmgr).

    The answer is 200 with the JSON result, or the error's status and message.
    """
    try:
        if request.op == "data":
            result = file_data(root, request.path, request.offset, request.length)
        elif request.op == "stats":
            result = file_stats(root, request.path)
        else:
            raise TrackerRequestError(400, "unknown file operation", value=request.op,
                                      fix="use 'data' or 'stats'")
    except TrackerRequestError as exc:
        return tmaster_pb2.FileResponse(request_id=request.request_id, code=exc.status,
                                        error=str(exc))
    except OSError as exc:
        return tmaster_pb2.FileResponse(request_id=request.request_id, code=500,
                                        error=f"could not read {request.path!r}: {exc}")
    return tmaster_pb2.FileResponse(request_id=request.request_id, code=200,
                                    json=json.dumps(result))
