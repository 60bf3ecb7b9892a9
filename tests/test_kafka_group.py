"""KafkaSpout in group mode (``kafka.assignment: 'group'``) against a real Apache Kafka broker.

- default tier (in-process engine): two spout tasks subscribe to a 4-partition topic; Kafka's
  cooperative-sticky rebalancing splits the partitions between them (both emit records), every
  record is emitted exactly once when nothing fails, and the group's committed offsets reach
  the ends; the config key is checked, and group mode is refused under effectively once.
- ``fault`` (Spark, real processes): at-least-once word count with a ``kill -9`` of a spout
  instance: its partitions go to the surviving task once the group's session times out, the
  restarted instance joins again, every input word is counted at least once and every offset is
  committed in the end.
- ``spark``: ``update`` of the spout's parallelism from 1 to 3 in group mode: the old
  generation leaves the group, the new tasks share the partitions, nothing is lost.
"""

from __future__ import annotations

import time

import pytest

import fault_support as faults
import kafka_support
import kafka_word_count as kwc
from heron_spark import Grouping, TopologyBuilder, TopologyValueError
from heron_spark.io import KafkaSpout
from heron_spark.testing import CollectingBolt, run_local, wait_until

TIMEOUT = 120
PARTITIONS = 4
# A quick group for tests: a killed member is dropped after 6 s (the broker's minimum), members
# hear of a rebalance within 100 ms, and a joining member has the topic's metadata within 100 ms
# (with librdkafka's refresh interval a join waits 1-3 s for it).
FAST_GROUP = {"kafka.properties": {"session.timeout.ms": 6000, "heartbeat.interval.ms": 100,
                                   "topic.metadata.refresh.interval.ms": 100}}


class SlowCollectingBolt(CollectingBolt):
    """A ``CollectingBolt`` taking 1 ms a tuple: reading lasts past the first rebalance."""

    def process(self, tup) -> None:
        time.sleep(0.001)
        super().process(tup)


def _group_spout_topology(name: str, servers: str, topic: str, group: str, **config):
    builder = TopologyBuilder(name)
    spout = builder.add_spout("kafka", KafkaSpout, par=2, config={
        "kafka.bootstrap.servers": servers, "kafka.topics": topic, "kafka.group.id": group,
        "kafka.assignment": "group", **FAST_GROUP, **config})
    builder.add_bolt("collect", SlowCollectingBolt, par=1, inputs={spout: Grouping.SHUFFLE},
                     config={"topology.bolt.auto.ack": True})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE",
                        "topology.max.spout.pending": 20})
    return builder.build()


def test_two_tasks_share_the_partitions_and_emit_every_record_once(kafka, tmp_path):
    topic = kafka.create_topic(PARTITIONS)
    records = [b"r%d" % i for i in range(800)]
    kafka.produce(topic, records, PARTITIONS)
    run = run_local(_group_spout_topology("kafka-group", kafka.servers, topic, "grp",
                                          **{"kafka.bounded": True,
                                             "kafka.max.records.per.call": 5}),
                    timeout=TIMEOUT, collect_dir=tmp_path / "collect",
                    conf={"heron.instance.restart.max": 1})
    assert run.status == "FINISHED"
    got = run.collected("collect")
    assert sorted(c.values[1] for c in got) == sorted(records)  # each exactly once
    assert kafka.committed("grp", topic, PARTITIONS) == kafka.ends(topic, PARTITIONS)
    read_by: dict[int, set[int]] = {}  # spout task -> the partitions it emitted records of
    for c in got:
        read_by.setdefault(c.source_task, set()).add(c.values[3])
    assert len(read_by) == 2, read_by  # the group gave both tasks partitions, both read them
    assert set().union(*read_by.values()) == set(range(PARTITIONS))


def test_an_unknown_assignment_is_refused_naming_component_value_and_fix():
    with pytest.raises(TopologyValueError) as info:
        KafkaSpout.spec(name="kafka", config={
            "kafka.bootstrap.servers": "127.0.0.1:9092", "kafka.topics": "t",
            "kafka.group.id": "g", "kafka.assignment": "dynamic"})
    assert info.value.component == "kafka" and info.value.value == "dynamic"
    assert "'static'" in str(info.value) and "'group'" in str(info.value)


def test_group_assignment_is_refused_under_effectively_once_before_anything_starts(tmp_path):
    builder = TopologyBuilder("kafka-group-eo")
    spout = builder.add_spout("lines", KafkaSpout, par=2, config={
        "kafka.bootstrap.servers": "127.0.0.1:1", "kafka.topics": "t", "kafka.group.id": "g",
        "kafka.assignment": "group"})
    builder.add_bolt("collect", CollectingBolt, par=1, inputs={spout: Grouping.SHUFFLE})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE"})
    with pytest.raises(TopologyValueError) as info:
        run_local(builder.build(), timeout=10, collect_dir=tmp_path)
    assert info.value.component == "lines" and info.value.value == "group"
    assert "'static'" in str(info.value.fix)


def _all_committed(kafka, group, topic):
    return kafka.committed(group, topic, PARTITIONS) == kafka.ends(topic, PARTITIONS)


def _reads(work) -> dict[int, list[int]]:
    """Return ``{spout task id: the partitions its last assignment log line names}``."""
    held = {}
    for log in work.glob("gen-*/container-*/logs/instance-kafka-*.log"):
        lines = [line for line in log.read_text(errors="replace").splitlines()
                 if "KafkaSpout kafka task" in line and "; reads [" in line]
        if lines:
            named = lines[-1].rsplit("; reads ", 1)[1]
            held[int(log.name.split("-")[-1].split(".")[0])] = [
                int(part.split(")")[0]) for part in named.split(", ")[1::2]]
    return held


@pytest.mark.fault
def test_group_mode_at_least_once_survives_a_killed_spout_instance(spark, kafka, tmp_path,
                                                                   hconf):
    name = "kafka-group-kill"
    source, sink = kafka.create_topic(PARTITIONS), kafka.create_topic(2)
    kafka.produce(source, [line.encode() for line in kwc.lines(2000)], PARTITIONS)
    topology = kwc.build(name, kafka.servers, source, sink, group="gkill", config={
        "topology.stmgrs": 2, "topology.message.timeout.secs": 4,
        "topology.max.spout.pending": 50, kwc.SLEEP_MS: 5},
        spout_config={"kafka.assignment": "group", **FAST_GROUP})
    want = kwc.expected(kafka.read(source, PARTITIONS, lambda got: len(got) >= 2000))
    handle = kafka_support.submit_running(spark, hconf, topology)
    work = tmp_path / "work" / name
    try:
        # once both tasks hold partitions (the group split them), kill the task holding the
        # partition with the most left to read (at least 100 records)
        ends = kafka.ends(source, PARTITIONS)

        def busiest():
            held = _reads(work)
            done = kafka.committed("gkill", source, PARTITIONS)
            left = {t: max((ends[p] - max(done[p], 0) for p in held[t]), default=0)
                    for t in held}
            if len([t for t in held if held[t]]) < 2 or max(left.values()) < 100:
                return None
            return max(left, key=left.__getitem__)

        kafka.read(sink, 2, lambda got: len(got) >= 300, timeout=TIMEOUT)  # records flow
        task = wait_until(busiest, 60, message="both spout tasks holding partitions, one "
                          "with at least 100 records left")
        victim = next(pid for pid in faults.find(work, "instance", component="kafka")
                      if faults.task_of(pid) == task)
        faults.kill9(victim)
        wait_until(lambda: len([p for p in faults.find(work, "instance", component="kafka")
                                if p != victim]) == 2, 60,
                   message="the killed spout instance to be restarted")
        out = kafka.read(sink, 2, lambda got: kwc.seen(got) >= want, timeout=TIMEOUT)
        wait_until(lambda: _all_committed(kafka, "gkill", source), 60,
                   message="every input offset to be committed")
        failures = handle.status_detail()["instance_failures"]
    finally:
        handle.kill()
    assert kwc.seen(out) == want  # every word of every record, nothing else
    assert len(out) >= len(want)  # duplicates allowed (at-least-once)
    assert sum(failures.values()) >= 1
    print(f"{len(out) - len(want)} word records written more than once")


@pytest.mark.spark
def test_update_of_a_group_spouts_parallelism_loses_nothing(spark, kafka, tmp_path, hconf):
    source, sink = kafka.create_topic(PARTITIONS), kafka.create_topic(2)
    kafka.produce(source, [line.encode() for line in kwc.lines(200)], PARTITIONS)
    topology = kwc.build("kafka-group-update", kafka.servers, source, sink, group="gupdate",
                         spouts=1, config={"topology.stmgrs": 2},
                         spout_config={"kafka.assignment": "group", **FAST_GROUP})
    handle = kafka_support.submit_running(spark, hconf, topology)
    try:
        first = kwc.expected(kafka.read(source, PARTITIONS, lambda got: len(got) >= 200))
        kafka.read(sink, 2, lambda got: kwc.seen(got) >= first, timeout=TIMEOUT)
        handle.update({"kafka": 3})
        kafka.produce(source, [line.encode() for line in kwc.lines(200, start=200)], PARTITIONS)
        every = kwc.expected(kafka.read(source, PARTITIONS, lambda got: len(got) >= 400))
        out = kafka.read(sink, 2, lambda got: kwc.seen(got) >= every, timeout=TIMEOUT)
        wait_until(lambda: _all_committed(kafka, "gupdate", source), 60,
                   message="every input offset to be committed after the update")
        spouts = [i for i in handle.physical_plan.instances if i.component == "kafka"]
    finally:
        handle.kill()
    assert len(spouts) == 3
    assert kwc.seen(out) == every  # the new tasks took every partition over
    print(f"{len(out) - len(every)} words written twice")
