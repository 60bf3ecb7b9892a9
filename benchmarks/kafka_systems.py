"""What ``benchmarks/kafka.py`` compares: the heron_spark topologies and Spark's own queries.

Both count the words of a Kafka topic's records (lines of words) and write running counts to a
Kafka topic as ``key`` = the word, ``value`` = ``<count>|<newest>``, ``newest`` the largest
Kafka timestamp (ms, set by the benchmark's producer) of the records counted so far. A word's
final count is its largest ``<count>``; a record is visible once an update of each of its
words that counts it has reached a reader (``latencies``).

- heron_spark: ``KafkaSpout`` -> ``split`` -> ``count`` (fields grouping) -> ``KafkaSink``,
  written as ``docs/guide/io.md`` and ``docs/guide/state.md`` teach: the count bolt counts in
  ``process`` and emits the words that changed on every tick (``topology.tick.tuple.freq.secs``)
  and at the end of input; at-least-once it anchors each update to the tuples it counts and
  acks them then; effectively-once it keeps the counts in its checkpointed ``State``
  (``StatefulComponent``), and ``KafkaSink`` writes each checkpoint's output in one Kafka
  transaction.
- heron_spark into Delta Lake (``delta-effectively-once``): the same topology at
  effectively-once with ``DeltaSink`` in place of ``KafkaSink``: each committed checkpoint's
  updates become one Delta version of a table of ``key``, ``value`` (strings), read back as
  they commit by ``DeltaReader`` (a new version's ``_delta_log`` entry and its files).
- Spark Structured Streaming: ``readStream.format("kafka")`` -> ``explode(split(value))`` ->
  ``groupBy(word).agg(count, max(timestamp))`` -> ``writeStream.format("kafka")`` in update
  mode (the changed counts of every batch), with a micro-batch trigger (``availableNow`` or
  ``processingTime``) or real-time mode (``trigger(realTime=...)``).

Driver only, except the bolts, which travel to the topology's processes by value.
"""

from __future__ import annotations

import bisect
import collections
import json
import os
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.api.state import StatefulComponent
from heron_spark.io import DeltaSink, KafkaSink, KafkaSpout

MODES = {"at-most-once": "ATMOST_ONCE", "at-least-once": "ATLEAST_ONCE",
         "effectively-once": "EFFECTIVELY_ONCE"}
DELTA = "delta-effectively-once"  # effectively-once into a Delta table: `sink` is its path
SPOUTS = SPLITTERS = COUNTERS = CONTAINERS = 2


# ---- heron_spark -----------------------------------------------------------------------------
class SplitBolt(Bolt):
    """Split a Kafka record's value into words, each with the record's Kafka timestamp (ms)."""

    outputs = ["word", "ts"]

    def process(self, tup):
        key, value, topic, partition, offset, timestamp = tup.values
        for word in value.decode().split():
            self.emit([word, timestamp], anchors=[tup])
        self.ack(tup)


class CountBolt(Bolt):
    """Count words; on every tick emit ``(key=word, value="<count>|<newest ts>")`` per changed word.

    Each update is anchored to the tuples it counts, which are acked then (at-least-once: a
    record's offset is committed only once the sink has the counts that include it).
    """

    outputs = ["key", "value"]

    def initialize(self, config, context):
        self.counts: dict[str, tuple[int, int]] = {}
        self.waiting: dict[str, list] = {}

    def process(self, tup):
        word, ts = tup.values
        count, newest = self.counts.get(word, (0, 0))
        self.counts[word] = (count + 1, max(newest, ts))
        self.waiting.setdefault(word, []).append(tup)

    def process_tick(self, tup):
        self._flush()

    def end_of_input(self):
        self._flush()

    def _flush(self):
        for word, tuples in self.waiting.items():
            count, newest = self.counts[word]
            self.emit([word, f"{count}|{newest}"], anchors=tuples)
            for done in tuples:
                self.ack(done)
        self.waiting = {}


class StatefulCountBolt(Bolt, StatefulComponent):
    """``CountBolt`` for effectively-once: the counts live in the checkpointed ``State``."""

    outputs = ["key", "value"]

    def init_state(self, state):
        self.counts = state  # word -> (count, newest ts); saved and restored by checkpoints

    def initialize(self, config, context):
        self.changed: set[str] = set()

    def process(self, tup):
        word, ts = tup.values
        count, newest = self.counts.get(word) or (0, 0)
        self.counts.put(word, (count + 1, max(newest, ts)))
        self.changed.add(word)

    def process_tick(self, tup):
        self._flush()

    def end_of_input(self):
        self._flush()

    def _flush(self):
        for word in self.changed:
            count, newest = self.counts.get(word)
            self.emit([word, f"{count}|{newest}"])
        self.changed = set()


def build(name: str, mode: str, servers: str, source: str, sink: str, *, bounded: bool,
          emit_secs: float, checkpoint_secs: float) -> type:
    """Return the Kafka word count in ``mode`` (a key of ``MODES``, or ``DELTA``), reading ``source``.

    ``sink``: the Kafka topic written, or for ``DELTA`` the Delta table's path. ``bounded``:
    end once the records there at the start are counted; ``emit_secs``: the count bolt's
    tick; ``checkpoint_secs``: the checkpoint interval (effectively-once only).
    """
    delta = mode == DELTA
    mode = "effectively-once" if delta else mode
    builder = TopologyBuilder(name)
    lines = builder.add_spout("kafka", KafkaSpout, par=SPOUTS, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": source,
        "kafka.group.id": f"{name}-{uuid.uuid4().hex[:6]}", "kafka.bounded": bounded})
    words = builder.add_bolt("split", SplitBolt, par=SPLITTERS,
                             inputs={lines: Grouping.SHUFFLE})
    counter = StatefulCountBolt if mode == "effectively-once" else CountBolt
    counts = builder.add_bolt("count", counter, par=COUNTERS,
                              inputs={words: Grouping.fields("word")},
                              config={"topology.tick.tuple.freq.secs": emit_secs})
    if delta:
        builder.add_bolt("out", DeltaSink, par=1, inputs={counts: Grouping.SHUFFLE},
                         config={"delta.path": sink})
    else:
        builder.add_bolt("out", KafkaSink, par=1, inputs={counts: Grouping.SHUFFLE},
                         config={"kafka.bootstrap.servers": servers, "kafka.topic": sink})
    builder.set_config({"topology.reliability.mode": MODES[mode],
                        "topology.stmgrs": CONTAINERS,
                        "topology.stateful.checkpoint.interval.seconds": checkpoint_secs})
    return builder.build()


# ---- Spark Structured Streaming --------------------------------------------------------------
def spark_query(session, servers: str, source: str, sink: str, checkpoint: str, trigger: dict):
    """Start Spark's word count from ``source`` to ``sink``; return the ``StreamingQuery``.

    ``trigger``: the keyword arguments of ``DataStreamWriter.trigger``.
    """
    from pyspark.sql import functions as fn

    records = (session.readStream.format("kafka").option("kafka.bootstrap.servers", servers)
               .option("subscribe", source).option("startingOffsets", "earliest").load())
    words = records.select(fn.explode(fn.split(fn.col("value").cast("string"), " ")).alias("word"),
                           "timestamp")
    counts = words.groupBy("word").agg(fn.count("*").alias("n"), fn.max("timestamp").alias("newest"))
    out = counts.select(fn.col("word").alias("key"), fn.concat_ws(
        "|", fn.col("n").cast("string"), fn.unix_millis("newest").cast("string")).alias("value"))
    return (out.writeStream.format("kafka").option("kafka.bootstrap.servers", servers)
            .option("topic", sink).option("checkpointLocation", checkpoint)
            .outputMode("update").trigger(**trigger).start())


# ---- Kafka in and out ------------------------------------------------------------------------
# The paced producer's linger: librdkafka's default, what a user's producer has. (0 sends a
# request per poll: at 20,000 records/s it cost the broker about one of the two cores.)
LINGER_MS = 5


def produce_lines(servers: str, topic: str, lines, partitions: int) -> None:
    """Produce ``lines`` (str) to ``topic`` round-robin over ``partitions``, as fast as it goes."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20,
                         "batch.num.messages": 10_000, "queue.buffering.max.messages": 500_000})
    for i, line in enumerate(lines):
        while True:
            try:
                producer.produce(topic, line.encode(), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 9_999:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"records left unsent to {topic!r} after 120 s")


def produce_paced(servers: str, topic: str, lines: list[str], partitions: int,
                  rate: float) -> tuple[list[int], float]:
    """Produce ``lines`` at ``rate`` records/s, each stamped with its produce time (ms).

    Return the stamps (in ``lines``' order) and the seconds the producing took. Records due
    are sent every millisecond; a stamp is the time of its ``produce`` call, the Kafka
    timestamp of the record.
    """
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": LINGER_MS})
    stamps: list[int] = []
    started = time.monotonic()
    sent = 0
    while sent < len(lines):
        due = min(len(lines), int((time.monotonic() - started) * rate) + 1)
        while sent < due:
            now_ms = int(time.time() * 1000)
            try:
                producer.produce(topic, lines[sent].encode(), partition=sent % partitions,
                                 timestamp=now_ms)
            except BufferError:
                producer.poll(0.01)
                continue
            stamps.append(now_ms)
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    took = time.monotonic() - started
    if producer.flush(60):
        raise RuntimeError(f"paced records left unsent to {topic!r} after 60 s")
    return stamps, took


def parse_update(message) -> tuple[str, int, int]:
    """Return ``(word, count, newest ts ms)`` of a sink record."""
    count, newest = message.value().split(b"|")
    return message.key().decode(), int(count), int(newest)


def final_counts(messages) -> collections.Counter:
    """Each word's final count: the largest count written for it."""
    counts: collections.Counter = collections.Counter()
    for message in messages:
        word, count, _ = parse_update(message)
        counts[word] = max(counts[word], count)
    return counts


def mismatch(got: collections.Counter, want: collections.Counter) -> str:
    """Describe how ``got`` differs from ``want`` ('' when equal)."""
    if got == want:
        return ""
    wrong = [w for w in want.keys() | got.keys() if got[w] != want[w]]
    sample = ", ".join(f"{w}: {got[w]} not {want[w]}" for w in sorted(wrong)[:5])
    return (f"{len(wrong)} of {len(want)} words counted wrong ({sample}); "
            f"{sum(got.values()):,} words counted, {sum(want.values()):,} in the input")


class _UpdateReader:
    """Follow a sink's count updates in a thread, stamping each as it arrives.

    ``updates``: ``(word, count, newest, received ms)`` in arrival order; ``counts``: each
    word's largest count so far; ``done`` is set once the counts equal ``want``. A subclass
    reads in ``_loop``, passing every update to ``_note``, until ``_finished()``.
    """

    def __init__(self, name: str, want: collections.Counter) -> None:
        self.want = want
        self.updates: list[tuple[str, int, int, float]] = []
        self.counts: collections.Counter = collections.Counter()
        self.done = threading.Event()
        self._stop = threading.Event()
        self._wrong = len(want)  # words whose count is not yet the wanted one
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.error: BaseException | None = None

    def start(self):
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            self._loop()
            if not self._wrong:
                self.done.set()
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def _loop(self) -> None:
        raise NotImplementedError

    def _finished(self) -> bool:
        return self._stop.is_set() or not self._wrong

    def _note(self, word: str, count: int, newest: int, received: float) -> None:
        self.updates.append((word, count, newest, received))
        before = self.counts[word]
        if count > before:
            self.counts[word] = count
            wanted = self.want[word]
            self._wrong += (count == wanted) * -1 + (before == wanted) * 1

    def _source(self) -> str:
        raise NotImplementedError

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        if self.error is not None:
            raise RuntimeError(f"reading {self._source()} failed: {self.error}") from self.error


class SinkReader(_UpdateReader):
    """Read a sink topic (one partition) with ``read_committed``, stamping arrivals."""

    def __init__(self, servers: str, topic: str, want: collections.Counter) -> None:
        super().__init__("sink-reader", want)
        self.servers, self.topic = servers, topic

    def _source(self) -> str:
        return repr(self.topic)

    def _loop(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.servers, "group.id": f"r-{uuid.uuid4()}",
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "fetch.wait.max.ms": 5})
        consumer.assign([TopicPartition(self.topic, 0, 0)])
        try:
            while not self._finished():
                messages = consumer.consume(1000, 0.05)
                received = time.time() * 1000.0
                for message in messages:
                    if message.error() is None:
                        self._note(*parse_update(message), received)
        finally:
            consumer.close()


class DeltaReader(_UpdateReader):
    """Follow a Delta table of ``key``, ``value`` updates as versions commit.

    ``received`` is the time the reader found the version's ``_delta_log`` entry (polled every
    ``poll_secs``; the entry appears whole: delta-rs writes it with an atomic put-if-absent);
    ``versions`` maps each version read to ``(seen ms, its commitInfo timestamp ms)``. A table
    path, not a URI: the reader lists files.
    """

    def __init__(self, path: str | Path, want: collections.Counter,
                 poll_secs: float = 0.005) -> None:
        super().__init__("delta-reader", want)
        self.path, self.poll_secs = Path(path), poll_secs
        self.versions: dict[int, tuple[float, int | None]] = {}

    def _source(self) -> str:
        return f"the Delta table {os.fspath(self.path)!r}"

    def _loop(self) -> None:
        version = 0
        while not self._finished():
            entry = self.path / "_delta_log" / f"{version:020d}.json"
            try:
                text = entry.read_text()
            except FileNotFoundError:
                time.sleep(self.poll_secs)
                continue
            self._read_version(version, text, time.time() * 1000.0)
            version += 1

    def _read_version(self, version: int, text: str, seen: float) -> None:
        import pyarrow.parquet as pq

        committed = None
        for line in text.splitlines():
            action = json.loads(line) if line.strip() else {}
            if "commitInfo" in action:
                committed = action["commitInfo"].get("timestamp")
            if "add" not in action:
                continue
            rows = pq.read_table(self.path / urllib.parse.unquote(action["add"]["path"]),
                                 columns=["key", "value"]).to_pydict()
            for word, value in zip(rows["key"], rows["value"]):
                count, newest = value.split("|")
                self._note(word, int(count), int(newest), seen)
        self.versions[version] = (seen, committed)


def delta_final_counts(path: str | Path) -> tuple[collections.Counter, int, int]:
    """Return a Delta table's final counts (each word's largest), its rows and its versions.

    Read with ``deltalake``, independently of ``DeltaReader``.
    """
    from deltalake import DeltaTable

    table = DeltaTable(os.fspath(path))
    rows = table.to_pyarrow_table(columns=["key", "value"]).to_pydict()
    counts: collections.Counter = collections.Counter()
    for word, value in zip(rows["key"], rows["value"]):
        counts[word] = max(counts[word], int(value.split("|")[0]))
    return counts, len(rows["key"]), table.version() + 1


def latencies(lines: list[str], stamps: list[int], updates,
              after_ms: float) -> list[tuple[int, float]]:
    """Return ``(produce stamp, latency ms)`` per word of the records stamped ``after_ms`` or later.

    The latency is from the record's produce to the first update that counts the word reaching
    the reader; the pairs are in produce order.

    The k-th occurrence of a word (in produce order, stamp ``t``) is visible with the first
    update of that word received whose count is at least k and whose newest timestamp is at
    least t: both hold for the update that counts it when records are counted in produce
    order, and otherwise the estimate is late, never early.
    """
    seen: dict[str, list[tuple[int, int, float]]] = collections.defaultdict(list)
    for word, count, newest, received in updates:
        seen[word].append((count, newest, received))
    counts_of = {w: [u[0] for u in ups] for w, ups in seen.items()}
    newest_of = {w: [u[1] for u in ups] for w, ups in seen.items()}
    # counts and newest only grow per word on the sink topic (one writer task per word)
    occurrence: collections.Counter = collections.Counter()
    out: list[tuple[int, float]] = []
    for line, stamp in sorted(zip(lines, stamps), key=lambda pair: pair[1]):
        for word in line.split():
            occurrence[word] += 1
            if stamp < after_ms:
                continue
            ups = seen.get(word)
            if not ups:
                continue
            first = max(bisect.bisect_left(counts_of[word], occurrence[word]),
                        bisect.bisect_left(newest_of[word], stamp))
            if first < len(ups):
                out.append((stamp, ups[first][2] - stamp))
    return out
