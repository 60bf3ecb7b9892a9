"""Fault tests: real processes killed with ``kill -9`` while a word count runs.

At-least-once (``reliable_word_count`` on ``local[4]``, two containers): a random bolt
instance killed three times, a whole container (the barrier task's Python worker) killed (a
stmgr killed: ``test_session_parity.py``, on both session kinds). Each run must finish with
counts >= the exact counts for every word, exactly the exact counts after de-duplicating by
(line, word index), and every line acked: exactly once in the spouts' committed checkpoints,
at least once in their ack logs. At-most-once: a killed
count instance loses only tuples of its own words, nothing is replayed, and the loss is counted.
"""

from __future__ import annotations

import random

import pytest

import fault_support as faults
import reliable_word_count as rwc
from heron_spark.scheduler.submit import submit
from heron_spark.testing import wait_until

pytestmark = pytest.mark.fault

TIMEOUT = 240
SPOUTS = 2
FAULT_CONF = {"topology.message.timeout.secs": 4, "topology.max.spout.pending": 300,
              rwc.SLEEP_MS: 2}


def _start(spark, tmp_path, hconf, name, lines, **config):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "out"
    text = rwc.write_corpus(corpus, lines)
    topology = rwc.build(name, corpus, out, spouts=SPOUTS, config={**FAULT_CONF, **config})
    handle = submit(topology, spark=spark.session, conf=hconf, master="local[4]")
    handle.wait_running(timeout=120)
    return text, out, handle


def _progress(out) -> int:
    return sum(path.stat().st_size for path in out.glob("count-*.log"))


def _wait_progress(out, more_than: int, what: str) -> int:
    return wait_until(lambda: (_progress(out) > more_than) and _progress(out), 60, message=what)



def test_bolt_instances_killed_three_times(spark, tmp_path, hconf):
    name = "faults-bolts"
    text, out, handle = _start(spark, tmp_path, hconf, name, 3000)
    work = tmp_path / "work" / name
    rng = random.Random(3)
    killed = []
    seen = 0
    for _ in range(3):
        seen = _wait_progress(out, seen + 20_000, "the word count to make progress")
        victims = faults.find(work, "instance", component=rng.choice(["split", "count"]))
        pid = rng.choice(victims)
        task = faults.task_of(pid)
        faults.kill9(pid)
        killed.append(task)
        wait_until(lambda t=task, old=pid: [p for p in faults.find(work, "instance")
                                            if faults.task_of(p) == t and p != old], 60,
                   message=f"task {task} to be restarted")
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    replayed = rwc.check_exact(text, out, hconf["heron.statemgr"], name, SPOUTS)
    failures = handle.status_detail()["instance_failures"]
    assert sum(failures.values()) >= 3 and {int(t) for t in failures} == set(killed)
    print(f"killed tasks {killed}; {replayed} word records replayed")


def test_container_killed(spark, tmp_path, hconf):
    name = "faults-container"
    text, out, handle = _start(spark, tmp_path, hconf, name, 2500,
                               **{"heron.stage.resubmit.backoff.secs": 0.5})
    work = tmp_path / "work" / name
    _wait_progress(out, 30_000, "the word count to make progress")
    [stmgr] = faults.find(work, "stmgr", container=0)
    container = faults.parent_of(stmgr)  # the Spark Python worker running the barrier task
    faults.kill9(container)
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    assert handle.status_detail()["generation"] >= 1  # the stage was resubmitted
    replayed = rwc.check_exact(text, out, hconf["heron.statemgr"], name, SPOUTS)
    print(f"{replayed} word records replayed")


def test_at_most_once_kill_loses_only_the_killed_tasks_tuples(spark, tmp_path, hconf):
    name = "faults-amo"
    text, out, handle = _start(spark, tmp_path, hconf, name, 2500,
                               **{"topology.reliability.mode": "ATMOST_ONCE"})
    work = tmp_path / "work" / name
    _wait_progress(out, 30_000, "the word count to make progress")
    victim = faults.find(work, "instance", component="count")[0]
    task = faults.task_of(victim)
    faults.kill9(victim)
    assert handle.wait(timeout=TIMEOUT) == "FINISHED"
    raw, unique, records = rwc.read_counts(out)
    expected = rwc.expected_counts(text)
    assert records == sum(unique.values())  # nothing was replayed: no record twice
    lost = expected - unique
    victim_words = {line.split("\t")[2] for path in out.glob(f"count-{task}-*.log")
                    for line in path.read_text().splitlines()}
    assert set(lost) <= victim_words  # only the killed task's words went missing
    acks, fails = rwc.read_spout_log(out)
    assert not acks and not fails  # at-most-once: no acking, no replay
    dropped = handle.metrics()["__stmgr__"].get("__tuples-dropped", 0)
    assert dropped <= sum(lost.values())
    print(f"lost {sum(lost.values())} word tuples; the stmgrs counted {dropped:.0f} undeliverable")
