"""A real Apache Kafka broker for the Kafka tests: KRaft mode, single node, a separate JVM.

The broker and its tools come from Maven Central (``tests/jvm/pom.xml``, profile ``kafka``:
``org.apache.kafka:kafka_2.13`` 4.x, see ``jvm_support``). ``Broker.start`` formats a fresh log
folder (``kafka.tools.StorageTool format``) and starts ``kafka.Kafka`` as combined broker and
controller on two free loopback ports; its topics live on disk in that folder, so ``stop`` then
``start`` (or ``kill`` then ``start``) brings the same broker back with its topics, offsets,
groups and transactions. Topic auto-creation is off: topics are created through the admin API
(``create_topic``), as a production cluster usually requires.

Internal topics get one replica and few partitions (``__consumer_offsets``,
``__transaction_state``), and a group's first rebalance is not delayed: a single test broker.

``KafkaCluster`` is three such nodes in a KRaft quorum, one on each of three hosts (network
namespaces, ``hosts_support``), every topic on all three with two in sync at least: the hosts
tier's soak loses one of them. ``KafkaClient`` holds what tests do as clients of either.
"""

from __future__ import annotations

import base64
import os
import signal
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


_LOG4J = """log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
"""


_COORDINATOR_NOT_READY = (14, 15, 16)  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR

# A single test broker: internal topics with one replica and few partitions, a group's first
# rebalance not delayed, topics made through the admin API only.
SINGLE_NODE = {
    "num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "offsets.topic.num.partitions": 4,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "transaction.state.log.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
    "auto.create.topics.enable": "false",
    "log.flush.interval.messages": 9223372036854775807,
}

# Three brokers: every record and the internal topics on all three, two in sync at least, so
# one broker may be lost (or cut off) without losing or refusing a committed write. A broker
# that stops answering leaves the in-sync set after 10 s (30 s by default).
THREE_NODES = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "replica.lag.time.max.ms": 10000,
}


def new_cluster_id() -> str:
    """A KRaft cluster id (not starting with '-': the format tool would read it as an option)."""
    cluster = "-"
    while cluster.startswith("-"):
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    return cluster


class KafkaClient:
    """What the tests do with a Kafka cluster as a client (``servers``: its bootstrap list)."""

    replicas = 1  # replication factor of the topics ``create_topic`` makes

    def __init__(self, servers: str, replicas: int = 1) -> None:
        self._servers, self.replicas = servers, replicas

    @property
    def servers(self) -> str:
        return self._servers

    def create_topic(self, partitions: int = 1, name: str | None = None) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic

        name = name or f"t-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": self.servers})
        for future in admin.create_topics([NewTopic(name, partitions, self.replicas)]).values():
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
            if i % 1000 == 999:
                producer.poll(0)
        assert producer.flush(60) == 0

    def read(self, topic: str, partitions: int, until, timeout: float = 120.0,
             isolation: str = "read_committed") -> list:
        """Read ``topic`` from the start until ``until(messages)``; return the messages."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.servers, "group.id": f"r-{uuid.uuid4()}",
                             "enable.auto.commit": False, "isolation.level": isolation})
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

    def read_to_end(self, topic: str, partitions: int,
                    isolation: str = "read_committed") -> list:
        """Every record of ``topic`` up to its end offsets as they are now (with no transaction
        open on it, ``read_committed`` reaches them too): read by an independent consumer."""
        from confluent_kafka import Consumer, TopicPartition

        ends = self.ends(topic, partitions)
        consumer = Consumer({"bootstrap.servers": self.servers, "group.id": f"r-{uuid.uuid4()}",
                             "enable.auto.commit": False, "isolation.level": isolation})
        parts = [TopicPartition(topic, p, 0) for p in range(partitions)]
        consumer.assign(parts)
        messages: list = []
        try:
            def done():
                messages.extend(m for m in consumer.consume(1000, 0.2) if m.error() is None)
                return all(tp.offset >= ends[tp.partition]
                           for tp in consumer.position(parts))
            wait_until(done, 120, interval=0.0, message=lambda: (
                f"the end of {topic!r} ({ends}) with {isolation} "
                f"({len(messages)} records so far)"))
        finally:
            consumer.close()
        return messages

    def committed(self, group: str, topic: str, partitions: int) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        from confluent_kafka import KafkaException

        consumer = Consumer({"bootstrap.servers": self.servers, "group.id": group})

        def ask():  # a group's coordinator may be moving or loading: the broker says retry
            try:
                return consumer.committed(
                    [TopicPartition(topic, p) for p in range(partitions)], timeout=10)
            except KafkaException as exc:
                if exc.args[0].retriable() or exc.args[0].code() in _COORDINATOR_NOT_READY:
                    return None
                raise

        try:
            found = wait_until(ask, 60, message=f"the committed offsets of group {group!r}")
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


class Broker(KafkaClient):
    """One Apache Kafka broker (KRaft) on 127.0.0.1 (``start`` / ``stop``; both idempotent).

    One node of a cluster (``KafkaCluster``) when given its ``node_id``, the quorum's
    ``voters``, the cluster's id and a ``prefix`` that runs it on a host of its own."""

    def __init__(self, folder: Path, host: str = "127.0.0.1", *, node_id: int = 1,
                 port: int | None = None, controller_port: int | None = None,
                 voters: str | None = None, cluster_id: str | None = None,
                 prefix: tuple[str, ...] = (), settings: dict | None = None) -> None:
        self.folder = folder
        self.host = host
        self.node_id = node_id
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        self.voters = voters or f"{node_id}@{host}:{self.controller_port}"
        self.cluster_id = cluster_id or new_cluster_id()
        self.prefix = list(prefix)
        self.settings = {**SINGLE_NODE, **(settings or {})}
        self.log = folder / "broker.log"
        self.process: subprocess.Popen | None = None
        self._formatted = False

    @property
    def servers(self) -> str:
        return f"{self.host}:{self.port}"

    def _properties(self) -> Path:
        path = self.folder / "server.properties"
        path.write_text("\n".join([
            "process.roles=broker,controller",
            f"node.id={self.node_id}",
            f"controller.quorum.voters={self.voters}",
            f"listeners=PLAINTEXT://{self.host}:{self.port},"
            f"CONTROLLER://{self.host}:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={self.folder / 'data'}",
            *(f"{key}={value}" for key, value in self.settings.items()),
            ""]))
        return path

    def _java(self, *args: str) -> list[str]:
        import jvm_support

        return ["java", "-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                f"-Dlog4j.configuration=file:{self.folder / 'log4j.properties'}",
                "-cp", f"{jvm_support.classpath('kafka')}/*", *args]

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the broker's JVM (formatting its log folder the first time); not waiting."""
        if self.process is not None and self.process.poll() is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "log4j.properties").write_text(_LOG4J.format(log=self.log))
        properties = self._properties()
        if not self._formatted:
            subprocess.run(self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                                      "-c", str(properties)),
                           check=True, capture_output=True, timeout=120)
            self._formatted = True
        with open(self.folder / "broker.out", "ab") as out:
            self.process = subprocess.Popen([*self.prefix, *self._java("kafka.Kafka",
                                                                        str(properties))],
                                            stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def wait_ready(self, brokers: int = 1) -> None:
        """Wait until this broker answers with ``brokers`` brokers in its metadata."""
        wait_until(lambda: self._ready(brokers), 90,
                   message=f"the Kafka broker on {self.servers}")

    def _ready(self, brokers: int = 1) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError("the Kafka broker exited: "
                               f"{(self.folder / 'broker.out').read_text()[-2000:]}"
                               f"{self.log.read_text()[-3000:] if self.log.exists() else ''}")
        from confluent_kafka.admin import AdminClient

        try:
            socket.create_connection((self.host, self.port), 0.2).close()
        except OSError:
            return False
        admin = AdminClient({"bootstrap.servers": self.servers})
        try:
            return len(admin.list_topics(timeout=2).brokers) >= brokers
        except Exception:  # noqa: BLE001 - not ready yet
            return False

    def stop(self) -> None:
        """Stop the broker cleanly (its controlled shutdown); see ``kill`` for a crash."""
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """``kill -9`` the broker: what it had not flushed to its log folder is what a crash
        of its host would lose."""
        self._end(signal.SIGKILL)

    def _end(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.process = None

class KafkaCluster(KafkaClient):
    """Three brokers, each combined broker and controller (a KRaft quorum of three), one on
    each of ``hosts`` (``hosts_support.Host``: a network namespace with its own address), on
    the fixed ports 9092 (clients) and 9093 (controllers). ``start`` starts the three at once
    (a quorum needs a majority) and waits until each sees all three; ``stop`` stops them."""

    replicas = 3
    PORT, CONTROLLER_PORT = 9092, 9093

    def __init__(self, folder: Path, hosts) -> None:
        voters = ",".join(f"{i + 1}@{h.address}:{self.CONTROLLER_PORT}"
                          for i, h in enumerate(hosts))
        cluster_id = new_cluster_id()
        self.brokers = [Broker(folder / f"broker-{i + 1}", h.address, node_id=i + 1,
                               port=self.PORT, controller_port=self.CONTROLLER_PORT,
                               voters=voters, cluster_id=cluster_id,
                               prefix=tuple(h.exec_prefix()), settings=THREE_NODES)
                        for i, h in enumerate(hosts)]

    @property
    def servers(self) -> str:
        return ",".join(b.servers for b in self.brokers)

    def start(self) -> "KafkaCluster":
        try:
            for broker in self.brokers:
                broker.launch()
            for broker in self.brokers:
                broker.wait_ready(len(self.brokers))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()


def broker(tmp_path_factory):
    """Yield a started broker; stop it at the end, even on failure (a fixture's body)."""
    broker = Broker(tmp_path_factory.mktemp("kafka"))
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
