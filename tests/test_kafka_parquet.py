"""Kafka in -> word count -> Kafka AND Parquet out, in one topology on Spark (real processes).

- ``fault``, at-least-once: a 4-partition topic read by 2 spout tasks, split, counted (fields
  grouping), and the counts' stream subscribed by a ``KafkaSink`` and a ``ParquetSink`` at
  once. During the run ``kill -9`` hits a spout instance, each sink's instance and a stmgr.
  Every word of every input record then reaches both outputs: the output topic (consumed back)
  and the Parquet folder (read with ``spark.read.parquet``), each de-duplicated by the word's
  position in the input (at-least-once may repeat, never lose).
- ``fault``, effectively-once: a bounded Kafka spout -> split -> a stateful count emitting
  ``(word, count)`` on every update -> ``ParquetSink``. Each spout task stops after its first
  500 records until the test opens a gate (a file); once two checkpoints and two sink batches
  have committed, the test opens it and every process of container 1 is killed with
  ``kill -9``: the kill lands mid-run whatever the machine's speed. After the
  rollback and the end of input ``spark.read.parquet`` returns exactly one row per
  ``(word, n)`` for ``n`` in ``1..count(word)``: nothing lost, nothing twice.
"""

from __future__ import annotations

import collections
import os

import pytest

import fault_support as faults
import kafka_support
import kafka_word_count as kwc
from heron_spark import Bolt, Grouping, TopologyBuilder
from heron_spark.api.state import StatefulComponent
from heron_spark.io import KafkaSink, KafkaSpout, ParquetSink
from heron_spark.io.parquet_store import CommitLog
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until
from heron_spark.tracker.auth import tracker_token

TIMEOUT = 180
PARTITIONS = 4
# A checkpoint marker waits behind every tuple queued before it: short queues make it quick.
SHORT_QUEUES = {"heron.stmgr.backpressure.high.water.tuples": 100,
                "heron.stmgr.backpressure.low.water.tuples": 50}


# ---- at-least-once: both sinks on one stream ------------------------------------------------
def _build_both(name: str, servers: str, source: str, sink: str, out, config: dict):
    builder = TopologyBuilder(name)
    lines = builder.add_spout("kafka", KafkaSpout, par=2, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": source, "kafka.group.id": name})
    words = builder.add_bolt("split", kwc.SplitBolt, par=2, inputs={lines: Grouping.SHUFFLE})
    counts = builder.add_bolt("count", kwc.CountBolt, par=2,
                              inputs={words: Grouping.fields("word")})
    builder.add_bolt("out", KafkaSink, par=1, inputs={counts: Grouping.SHUFFLE},
                     config={"kafka.bootstrap.servers": servers, "kafka.topic": sink})
    builder.add_bolt("pq", ParquetSink, par=1, inputs={counts: Grouping.SHUFFLE},
                     config={"parquet.path": str(out), "parquet.roll.rows": 500})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE", **config})
    return builder.build()


def _lag_through_the_tracker(handle, hconf, name: str, source: str) -> dict:
    """The spout's ``__kafka-lag/<topic>/<partition>`` metrics, asked as the UI asks.

    The UI's components table fetches a spout's metrics with no ``metricname`` (every metric
    the component published: the lag's names are known only once published) and sums the
    ``__kafka-lag/`` ones into its "Kafka lag" column. Returns the lag metrics once every
    partition has one and all are 0 (everything read), else {}.
    """
    from test_tracker import Tracker

    with open_state_manager(hconf["heron.statemgr"]) as statemgr:
        tracker = Tracker(handle.tracker_url, tracker_token(statemgr))
    metrics = tracker.get("/topologies/metrics", topology=name, component="kafka",
                          interval=-1)["metrics"]
    lag = {metric: values for metric, values in metrics.items()
           if metric.startswith(f"__kafka-lag/{source}/") and values}
    if len(lag) < PARTITIONS or any(float(v) for vs in lag.values() for v in vs.values()):
        return {}
    return lag


def _parquet_seen(out) -> set[tuple[str, str]]:
    """``{(position, word)}`` in the committed files (pyarrow: cheap enough to poll)."""
    import pyarrow.parquet as pq

    found = set()
    for entry in CommitLog.open(str(out)).files():
        table = pq.read_table(entry.path.removeprefix("file://"))
        found.update((value.split("|", 1)[1], key) for key, value in
                     zip(table.column("key").to_pylist(), table.column("value").to_pylist()))
    return found


@pytest.mark.fault
def test_kafka_and_parquet_out_with_spout_sinks_and_stmgr_killed(spark, kafka, tmp_path, hconf):
    name = "kpq-faults"
    source, sink, out = kafka.create_topic(PARTITIONS), kafka.create_topic(2), tmp_path / "out"
    kafka.produce(source, [line.encode() for line in kwc.lines(1500)], PARTITIONS)
    want = kwc.expected(kafka.read(source, PARTITIONS, lambda got: len(got) >= 1500))
    topology = _build_both(name, kafka.servers, source, sink, out, {
        "topology.stmgrs": 2, "topology.message.timeout.secs": 4,
        "topology.max.spout.pending": 100, kwc.SLEEP_MS: 3})
    handle = kafka_support.submit_running(spark, hconf, topology)
    work = tmp_path / "work" / name
    try:
        for step, (role, component, container) in enumerate([
                ("instance", "kafka", None), ("instance", "out", None),
                ("instance", "pq", None), ("stmgr", None, 1)]):
            kafka.read(sink, 2, lambda got, more=800 * (step + 1): len(got) >= more,
                       timeout=TIMEOUT)
            [victim, *_] = faults.find(work, role, component=component, container=container)
            faults.kill9(victim)
            wait_until(lambda r=role, c=component, k=container, v=victim: [
                p for p in faults.find(work, r, component=c, container=k) if p != v], 60,
                message=f"the killed {role} {component or container} to be restarted")
        from_kafka = kafka.read(sink, 2, lambda got: kwc.seen(got) >= want, timeout=TIMEOUT)
        wait_until(lambda: _parquet_seen(out) >= want, TIMEOUT,
                   message="every input word in the committed Parquet files")
        wait_until(lambda: kafka.committed(name, source, PARTITIONS)
                   == kafka.ends(source, PARTITIONS), 90,
                   message="every input offset to be committed")
        lag = wait_until(lambda: _lag_through_the_tracker(handle, hconf, name, source), 60,
                         message="the spout's lag metric through the tracker")
        failures = handle.status_detail()["instance_failures"]
    finally:
        handle.kill()
    rows = spark.session.read.parquet(str(out)).collect()
    from_parquet = {(r["value"].split("|", 1)[1], r["key"]) for r in rows}
    assert kwc.seen(from_kafka) == want  # every word of every record, nothing else
    assert from_parquet == want
    assert len(rows) >= len(want) and len(from_kafka) >= len(want)  # repeats allowed
    assert sum(failures.values()) >= 3, failures  # spout, Kafka sink, Parquet sink
    assert set(lag) == {f"__kafka-lag/{source}/{p}" for p in range(PARTITIONS)}, lag
    print(f"repeated: {len(from_kafka) - len(want)} on Kafka, {len(rows) - len(want)} in "
          f"Parquet; instance failures {failures}")


# ---- effectively-once: stateful count into Parquet ------------------------------------------
class StatefulCountBolt(Bolt, StatefulComponent):
    """Count words in the checkpointed state; emit ``(word, count)`` on every update."""

    outputs = ["word", "count"]

    def init_state(self, stateful_state):
        self.counts = stateful_state

    def process(self, tup):
        word = tup.values[0]
        count = (self.counts.get(word) or 0) + 1
        self.counts.put(word, count)
        self.emit([word, count])


GATE = "test.gate.path"
BEFORE_GATE = 500


class GatedKafkaSpout(KafkaSpout):
    """A ``KafkaSpout`` whose tasks stop after ``BEFORE_GATE`` records until ``GATE`` exists.

    While it waits the topology drains and keeps checkpointing, so the test sees committed
    checkpoints before most of the input is read, however slow the machine: a timed margin
    (a sleep per line) lost that race on loaded CI runs, because a checkpoint marker queues
    behind everything the spout has already emitted.
    """

    def initialize(self, config, context):
        super().initialize(config, context)
        self.gate, self.records = config[GATE], 0

    def next_tuple(self):
        if self.records < BEFORE_GATE or os.path.exists(self.gate):
            super().next_tuple()

    def emit(self, tup, *args, **kwargs):
        self.records += 1
        return super().emit(tup, *args, **kwargs)


def _build_eo(name: str, servers: str, source: str, out, config: dict):
    builder = TopologyBuilder(name)
    lines = builder.add_spout("kafka", GatedKafkaSpout, par=2, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": source, "kafka.group.id": name,
        "kafka.bounded": True})
    words = builder.add_bolt("split", kwc.SplitBolt, par=2, inputs={lines: Grouping.SHUFFLE})
    counts = builder.add_bolt("count", StatefulCountBolt, par=2,
                              inputs={words: Grouping.fields("word")})
    builder.add_bolt("pq", ParquetSink, par=2, inputs={counts: Grouping.SHUFFLE},
                     config={"parquet.path": str(out)})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 0.5, **config})
    return builder.build()


@pytest.mark.fault
def test_effectively_once_parquet_exact_after_a_container_is_killed(spark, kafka, tmp_path,
                                                                   hconf):
    name = "kpq-eo"
    source, out = kafka.create_topic(PARTITIONS), tmp_path / "out"
    kafka.produce(source, [line.encode() for line in kwc.lines(3000)], PARTITIONS)
    totals = collections.Counter(word for m in kafka.read(source, PARTITIONS,
                                                          lambda got: len(got) >= 3000)
                                 for word in m.value().decode().split())
    expected = collections.Counter((word, n) for word, total in totals.items()
                                   for n in range(1, total + 1))
    gate = tmp_path / "gate"
    # 4 ms a line in each of 2 split tasks: the 2,000 lines behind the gate are at least 4 s of
    # work once it opens, while the kill takes milliseconds.
    topology = _build_eo(name, kafka.servers, source, out, {
        "topology.stmgrs": 2, kwc.SLEEP_MS: 4, GATE: str(gate), **SHORT_QUEUES})
    handle = kafka_support.submit_running(spark, hconf, topology)
    log = CommitLog.open(str(out))

    def committed() -> int:
        with open_state_manager(hconf["heron.statemgr"]) as statemgr:
            return int((statemgr.get_committed_checkpoint(name) or {}).get("id", 0))

    try:
        wait_until(lambda: committed() >= 2 and len(log.names()) >= 2, 120,
                   message="two committed checkpoints and two commits of the sink")
        work = tmp_path / "work" / name
        victims = faults.find(work, "instance", container=1) + \
            faults.find(work, "stmgr", container=1)
        assert len(victims) >= 2, victims
        assert handle.status == "RUNNING"  # the spouts wait at the gate: the topology cannot end
        gate.touch()
        for pid in victims:
            faults.kill9(pid)
        assert handle.wait(timeout=300) == "FINISHED", handle.status_detail()
        detail = handle.status_detail()
    finally:
        handle.kill()
    assert max(detail["checkpoint"]["restored_from"]) > 0, detail["checkpoint"]
    rows = spark.session.read.parquet(str(out)).collect()
    got = collections.Counter((r["word"], r["count"]) for r in rows)
    assert got == expected, (len(rows), sum(expected.values()), +(got - expected),
                             +(expected - got))
    print(f"victims {len(victims)}; sink batches {len(log.names())}; "
          f"checkpoint {detail['checkpoint']}; failures {detail['instance_failures']}")


# ---- the lag on the UI ----------------------------------------------------------------------
@pytest.mark.browser
def test_ui_components_table_shows_the_kafka_lag(spark, kafka, tmp_path, hconf):
    """The "Kafka lag" cell of the spout's row is the sum of its ``__kafka-lag/*`` metrics."""
    import urllib.parse

    import test_ui_browser as ui

    source, sink = kafka.create_topic(PARTITIONS), kafka.create_topic(1)
    kafka.produce(source, [line.encode() for line in kwc.lines(200)], PARTITIONS)
    name = "kpq-ui-lag"
    driver = ui._browser()
    handle = kafka_support.submit_running(
        spark, hconf, kwc.build(name, kafka.servers, source, sink, group=name))
    try:
        link = handle.ui_link()
        base = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(link))
        with open_state_manager(hconf["heron.statemgr"]) as statemgr:
            tracker = ui.Tracker(base, tracker_token(statemgr))
        driver.get(link)
        row = f'tr[data-topology="{name}"]'
        wait_until(lambda: ui._text(driver, f"{row} [data-state]") == "RUNNING", 30,
                   message="the topology in the list")
        ui._click(driver, f"{row} a")

        def api_lag() -> float | None:
            metrics = tracker.get("/topologies/metrics", topology=name, component="kafka",
                                  interval=ui.ALL_TIME)["metrics"]
            values = [float(v) for metric, per in metrics.items()
                      if metric.startswith("__kafka-lag/") for v in per.values()]
            return sum(values) if len(values) == PARTITIONS else None

        def shown() -> list[str]:
            return ui._attrs(driver, '#metrics-table tr[data-component="kafka"] '
                                     'td[data-metric="kafka-lag"]', "data-value")
        wait_until(lambda: api_lag() == 0, 90, message="every partition's lag at 0")
        wait_until(lambda: shown() == ["0"], 30, message="the table's Kafka lag cell at 0")
        assert "Kafka lag" in ui._text(driver, "#metrics-table thead")
        assert ui._attrs(driver, '#metrics-table tr[data-component="split"] '
                                 'td[data-metric="kafka-lag"]', "data-value") == [None]
        assert not ui._errors(driver)
    finally:
        handle.kill()
        driver.quit()
