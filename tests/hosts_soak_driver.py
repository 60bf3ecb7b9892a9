"""The driver of ``test_hosts_soak``: effectively once from Kafka into Kafka and Delta, on three
hosts that each run a Spark worker and a Kafka broker, while processes are killed, hosts are
cut off and one host is lost for good.

Runs inside host ``h0``'s network namespace (``ip netns exec``; the TMaster binds its address).
The topology: ``KafkaSpout`` (2 tasks, 4 partitions) -> split -> running count (checkpointed,
fields grouping) -> ``KafkaSink`` (transactions) and ``DeltaSink`` (one Delta version per
checkpoint), 3 containers, checkpoints every second. Each count emits ``(word, n)`` for the
word's n-th occurrence, so the exact output follows from the input alone: every ``(word, n)``
once.

For ``SECS`` seconds (``HERON_SPARK_SOAK_SECS`` in the test, 600 by default):
- a producer here writes lines into the input topic at a steady rate (idempotent, acks from
  all in-sync replicas: the input holds each line once);
- ``chaos_support.Chaos`` sends ``kill -9`` every 8-16 s (seeded) to a random instance, stmgr
  or container (the Spark Python worker running a barrier task) of the topology;
- every 30-50 s one host (the TMaster's ``h0`` included) is cut off from all others for 7 s;
- at the middle, every process of one worker host is killed (``kill_host``): its Spark worker,
  executor and containers, and its Kafka broker. The rest of the soak runs on two hosts.
Then the input stops; the driver waits until the committed output holds as many records as
the input has words (a read_committed consumer, and the table's row count), kills the
topology and prints ``SOAK {json}`` (topics, table, faults, timings) and ``HOSTS SOAK OK``.
The test reads the output with the independent readers.

``python tests/hosts_soak_driver.py SPEC_JSON``.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS), str(TESTS.parent)]
os.environ["PYSPARK_PYTHON"] = sys.executable

import chaos_support  # noqa: E402
import kafka_word_count as kwc  # noqa: E402
import stateful_word_count as swc  # noqa: E402
from cluster_support import cluster_driver_session  # noqa: E402
from hosts_support import Host, Hosts  # noqa: E402
from kafka_support import KafkaClient  # noqa: E402
from heron_spark import Grouping, TopologyBuilder  # noqa: E402
from heron_spark.io import DeltaSink, KafkaSink, KafkaSpout  # noqa: E402
from heron_spark.testing import wait_until  # noqa: E402

NAME = "hosts-soak"
PARTITIONS = 4
LINES_PER_SEC = 40
CUT_SECS = 7.0          # under twice the liveness timeout: a cut host's stage is not restarted
CUT_EVERY = (30.0, 50.0)
KILL_EVERY = (8.0, 16.0)
CONVERGE_SECS = 420.0


def log(kind: str, **fields) -> None:
    print(f"{kind} " + json.dumps({"t": round(time.time(), 2), **fields}, default=str),
          flush=True)


def build(servers: str, source: str, sink: str, table: Path, out: Path):
    builder = TopologyBuilder(NAME)
    lines_in = builder.add_spout("kafka", KafkaSpout, par=2, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": source, "kafka.group.id": NAME,
        "kafka.max.records.per.call": 16, "kafka.decoder": kwc.as_line,
        "kafka.output.fields": ["line"]})
    words = builder.add_bolt("split", kwc.Split, par=2, inputs={lines_in: Grouping.SHUFFLE},
                             config={kwc.SLEEP_MS: 0.5})
    counts = builder.add_bolt("count", kwc.CountOut, par=2,
                              inputs={words: Grouping.fields("word")})
    builder.add_bolt("kafka-out", KafkaSink, par=1, inputs={counts: Grouping.SHUFFLE}, config={
        "kafka.bootstrap.servers": servers, "kafka.topic": sink, "kafka.transactions": True})
    builder.add_bolt("delta-out", DeltaSink, par=1, inputs={counts: Grouping.SHUFFLE},
                     config={"delta.path": str(table)})
    builder.set_config({
        "topology.reliability.mode": "EFFECTIVELY_ONCE",
        "topology.stateful.checkpoint.interval.seconds": 1.0, "topology.stmgrs": 3,
        "heron.tmaster.stmgr.heartbeat.timeout.secs": 5, kwc.OUT: str(out),
        **chaos_support.CHAOS_CONF})
    return builder.build()


class Producer(threading.Thread):
    """Writes ``text``'s lines into ``topic`` at ``rate`` lines/s until stopped (or out of
    lines); counts what the brokers confirmed and what they refused."""

    def __init__(self, servers: str, topic: str, rate: float, text: list[str]) -> None:
        super().__init__(name="producer", daemon=True)
        from confluent_kafka import Producer as KafkaProducer

        self.topic, self.rate, self.text = topic, rate, text
        self.producer = KafkaProducer({"bootstrap.servers": servers, "enable.idempotence": True,
                                       "acks": "all", "linger.ms": 5,
                                       "delivery.timeout.ms": 600_000})
        self.sent = self.delivered = 0
        self.errors: list[str] = []
        self.stopping = threading.Event()

    def _done(self, err, msg) -> None:
        if err is None:
            self.delivered += 1
        else:
            self.errors.append(str(err))

    def run(self) -> None:
        start = time.monotonic()
        while not self.stopping.is_set() and self.sent < len(self.text):
            due = min(int((time.monotonic() - start) * self.rate), len(self.text))
            for line in self.text[self.sent:due]:
                self.producer.produce(self.topic, value=line.encode(), on_delivery=self._done)
                self.sent += 1
            self.producer.poll(0.05)
        if self.producer.flush(600) != 0:
            self.errors.append("lines left undelivered after 600 s")


def output_progress(servers: str, sink: str, table: Path):
    """A reader of the committed output's size: records on ``sink`` a read_committed consumer
    has seen so far (kept open, read on), and the Delta table's row count."""
    import uuid

    from confluent_kafka import Consumer, TopicPartition
    from deltalake import DeltaTable

    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"p-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(sink, p, 0) for p in range(2)])
    seen = [0]

    def kafka_records() -> int:
        seen[0] += sum(1 for m in consumer.consume(10_000, 0.2) if m.error() is None)
        return seen[0]

    def delta_rows() -> int:
        if not (table / "_delta_log").exists():
            return 0
        actions = DeltaTable(str(table)).get_add_actions(flatten=True)
        return int(sum(actions.column("num_records").to_pylist()))

    return consumer, kafka_records, delta_rows


def main(spec: dict) -> None:
    tmp, secs, seed = Path(spec["tmp"]), float(spec["secs"]), int(spec["seed"])
    servers = spec["kafka"]
    hosts = Hosts.attach([Host(**h) for h in spec["hosts"]])
    os.environ["SPARK_LOCAL_IP"] = hosts[0].address
    kafka = KafkaClient(servers, replicas=3)
    source, sink = kafka.create_topic(PARTITIONS), kafka.create_topic(2)
    table, out, work = tmp / "table", tmp / "out", tmp / "work"
    log("TOPICS", source=source, sink=sink, table=str(table), work=str(work))
    spark = cluster_driver_session(spec["master"], "heron_spark-hosts-soak", hosts[0].address,
                                   3)
    for module in (kwc, swc):
        spark.sparkContext.addPyFile(module.__file__)
    hconf = {"heron.statemgr": spec["statemgr"], "heron.work.dir": str(work),
             "heron.checkpoint.root": f"file://{tmp}/shared-checkpoints",
             **swc.SHORT_QUEUES}
    from heron_spark.scheduler.submit import submit

    text = kwc.lines(int(secs * LINES_PER_SEC * 1.5) + 1000, seed=11)
    producer = Producer(servers, source, LINES_PER_SEC, text)
    consumer, kafka_records, delta_rows = output_progress(servers, sink, table)
    handle = submit(build(servers, source, sink, table, out), spark=spark, conf=hconf)
    try:
        assert handle.wait_running(timeout=180), handle.status
        producer.start()
        wait_until(lambda: kafka_records() > 0 and delta_rows() > 0, 120,
                   message="the first committed counts in Kafka and Delta")
        log("RUNNING", kafka=kafka_records(), delta=delta_rows())
        soak(hosts, handle, work / NAME, secs, seed, kafka_records)
        producer.stopping.set()
        producer.join(600)
        words = sum(len(line.split()) for line in text[:producer.sent])
        log("INPUT", lines=producer.sent, delivered=producer.delivered, words=words,
            producer_errors=producer.errors[:5])
        assert not producer.errors and producer.delivered == producer.sent, producer.errors[:5]
        ended = time.monotonic()
        wait_until(lambda: kafka_records() >= words and delta_rows() >= words, CONVERGE_SECS,
                   interval=1.0, message=lambda: (
                       f"the committed output to reach {words} records: Kafka "
                       f"{kafka_records()}, Delta {delta_rows()}; {handle.status_detail()}"))
        detail = handle.status_detail()
        log("CONVERGED", secs=round(time.monotonic() - ended, 1), kafka=kafka_records(),
            delta=delta_rows(), generation=detail.get("generation"),
            instance_failures=detail.get("instance_failures"),
            executor_losses=len(detail.get("executor_losses") or []))
    finally:
        producer.stopping.set()
        consumer.close()
        handle.kill()
        spark.stop()
    print("SOAK " + json.dumps({"source": source, "sink": sink, "table": str(table),
                                "lines": producer.sent, "words": words}), flush=True)
    print("HOSTS SOAK OK", flush=True)


def soak(hosts: Hosts, handle, work: Path, secs: float, seed: int, progress) -> None:
    """Kills, cuts and a host loss for ``secs`` seconds; each logged as a ``FAULT`` line."""
    rng = random.Random(seed)
    chaos = chaos_support.Chaos(work, duration_secs=secs, seed=seed, interval=KILL_EVERY,
                                kill_ratio=1.0, roles=(chaos_support.INSTANCE,
                                                       chaos_support.STMGR,
                                                       chaos_support.CONTAINER),
                                log=lambda text: log("CHAOS", text=text))
    start = time.monotonic()
    lost: Host | None = None
    chaos.start()
    try:
        while (left := secs - (time.monotonic() - start)) > CUT_SECS:
            threading.Event().wait(min(rng.uniform(*CUT_EVERY), left - CUT_SECS))
            if lost is None and time.monotonic() - start >= secs / 2:
                lost = rng.choice(hosts.hosts[1:])
                before = progress()
                killed = hosts.kill_host(lost)
                log("FAULT", fault="host lost", host=lost.address, processes=len(killed),
                    output_before=before)
                continue
            victim = rng.choice([h for h in hosts.hosts if h != lost])
            before = progress()
            hosts.cut(victim)
            threading.Event().wait(CUT_SECS)  # how long the cut lasts (a duration)
            hosts.heal(victim)
            log("FAULT", fault="cut", host=victim.address, secs=CUT_SECS, output_before=before,
                output_at_heal=progress())
    finally:
        chaos.stop()
    for action in chaos.actions:
        log("KILL", action=str(action))
    log("FAULTS", kills=len(chaos.actions), secs=round(time.monotonic() - start, 1),
        output=progress(), detail=handle.status_detail())


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
