"""What the stream manager's core asks of its shell: ``StmgrTransport``.

Implemented by the socket shell (``server.StreamManager``), the in-process runner's queues
(``inprocess.runner``) and the tests' recorders. Every call returns at once.
"""

from __future__ import annotations

from typing import Protocol

from heron_spark.proto import tmaster_pb2


class StmgrTransport(Protocol):
    """What the core asks of its shell. Every call returns at once."""

    def to_instance(self, task: int, frame: bytes | bytearray) -> bool:
        """Queue ``frame`` for local ``task``; False when it is not connected."""

    def to_peer(self, container: int, frame: bytes | bytearray) -> None:
        """Queue ``frame`` for the stmgr of ``container`` (buffered while it is down)."""

    def to_tmaster(self, frame: bytes) -> None:
        """Queue ``frame`` for the TMaster."""

    def serve_file(self, request: tmaster_pb2.FileRequest) -> None:
        """Answer the tracker's ``request`` for a file of the container's work dir, via the TMaster."""

    def set_reading(self, task: int, reading: bool) -> None:
        """Stop or resume taking frames from local ``task``."""

    def instance_queued_bytes(self, task: int) -> int:
        """Bytes queued towards local ``task``."""

    def peer_queued_bytes(self) -> int:
        """Bytes queued towards the most loaded peer stmgr."""

    def retarget_peers(self, addresses: dict[int, tuple[str, int]]) -> None:
        """Point the link to each peer container at its (host, port)."""

    def announce_stop(self) -> None:
        """Tell the container this stmgr is ending for good (before instances notice)."""

    def failure_note(self, task: int) -> str | None:
        """Why the container killed ``task``, if it did."""

    def instance_log(self, task: int) -> str:
        """Return the path of ``task``'s log file."""
