"""Kafka in -> word count -> Kafka out on Spark (real processes) against a real Apache Kafka broker.

- ``spark``: the topology is killed as a whole once its input is done and committed, more
  records are produced, and a resubmitted topology reads only those (from the committed
  offsets): the output holds every input word exactly once.
- ``spark``: ``update`` of the spout's parallelism from 1 to 3 while records arrive: the
  partitions are split anew by task index, each new owner starts at the group's committed
  offset, and every word reaches the output.
- ``fault``: at-least-once with ``kill -9`` of a spout instance, the sink instance and a stmgr
  while the run goes on: every input record's words reach the output topic (exactly, after
  de-duplicating by position), and every offset is committed in the end.
- ``fault``: effectively-once with Kafka transactions: a transaction commits while the
  topology runs (its checkpoint's mark shows in the sink's marker group); after a kill -9 of
  a count instance, of the sink's instance and of a container, a ``read_committed`` consumer
  and Spark's own Kafka source each see every count exactly once, and a ``read_uncommitted``
  consumer sees the aborted copies too.
"""

from __future__ import annotations

import collections

import pytest

import fault_support as faults
import kafka_support
import kafka_word_count as kwc
from heron_spark.testing import wait_until

TIMEOUT = 180
PARTITIONS = 4


def _all_committed(kafka, group, topic):
    return kafka.committed(group, topic, PARTITIONS) == kafka.ends(topic, PARTITIONS)


@pytest.mark.spark
def test_resubmitted_topology_resumes_from_committed_offsets(spark, kafka, tmp_path, hconf):
    source, sink = kafka.create_topic(PARTITIONS), kafka.create_topic(2)
    kafka.produce(source, [line.encode() for line in kwc.lines(400)], PARTITIONS)
    topology = kwc.build("kafka-resume", kafka.servers, source, sink, group="resume",
                         config={"topology.stmgrs": 2})
    handle = kafka_support.submit_running(spark, hconf, topology)
    try:
        want = kwc.expected(kafka.read(source, PARTITIONS, lambda got: len(got) >= 400))
        kafka.read(sink, 2, lambda got: kwc.seen(got) >= want, timeout=TIMEOUT)
        wait_until(lambda: _all_committed(kafka, "resume", source), 60,
                   message="every input offset to be committed")
    finally:
        handle.kill()
    kafka.produce(source, [line.encode() for line in kwc.lines(100, start=400)], PARTITIONS)
    handle = kafka_support.submit_running(spark, hconf, topology)
    try:
        every = kwc.expected(kafka.read(source, PARTITIONS, lambda got: len(got) >= 500))
        out = kafka.read(sink, 2, lambda got: kwc.seen(got) >= every, timeout=TIMEOUT)
        wait_until(lambda: _all_committed(kafka, "resume", source), 60,
                   message="every input offset to be committed")
        lag = wait_until(lambda: [name for name in handle.metrics().get("kafka", {})
                                  if name.startswith(f"__kafka-lag/{source}/")], 60,
                         message="the spout's lag metric")
    finally:
        handle.kill()
    assert kwc.seen(out) == every
    assert len(out) == len(every)  # nothing read twice: the second run began at the commits
    assert {name.rsplit("/", 1)[1] for name in lag} <= {str(p) for p in range(PARTITIONS)}


@pytest.mark.fault
def test_spout_sink_and_stmgr_killed_at_least_once(spark, kafka, tmp_path, hconf):
    name = "kafka-faults"
    source, sink = kafka.create_topic(PARTITIONS), kafka.create_topic(2)
    kafka.produce(source, [line.encode() for line in kwc.lines(1500)], PARTITIONS)
    topology = kwc.build(name, kafka.servers, source, sink, group="faults", config={
        "topology.stmgrs": 2, "topology.message.timeout.secs": 4,
        "topology.max.spout.pending": 100, kwc.SLEEP_MS: 3})
    want = kwc.expected(kafka.read(source, PARTITIONS, lambda got: len(got) >= 1500))
    handle = kafka_support.submit_running(spark, hconf, topology)
    work = tmp_path / "work" / name
    try:
        out: list = []

        def progress(more: int) -> None:
            kafka.read(sink, 2, lambda got: len(got) >= more, timeout=TIMEOUT)

        for step, (role, component, container) in enumerate([
                ("instance", "kafka", None), ("instance", "out", None), ("stmgr", None, 1)]):
            progress(1000 * (step + 1))
            victims = faults.find(work, role, component=component, container=container)
            assert victims, f"no {role} {component or ''} process to kill"
            victim = victims[0]
            faults.kill9(victim)
            wait_until(lambda r=role, c=component, k=container, v=victim: [
                p for p in faults.find(work, r, component=c, container=k) if p != v], 60,
                message=f"the killed {role} {component or container} to be restarted")
        out = kafka.read(sink, 2, lambda got: kwc.seen(got) >= want, timeout=TIMEOUT)
        wait_until(lambda: _all_committed(kafka, "faults", source), 90,
                   message="every input offset to be committed")
        failures = handle.status_detail()["instance_failures"]
    finally:
        handle.kill()
    assert kwc.seen(out) == want  # every word of every record, nothing else
    assert len(out) >= len(want)  # duplicates allowed (at-least-once)
    assert sum(failures.values()) >= 2
    print(f"{len(out) - len(want)} word records written more than once")


@pytest.mark.spark
def test_update_of_the_spouts_parallelism_moves_partitions_without_loss(spark, kafka, tmp_path,
                                                                       hconf):
    source, sink = kafka.create_topic(PARTITIONS), kafka.create_topic(2)
    kafka.produce(source, [line.encode() for line in kwc.lines(200)], PARTITIONS)
    topology = kwc.build("kafka-update", kafka.servers, source, sink, group="update", spouts=1,
                         config={"topology.stmgrs": 2})
    handle = kafka_support.submit_running(spark, hconf, topology)
    try:
        first = kwc.expected(kafka.read(source, PARTITIONS, lambda got: len(got) >= 200))
        kafka.read(sink, 2, lambda got: kwc.seen(got) >= first, timeout=TIMEOUT)
        handle.update({"kafka": 3})
        kafka.produce(source, [line.encode() for line in kwc.lines(200, start=200)], PARTITIONS)
        every = kwc.expected(kafka.read(source, PARTITIONS, lambda got: len(got) >= 400))
        out = kafka.read(sink, 2, lambda got: kwc.seen(got) >= every, timeout=TIMEOUT)
        wait_until(lambda: _all_committed(kafka, "update", source), 60,
                   message="every input offset to be committed after the update")
        spouts = [i for i in handle.physical_plan.instances if i.component == "kafka"]
    finally:
        handle.kill()
    assert len(spouts) == 3
    assert kwc.seen(out) == every  # every partition has an owner after the update
    print(f"{len(out) - len(every)} words written twice")


@pytest.mark.fault
def test_effectively_once_into_kafka_is_exact_through_kills_of_every_process_kind(
        spark, kafka, tmp_path, hconf):
    # EFFECTIVELY_ONCE with Kafka transactions, input in four waves. A wave's records follow
    # the marker of the transaction holding the wave before (one producer, one transaction at
    # a time), which the sink committed once the TMaster recorded its checkpoint committed.
    # Then: kill -9 of a count instance (every task rolls back; the sink, in its own process,
    # aborts what is not committed), of the sink's instance (a new producer, whose
    # init_transactions fences the dead one's and aborts its open transaction), and of a
    # container (the Spark Python worker running a barrier task: the stage is resubmitted).
    # Three readers check the output: a read_committed consumer and Spark's own Kafka source
    # with kafka.isolation.level=read_committed each see every count exactly once; a
    # read_uncommitted consumer sees the aborted copies too (so the check can fail).
    from heron_spark.io.kafka_sink import transactional_id
    from spark_readers import reader

    name = "kafka-eo-kills"
    source, sink = kafka.create_topic(PARTITIONS), kafka.create_topic(1)
    text = kwc.lines(1600)
    topology = kwc.build_running_counts(name, kafka.servers, source, sink, out=tmp_path,
                                        config={"heron.stage.resubmit.backoff.secs": 0.5})

    def wave(upto: int) -> None:
        kafka.produce(source, [line.encode() for line in text[upto - 400:upto]], PARTITIONS)
        want = set(kwc.running_counts_expected(text[:upto]))
        kafka.read(sink, 1, lambda m: kwc.pairs(m) >= want, timeout=TIMEOUT)

    handle = kafka_support.submit_running(spark, hconf, topology)
    work = tmp_path / "work" / name
    try:
        wave(400)
        # the commit marks its checkpoint in the group named like the transactional.id
        # (applied only when the transaction commits): the poll saw a committed checkpoint
        wait_until(lambda: kafka.committed(transactional_id(name, "out", 0), sink, 1)[0] >= 1,
                   TIMEOUT, message="a transaction committed while the topology runs")
        for upto, victim in ((800, "count"), (1200, "out"), (1600, "container")):
            if victim == "container":
                [stmgr] = faults.find(work, "stmgr", container=1)
                faults.kill9(faults.parent_of(stmgr))  # the barrier task's Python worker
            else:
                victims = faults.find(work, "instance", component=victim)
                assert victims, f"no {victim} instance to kill"
                faults.kill9(victims[0])
            wave(upto)
        failures = handle.status_detail()["instance_failures"]
        generation = handle.status_detail()["generation"]
        # every transaction the sink opened is ended once its checkpoint commits
        wait_until(lambda: len(kafka.read_to_end(sink, 1)) >= sum(
            kwc.running_counts_expected(text).values()), TIMEOUT,
            message="every count committed")
    finally:
        handle.kill()
    expected = kwc.running_counts_expected(text)
    committed = kafka.read_to_end(sink, 1)
    everything = kafka.read_to_end(sink, 1, isolation="read_uncommitted")
    spark_committed = reader("kafka", kafka.servers, sink, "read_committed")
    assert kwc.record_pairs(committed) == expected  # each count once, nothing else
    assert collections.Counter((r["key"], r["value"]) for r in spark_committed) == expected
    assert len(everything) > len(committed)  # aborted copies exist, and stay invisible
    assert set(kwc.record_pairs(everything)) == set(expected)
    assert sum(failures.values()) >= 2 and generation >= 1
    print(f"{len(everything) - len(committed)} aborted records; failures {failures}; "
          f"generation {generation}")


@pytest.mark.fault
def test_effectively_once_into_kafka_is_exact_after_the_driver_is_killed(kafka, tmp_path,
                                                                        hconf):
    """A driver (the TMaster) killed with kill -9 once a transaction has committed; a new
    driver resumes the topology from the state manager and finishes the bounded input: the
    read_committed output holds every count exactly once."""
    import json

    from heron_spark.io.kafka_sink import transactional_id

    name = "kafka-eo-driver"
    source, sink = kafka.create_topic(PARTITIONS), kafka.create_topic(1)
    text = kwc.lines(600)
    kafka.produce(source, [line.encode() for line in text], PARTITIONS)
    settings, out, work = tmp_path / "kafka.json", tmp_path / "out", tmp_path / "work"
    settings.write_text(json.dumps({"servers": kafka.servers, "source": source, "sink": sink}))
    args = [name, str(settings), str(out), hconf["heron.statemgr"], str(work)]
    _, log = faults.resume_after_driver_kill("kafka-eo", args, tmp_path, work, lambda: wait_until(
        lambda: kafka.committed(transactional_id(name, "out", 0), sink, 1)[0] >= 1, TIMEOUT,
        message="a transaction committed under the first driver"))
    assert "status FINISHED generation 1" in log
    committed = kafka.read_to_end(sink, 1)
    assert kwc.record_pairs(committed) == kwc.running_counts_expected(text)
    aborted = len(kafka.read_to_end(sink, 1, isolation="read_uncommitted")) - len(committed)
    print(f"{aborted} aborted records of the killed driver's run")
