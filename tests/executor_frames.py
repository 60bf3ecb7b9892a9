"""Reading what an executor sent (the frames a test collects from ``build_executor``'s ``send``)."""

from __future__ import annotations

from heron_spark.proto import stmgr_pb2
from heron_spark.wire import frames


def stored_ids(sent: list) -> list[int]:
    """The checkpoint ids of the ``stored`` reports among ``sent``, in order."""
    ids = []
    for frame in sent:
        if isinstance(frame, bytes) and frame[4] == frames.CONTROL:
            message = stmgr_pb2.InstanceToStmgr.FromString(frame[frames.PREFIX_BYTES:])
            if message.WhichOneof("body") == "stored":
                ids.append(message.stored.checkpoint_id)
    return ids
