"""Length-prefixed frames: ``u32 length | u8 kind | payload`` (big-endian length of payload).

A CONTROL payload is one protobuf envelope of the connection's conversation. A DATA payload is
``u32 header length | DataHeader | Arrow IPC stream`` (see ``tuple_batch``).
"""

from __future__ import annotations

import struct
from typing import BinaryIO

from heron_spark.proto import stmgr_pb2

CONTROL = 1
DATA = 2
_PREFIX = struct.Struct(">IB")
_U32 = struct.Struct(">I")
PREFIX_BYTES = _PREFIX.size


class FrameError(ConnectionError):
    """The byte stream is not a valid frame sequence (or the peer hung up mid-frame)."""


def frame(kind: int, payload: bytes) -> bytes:
    """Return a frame of ``kind`` around an already encoded ``payload``."""
    return _PREFIX.pack(len(payload), kind) + payload


def control_frame(message) -> bytes:
    """Return a CONTROL frame carrying the protobuf ``message``."""
    body = message.SerializeToString()
    return _PREFIX.pack(len(body), CONTROL) + body


def data_frame(header: stmgr_pb2.DataHeader, arrow_payload: bytes = b"") -> bytes:
    """Return a DATA frame: the routing header, then the Arrow IPC bytes (may be empty)."""
    head = header.SerializeToString()
    size = _U32.size + len(head) + len(arrow_payload)
    return b"".join((_PREFIX.pack(size, DATA), _U32.pack(len(head)), head, arrow_payload))


def split_data(payload: bytes) -> tuple[stmgr_pb2.DataHeader, memoryview]:
    """Return the header and the Arrow bytes of a DATA payload."""
    (head_len,) = _U32.unpack_from(payload, 0)
    header = stmgr_pb2.DataHeader()
    header.ParseFromString(payload[_U32.size:_U32.size + head_len])
    return header, memoryview(payload)[_U32.size + head_len:]


def rehead(payload: bytes, header: stmgr_pb2.DataHeader) -> bytes:
    """Return a DATA frame with ``payload``'s Arrow bytes under a new header (no re-encoding)."""
    (head_len,) = _U32.unpack_from(payload, 0)
    return data_frame(header, payload[_U32.size + head_len:])


def read_frame(stream: BinaryIO, max_bytes: int) -> tuple[int, bytes]:
    """Read one frame from a buffered binary stream; return (kind, payload).

    Raises EOFError on a clean end between frames, FrameError on a torn or oversized frame.
    """
    prefix = _read_exact(stream, PREFIX_BYTES)
    if not prefix:
        raise EOFError("peer closed the connection")
    if len(prefix) < PREFIX_BYTES:
        raise FrameError("connection closed inside a frame prefix")
    size, kind = _PREFIX.unpack(prefix)
    if size > max_bytes:
        raise FrameError(f"frame of {size} bytes exceeds the limit of {max_bytes} bytes "
                         f"(heron.frame.max.bytes)")
    if kind not in (CONTROL, DATA):
        raise FrameError(f"unknown frame kind {kind}")
    payload = _read_exact(stream, size)
    if len(payload) < size:
        raise FrameError(f"connection closed inside a frame ({len(payload)}/{size} bytes)")
    return kind, payload


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    """Read ``size`` bytes (fewer only at end of stream); works on raw and buffered streams."""
    data = stream.read(size)
    if data is None or len(data) == size or not data:
        return data or b""
    parts = [data]
    got = len(data)
    while got < size:
        more = stream.read(size - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)
