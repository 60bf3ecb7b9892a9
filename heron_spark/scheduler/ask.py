"""Ask a topology's TMaster through its control port, from wherever it is reachable.

From this process on a classic session (the driver shares the cluster's network), and under
Spark Connect from an executor, through a one-task Spark job
(``spark.range(1, numPartitions=1).mapInArrow(AskTMaster(...))``) that reads the TMaster's
location from the state manager and brings the answer back as one row. So a client that
reaches nothing but the Connect endpoint can run and manage a topology. Remote access only:
what the answers mean is ``scheduler.remote.RemoteTMaster``'s.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Iterator

from heron_spark.proto import tmaster_pb2
from heron_spark.scheduler.session import run_one_task

log = logging.getLogger(__name__)
_ASK_TIMEOUT_SECS = 60.0
_ANSWER_SCHEMA = "answer binary"


def ask_here(statemgr_url: str, topology: str, request: bytes) -> bytes:
    """Send one serialized ``ControlRequest`` to ``topology``'s TMaster; b"" if none answers."""
    from heron_spark.statemgr import open_state_manager
    from heron_spark.tmaster.client import VIEW_MAX_BYTES, VIEW_TIMEOUT_SECS, request_tmaster

    message = tmaster_pb2.ControlRequest()
    message.ParseFromString(request)
    with open_state_manager(statemgr_url) as statemgr:
        response = request_tmaster(statemgr, topology, message, VIEW_MAX_BYTES,
                                   VIEW_TIMEOUT_SECS)
    return b"" if response is None else response.SerializeToString()


@dataclasses.dataclass
class AskTMaster:
    """The ``mapInArrow`` function of a question job: ask on the executor, yield one row."""

    statemgr: str
    topology: str
    request: bytes

    def __call__(self, batches: Iterator) -> Iterator:
        """Ask the TMaster once; yield its serialized answer (empty: none answered)."""
        import pyarrow as pa

        for _ in batches:
            pass
        answer = ask_here(self.statemgr, self.topology, self.request)
        yield pa.RecordBatch.from_pydict({"answer": [answer]},
                                         schema=pa.schema([("answer", pa.binary())]))


class Asker:
    """Send control requests to a topology's TMaster, directly or through a Spark job."""

    def __init__(self, spark, statemgr_url: str, topology: str, through_spark: bool) -> None:
        self.spark = spark
        self.statemgr_url = statemgr_url
        self.topology = topology
        self.through_spark = through_spark
        self.tag = f"heron_spark-ask:{topology}"

    def __call__(self, request: tmaster_pb2.ControlRequest) -> tmaster_pb2.ControlResponse | None:
        """Return the TMaster's answer, or None if no TMaster answered."""
        raw = request.SerializeToString()
        answer = self._through_spark(raw) if self.through_spark \
            else ask_here(self.statemgr_url, self.topology, raw)
        if not answer:
            return None
        response = tmaster_pb2.ControlResponse()
        response.ParseFromString(answer)
        return response

    def _through_spark(self, raw: bytes) -> bytes:
        """Run the one-task job; interrupt it (its own tag) if it has no slot for too long."""
        try:
            rows = run_one_task(self.spark, AskTMaster(self.statemgr_url, self.topology, raw),
                                _ANSWER_SCHEMA, self.tag, _ASK_TIMEOUT_SECS)
        except Exception as exc:  # noqa: BLE001 - no answer: the caller says what that means
            log.warning("topology %s: asking its TMaster through a Spark job failed: %s",
                        self.topology, str(exc).splitlines()[0] if str(exc) else exc)
            return b""
        return bytes(rows[0]["answer"]) if rows else b""
