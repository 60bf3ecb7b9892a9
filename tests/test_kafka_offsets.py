"""The Kafka spout's I/O-free parts: offsets safe to commit, partitions per task, config checks."""

from __future__ import annotations

import pytest

from heron_spark import ExtrasError, TopologyBuilder, TopologyValueError
from heron_spark.io import KafkaSink, KafkaSpout, kafka_config
from heron_spark.io.kafka_offsets import (OffsetTracker, assign_partitions, parse_state_key,
                                          state_key)
from heron_spark.io.kafka_sink import encode, field_positions

TP = ("lines", 0)


def test_commit_waits_for_every_record_below_it():
    tracker = OffsetTracker()
    tracker.assign(TP, 10)
    for offset in (10, 11, 12, 13):
        assert tracker.emitted(TP, offset)
    assert tracker.to_commit() == {}  # nothing acked: still 10, unchanged
    tracker.acked(TP, 11)
    tracker.acked(TP, 12)
    assert tracker.safe_offset(TP) == 10  # 10 is pending
    tracker.acked(TP, 10)
    assert tracker.to_commit() == {TP: 13}
    assert tracker.to_commit() == {}  # unchanged since
    tracker.acked(TP, 13)
    assert tracker.to_commit() == {TP: 14}
    assert tracker.pending_count() == 0


def test_a_failed_record_holds_the_commit_until_its_replay_is_acked():
    tracker = OffsetTracker()
    tracker.assign(TP, 0)
    for offset in range(5):
        tracker.emitted(TP, offset)
    for offset in (0, 1, 3, 4):
        tracker.acked(TP, offset)
    assert tracker.is_pending(TP, 2) and tracker.safe_offset(TP) == 2  # 2 failed: replayed
    tracker.acked(TP, 2)
    assert tracker.safe_offset(TP) == 5


def test_unreliable_emits_commit_as_they_go_and_stale_records_are_not_ours():
    tracker = OffsetTracker()
    tracker.assign(TP, 7)
    assert not tracker.emitted(TP, 6, reliable=False)  # before the seek position
    assert not tracker.emitted(("other", 0), 0)        # not assigned to this task
    assert tracker.emitted(TP, 7, reliable=False)
    assert tracker.to_commit() == {TP: 8}


def test_a_failed_commit_is_sent_again():
    tracker = OffsetTracker()
    tracker.assign(TP, 0)
    tracker.emitted(TP, 0, reliable=False)
    assert tracker.to_commit() == {TP: 1}
    tracker.forget_commits()
    assert tracker.to_commit() == {TP: 1}


def test_each_assignment_of_a_partition_has_a_new_generation():
    # a record id carries it: an ack from before a revoke cannot ack the same offset re-emitted
    tracker = OffsetTracker()
    tracker.assign(TP, 0)
    first = tracker.generation(TP)
    tracker.emitted(TP, 0)
    tracker.revoke(TP)
    assert TP not in tracker and tracker.pending_count() == 0
    tracker.assign(TP, 0)
    assert tracker.generation(TP) != first and tracker.emitted(TP, 0)


def test_group_consumers_rebalance_cooperatively_and_refresh_metadata():
    config = kafka_config.spout_settings({
        "kafka.bootstrap.servers": "h:1", "kafka.group.id": "g", "kafka.topics": "t",
        "kafka.assignment": " Group ", "kafka.metadata.refresh.secs": 2})
    assert config["kafka.assignment"] == "group"
    consumer = kafka_config.consumer_properties(config)
    assert consumer["partition.assignment.strategy"] == "cooperative-sticky"
    assert consumer["topic.metadata.refresh.interval.ms"] == 2000
    static = kafka_config.consumer_properties({**config, "kafka.assignment": "static"})
    assert "partition.assignment.strategy" not in static


def test_partitions_have_exactly_one_owner_at_any_parallelism():
    partitions = [("b", 1), ("a", 0), ("a", 1), ("b", 0), ("a", 2)]
    for tasks in (1, 2, 3, 5, 7):
        owned = [tp for index in range(tasks) for tp in assign_partitions(partitions, index, tasks)]
        assert sorted(owned) == sorted(partitions)
    assert assign_partitions(partitions, 1, 2) == [("a", 1), ("b", 0)]  # stable: sorted order
    with pytest.raises(ValueError):
        assign_partitions(partitions, 2, 2)


def test_state_keys_round_trip_topic_names_with_colons():
    assert parse_state_key(state_key(("ns:lines", 3))) == ("ns:lines", 3)


def test_sink_encodes_and_picks_value_and_key_fields():
    assert encode("héllo") == "héllo".encode() and encode(b"\x00") == b"\x00"
    assert encode(None) is None and encode(12) == b"12"
    assert field_positions(("key", "value")) == (1, 0)
    assert field_positions(("word", "count")) == (0, None)
    assert field_positions(("count", "value", "extra")) == (1, None)


def _builder():
    return TopologyBuilder("kafka-config")


@pytest.mark.parametrize("config, key", [
    ({"kafka.topics": "lines", "kafka.group.id": "g"}, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.topics": "lines"}, "kafka.group.id"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.group.id": "g"}, "kafka.topics"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.group.id": "g", "kafka.topics": "a",
      "kafka.pattern": "a.*"}, "kafka.topics"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.group.id": "g", "kafka.pattern": "("},
     "kafka.pattern"),
    ({"kafka.bootstrap.servers": "h:1", "kafka.group.id": "g", "kafka.topics": "a",
      "kafka.properties": "acks=all"}, "kafka.properties"),
])
def test_spout_config_is_checked_when_the_topology_is_built(config, key):
    with pytest.raises(TopologyValueError) as info:
        _builder().add_spout("kafka", KafkaSpout, par=1, config=config)
    assert info.value.component == "kafka" and key in str(info.value)


def test_sink_config_is_checked_and_gets_a_tick_for_delivery_reports():
    builder = _builder()
    src = builder.add_spout("kafka", KafkaSpout, par=1, config={
        "kafka.bootstrap.servers": "h:1", "kafka.topics": ["a", "b"], "kafka.group.id": "g"})
    with pytest.raises(TopologyValueError) as info:
        builder.add_bolt("k", KafkaSink, par=1, inputs={src: "shuffle"},
                         config={"kafka.bootstrap.servers": "h:1"})
    assert info.value.component == "k" and "kafka.topic" in str(info.value)
    spec = KafkaSink.spec(name="k", inputs={}, config={"kafka.bootstrap.servers": "h:1",
                                                       "kafka.topic": "out"})
    assert spec.custom_config["topology.tick.tuple.freq.secs"] == 0.1


def test_clients_default_to_low_latency_and_kafka_properties_override():
    config = {"kafka.bootstrap.servers": "h:1", "kafka.group.id": "g"}
    consumer = kafka_config.consumer_properties(config)
    assert consumer["fetch.wait.max.ms"] == 10 and consumer["group.id"] == "g"
    assert consumer["enable.auto.commit"] is False
    assert kafka_config.producer_properties(config) == {
        "bootstrap.servers": "h:1", "acks": "all", "linger.ms": 5}
    config["kafka.properties"] = {"fetch.wait.max.ms": 500, "linger.ms": 20}
    assert kafka_config.consumer_properties(config)["fetch.wait.max.ms"] == 500
    assert kafka_config.producer_properties(config)["linger.ms"] == 20
    spout = kafka_config.spout_settings({**config, "kafka.topics": "t"})
    assert spout["kafka.poll.timeout.ms"] == 5


def test_decoder_fields_become_the_spouts_output():
    spec = KafkaSpout.spec(name="kafka", config={
        "kafka.bootstrap.servers": "h:1", "kafka.topics": "a", "kafka.group.id": "g",
        "kafka.decoder": lambda key, value, *rest: (value.decode(),),
        "kafka.output.fields": ["line"]})
    assert [list(s.fields) for s in spec.outputs] == [["line"]]
    assert list(KafkaSpout.spec(name="k2", config={
        "kafka.bootstrap.servers": "h:1", "kafka.topics": "a",
        "kafka.group.id": "g"}).outputs[0].fields) == list(kafka_config.SPOUT_FIELDS)


def test_missing_client_package_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # import fails as if absent
    with pytest.raises(ExtrasError) as info:
        kafka_config.client()
    assert info.value.extra == "kafka" and "heron_spark[kafka]" in str(info.value)


def test_importing_heron_spark_does_not_need_the_kafka_client():
    import subprocess
    import sys

    code = ("import sys; sys.modules['confluent_kafka'] = None; import heron_spark; "
            "from heron_spark.io import KafkaSpout, KafkaSink; "
            "assert 'confluent_kafka' not in {k for k, v in sys.modules.items() if v}")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
