"""Bad Kafka input: one clear error naming the component, the value and the fix.

Against a real Apache Kafka broker (``kafka`` tier), in process. A deterministic refusal (a
topic that does not exist, transactions the broker or the client refuses, a
``transactional.id`` another live producer took) is a permanent ``ConnectorError``: the run
fails at once, its task failed once though restarts were allowed. An unreachable broker is
transient: the task is restarted until ``heron.instance.restart.max`` runs out, and the final
error still names the servers and the fix. A ``transactional.id`` in ``kafka.properties`` is
refused where the topology is built.
"""

from __future__ import annotations

import threading

import pytest

import kafka_support
from heron_spark import (ConnectorError, Grouping, TopologyBuilder, TopologyRuntimeError,
                         TopologyValueError)
from heron_spark.inprocess import InProcessTopology
from heron_spark.io import KafkaSink, KafkaSpout
from heron_spark.io.kafka_sink import transactional_id
from heron_spark.testing import COLLECT_DIR, CollectingBolt, wait_until

TIMEOUT = 120
RESTART_MAX = 3  # a permanent refusal must not use them
CHECK = {"kafka.check.timeout.secs": 2}


def _fails(topology, tmp_path, restart_max: int = RESTART_MAX):
    """Run ``topology`` in process; return its error and the run (it must fail)."""
    run = InProcessTopology(topology, conf={"heron.work.dir": str(tmp_path / "work"),
                                            COLLECT_DIR: str(tmp_path / "collect"),
                                            "heron.instance.restart.max": restart_max})
    with pytest.raises(TopologyRuntimeError) as caught:
        run.run(timeout=TIMEOUT)
    assert run.status == "FAILED"
    return caught.value, run


def _failed_once(topology, tmp_path, component: str) -> str:
    """Assert the run fails at once on ``component``'s permanent ConnectorError; return it."""
    error, run = _fails(topology, tmp_path)
    assert error.component == component and error.permanent, str(error)
    tasks = [t for t, name in run.plan.task_component.items() if name == component]
    assert sum(run.failures[t] for t in tasks) == 1, run.failures  # not restart_max + 1
    assert "failed permanently" in run.detail
    message = str(error)
    assert "ConnectorError" in message and "Kafka:" in message and "Fix:" in message
    return message


def _spout_only(servers: str, name: str, **config):
    builder = TopologyBuilder(name)
    spout = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": servers, "kafka.group.id": name, **CHECK, **config})
    builder.add_bolt("collect", CollectingBolt, par=1, inputs={spout: Grouping.SHUFFLE},
                     config={"topology.bolt.auto.ack": True})
    return builder.build()


def _copy(servers: str, source: str, sink: str, name: str, *, bounded: bool = True,
          sink_config: dict | None = None, effectively_once: bool = True):
    builder = TopologyBuilder(name)
    spout = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": source, "kafka.group.id": name,
        "kafka.bounded": bounded, **CHECK})
    builder.add_bolt("out", KafkaSink, par=1, inputs={spout: Grouping.SHUFFLE}, config={
        "kafka.bootstrap.servers": servers, "kafka.topic": sink, **CHECK,
        **(sink_config or {})})
    builder.set_config({"topology.reliability.mode":
                        "EFFECTIVELY_ONCE" if effectively_once else "ATLEAST_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 0.1})
    return builder.build()


# ---- topics ---------------------------------------------------------------------------------
def test_a_spout_topic_that_does_not_exist_fails_at_once(kafka, tmp_path):
    message = _failed_once(_spout_only(kafka.servers, "err-topic",
                                       **{"kafka.topics": "no-such-topic"}), tmp_path, "kafka")
    assert "'no-such-topic'" in message and kafka.servers in message
    assert "create the topic" in message and "'kafka.topics'" in message


def test_a_pattern_that_matches_no_topic_fails_at_once(kafka, tmp_path):
    message = _failed_once(_spout_only(kafka.servers, "err-pattern",
                                       **{"kafka.pattern": "nothing-matches-.*"}),
                           tmp_path, "kafka")
    assert "'nothing-matches-.*'" in message and "'kafka.pattern'" in message


def test_a_sink_topic_that_does_not_exist_fails_at_once(kafka, tmp_path):
    source = kafka.create_topic(1)
    kafka.produce(source, [b"r"])
    message = _failed_once(_copy(kafka.servers, source, "missing-out", "err-sink-topic",
                                 effectively_once=False), tmp_path, "out")
    assert "'missing-out'" in message and "'kafka.topic'" in message


# ---- transactions ---------------------------------------------------------------------------
def test_transactions_the_broker_refuses_fail_at_once_naming_the_id_and_setting(kafka, tmp_path):
    """The broker refuses a transaction timeout above its transaction.max.timeout.ms."""
    source, sink = kafka.create_topic(1), kafka.create_topic(1)
    kafka.produce(source, [b"r"])
    message = _failed_once(_copy(kafka.servers, source, sink, "err-txn-broker", sink_config={
        "kafka.transactions": True,
        "kafka.properties": {"transaction.timeout.ms": 3_600_000}}), tmp_path, "out")
    assert repr(transactional_id("err-txn-broker", "out", 0)) in message
    assert "transaction.max.timeout.ms" in message and "'transaction.timeout.ms'" in message
    assert kafka.ends(sink, 1) == {0: 0}  # nothing was produced


def test_transactions_the_client_refuses_fail_at_once(kafka, tmp_path):
    source, sink = kafka.create_topic(1), kafka.create_topic(1)
    kafka.produce(source, [b"r"])
    message = _failed_once(_copy(kafka.servers, source, sink, "err-txn-client", sink_config={
        "kafka.transactions": True, "kafka.properties": {"enable.idempotence": False}}),
        tmp_path, "out")
    assert "enable.idempotence" in message and "'kafka.transactions'" in message


def test_a_transactional_id_another_producer_takes_fails_the_fenced_sink_at_once(kafka,
                                                                                 tmp_path):
    """Another process starts a producer with the sink's transactional.id while it runs."""
    from confluent_kafka import Producer

    source, sink = kafka.create_topic(1), kafka.create_topic(1)
    kafka.produce(source, [b"a%d" % i for i in range(20)])
    name = "err-fenced"
    txn_id = transactional_id(name, "out", 0)
    taken = threading.Event()
    problems: list[BaseException] = []
    other: list = []

    def take_over() -> None:
        try:  # once the sink committed a transaction, a second producer takes its id
            wait_until(lambda: kafka.committed(txn_id, sink, 1)[0] >= 0, TIMEOUT,
                       interval=0.1, message="the sink's first committed transaction")
            producer = Producer({"bootstrap.servers": kafka.servers, "transactional.id": txn_id})
            producer.init_transactions(60)
            other.append(producer)
            taken.set()
            kafka.produce(source, [b"b%d" % i for i in range(20)])  # the sink works on
        except BaseException as exc:  # noqa: BLE001 - re-raised by the test
            problems.append(exc)

    thread = threading.Thread(target=take_over, daemon=True)
    thread.start()
    try:
        message = _failed_once(_copy(kafka.servers, source, sink, name, bounded=False),
                               tmp_path, "out")
    finally:
        thread.join(TIMEOUT)
        while other:  # (no name left bound to it: the run's error holds this frame)
            other.pop().close()
    assert not problems, problems
    assert taken.is_set()
    assert repr(txn_id) in message and "fenced" in message
    assert "give each topology its own name" in message


def test_a_transactional_id_in_kafka_properties_is_refused_where_the_topology_is_built():
    builder = TopologyBuilder("err-txn-id")
    spout = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": "h:1", "kafka.topics": "in", "kafka.group.id": "g"})
    with pytest.raises(TopologyValueError) as caught:
        builder.add_bolt("out", KafkaSink, par=1, inputs={spout: Grouping.SHUFFLE}, config={
            "kafka.bootstrap.servers": "h:1", "kafka.topic": "t",
            "kafka.properties": {"transactional.id": "mine"}})
    assert (caught.value.component, caught.value.value) == ("out", "mine")
    assert "remove 'transactional.id'" in caught.value.fix


# ---- transient ------------------------------------------------------------------------------
def test_an_unreachable_broker_is_transient_retried_then_named(tmp_path):
    servers = f"127.0.0.1:{kafka_support.free_port()}"
    topology = _spout_only(servers, "err-no-broker", **{"kafka.topics": "lines",
                                                         "kafka.check.timeout.secs": 0.5})
    error, run = _fails(topology, tmp_path, restart_max=1)
    assert not error.permanent and error.component == "kafka"
    assert sum(run.failures.values()) == 2  # restarted once, then the budget ran out
    message = str(error)
    assert "ConnectorError" in message and servers in message
    assert "start the broker or correct 'kafka.bootstrap.servers'" in message


def test_connector_error_fields_and_message():
    error = ConnectorError("no topic named 't'", system="Kafka", component="out", value="t",
                           fix="create it", permanent=True)
    assert isinstance(error, RuntimeError) and error.code == "CONNECTOR"
    assert str(error) == "component 'out': Kafka: no topic named 't' (got 't'). Fix: create it"
    assert error.fields() == {"problem": "no topic named 't'", "system": "Kafka",
                              "component": "out", "value": "t", "fix": "create it",
                              "permanent": True}
