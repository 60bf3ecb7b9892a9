"""Length-prefixed frames: ``u32 length | u8 kind | payload`` (big-endian length of payload).

A CONTROL payload is one protobuf envelope of the connection's conversation. A DATA payload is
a fixed routing head, the stream's name, then one Arrow batch (``tuple_batch.encode_batch``):

    u8 data kind (stmgr.proto's DataKind) | i32 source task | i32 destination task |
    u32 rows | u8 stream name length | stream name (UTF-8) | Arrow batch

The head is a fixed struct, not a protobuf message, because stmgrs read it for every batch
they relay: ``data_head`` is one ``struct.unpack_from`` on the frame as received.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

from heron_spark.proto import stmgr_pb2

CONTROL = 1
DATA = 2
PREFIX = struct.Struct(">IB")
PREFIX_BYTES = PREFIX.size
DATA_HEAD = struct.Struct(">BiiIB")
STREAM_OFFSET = PREFIX_BYTES + DATA_HEAD.size
TUPLES = stmgr_pb2.TUPLES
END_OF_STREAM = stmgr_pb2.END_OF_STREAM
CHECKPOINT_MARKER = stmgr_pb2.CHECKPOINT_MARKER
WATERMARK = stmgr_pb2.WATERMARK
_HEAD_PACK = DATA_HEAD.pack
_PREFIX_PACK = PREFIX.pack


class FrameError(ConnectionError):
    """The byte stream is not a valid frame sequence (or the peer hung up mid-frame)."""


def frame(kind: int, payload: bytes) -> bytes:
    """Return a frame of ``kind`` around an already encoded ``payload``."""
    return _PREFIX_PACK(len(payload), kind) + payload


def control_frame(message) -> bytes:
    """Return a CONTROL frame carrying the protobuf ``message``."""
    body = message.SerializeToString()
    return _PREFIX_PACK(len(body), CONTROL) + body


def data_frame(kind: int, src_task: int, dest_task: int, rows: int, stream: bytes,
               body=b"") -> bytes:
    """Return a DATA frame: the routing head, ``stream`` and the Arrow ``body``.

    ``stream`` is UTF-8 bytes; ``body`` is bytes-like (empty for END_OF_STREAM).
    """
    size = DATA_HEAD.size + len(stream) + len(body)
    return b"".join((_PREFIX_PACK(size, DATA),
                     _HEAD_PACK(kind, src_task, dest_task, rows, len(stream)), stream, body))


def data_frame_parts(kind: int, src_task: int, dest_task: int, rows: int, stream: bytes,
                     body: tuple | list) -> list:
    """Return ``data_frame`` as a list of buffers: the framing, then ``body``'s buffers as they are.

    A channel writes them with one ``sendmsg``, copying none.
    """
    size = DATA_HEAD.size + len(stream) + sum(len(part) for part in body)
    return [b"".join((_PREFIX_PACK(size, DATA), _HEAD_PACK(kind, src_task, dest_task, rows,
                                                            len(stream)), stream)), *body]


def data_head(frame: bytes | bytearray) -> tuple[int, int, int, int, int]:
    """Return ``(data kind, source task, destination task, rows, stream name length)``.

    ``frame`` is a DATA frame, prefix included.
    """
    return DATA_HEAD.unpack_from(frame, PREFIX_BYTES)


def data_stream(frame: bytes | bytearray, stream_length: int) -> str:
    """Return the stream name of a DATA frame whose head gave ``stream_length``."""
    return frame[STREAM_OFFSET:STREAM_OFFSET + stream_length].decode()


def data_body_offset(stream_length: int) -> int:
    """Return where the Arrow batch of a DATA frame starts (prefix included)."""
    return STREAM_OFFSET + stream_length


def read_frame(stream: BinaryIO, max_bytes: int) -> tuple[int, bytes]:
    """Read one frame from a blocking binary stream; return (kind, payload).

    Raises EOFError on a clean end between frames, FrameError on a torn or oversized frame.
    """
    prefix = _read_exact(stream, PREFIX_BYTES)
    if not prefix:
        msg = "peer closed the connection"
        raise EOFError(msg)
    if len(prefix) < PREFIX_BYTES:
        msg = "connection closed inside a frame prefix"
        raise FrameError(msg)
    size, kind = PREFIX.unpack(prefix)
    if size > max_bytes:
        msg = f"frame of {size} bytes exceeds the limit of {max_bytes} bytes (heron.frame.max.bytes)"
        raise FrameError(msg)
    if kind not in (CONTROL, DATA):
        msg = f"unknown frame kind {kind}"
        raise FrameError(msg)
    payload = _read_exact(stream, size)
    if len(payload) < size:
        msg = f"connection closed inside a frame ({len(payload)}/{size} bytes)"
        raise FrameError(msg)
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
