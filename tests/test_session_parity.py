"""One test body per behaviour, run on a classic session and under Spark Connect.

As PySpark's Connect parity tests run the classic tests' bodies on a Connect session, each test
here runs twice (``connect_support.session_kinds``): on the tests' classic ``local[4]``
session, in the tier its classic run belongs to, and from a Spark Connect client process
against the ``connect_server`` fixture's server, in the ``connect`` tier. Both runs execute the
same scenario of ``connect_client.py`` and check the same JSON. A classic session puts the
TMaster in the driver (``auto``), Connect puts it in container 0; ``--tmaster-placement=container``
moves the classic one there too.
"""

from __future__ import annotations

import collections

import manage_topologies as mt
import pytest
import reliable_word_count as rwc
import state_source_topology as sst
from connect_support import session_kinds, wait_nothing_left

from heron_spark.contract.key_groups import key_group

FAULT_CONF = {"topology.message.timeout.secs": 4, "topology.max.spout.pending": 300,
              rwc.SLEEP_MS: 2}
SPOUTS = 2  # connect_client.wordcount's


@session_kinds("spark")
def test_at_most_once_word_count_with_the_tmaster_in_container_0_is_exact(session_client,
                                                                          tmp_path):
    """With ``heron.tmaster.placement`` container, container 0 runs the TMaster (its location
    record and ready file say so), the handle asks it (``RemoteTMaster``) and the counts are
    exact."""
    result = session_client.run("placed", tmp_path, lines=1000)
    assert result["running"] and result["tmaster"] == "RemoteTMaster"
    location = result["location"]
    assert location["generation"] == 0 and location["pid"] != result["pid"]
    assert result["ready"] and result["has_plan"] and result["registered"] == 2
    assert result["status"] in ("RUNNING", "FINISHED")
    assert result["state"] == result["stored"] == "FINISHED"
    text = rwc.write_corpus(tmp_path / "expected.txt", 1000)
    assert collections.Counter(result["raw"]) == rwc.expected_counts(text)
    assert result["executed"] > 0
    wait_nothing_left(session_client, tmp_path / "work")


@session_kinds("fault")
def test_at_least_once_survives_kill_9_of_a_stmgr(session_client, tmp_path):
    """Container 1's stmgr killed while the word count runs: its container restarts it, the
    TMaster re-broadcasts the plan with its new address, and every line is acked and
    committed, every word counted exactly once after de-duplication."""
    name = f"{session_client.kind}-stmgr"
    result = session_client.run("wordcount", tmp_path, lines=2500, name=name, kill=True,
                                victim="stmgr", config=FAULT_CONF)
    assert result["state"] == "FINISHED"
    assert result["killed_task"] == "stmgr"
    text = rwc.write_corpus(tmp_path / "expected.txt", 2500)
    replayed = rwc.check_exact(text, tmp_path / "out", f"file://{tmp_path}/state", name, SPOUTS)
    print(f"{replayed} word records replayed")


@session_kinds("spark")
def test_deactivate_activate_and_update_lose_nothing_and_keep_fields_grouping(session_client,
                                                                             tmp_path):
    """Deactivated until its output stops growing, activated, then rescaled while it runs
    (count 2 -> 3 -> 1): every update is stored, each parallelism sends every word to exactly
    one count task, and the counts are exact after de-duplication."""
    name = f"{session_client.kind}-manage"
    result = session_client.run("manage", tmp_path, lines=4000, name=name)
    print(f"paused at {result['stopped_at']} bytes of counts; generations "
          f"{result['generations']}; seconds from submit: {result['steps']}")
    assert result["paused"] == "PAUSED"
    assert result["refused"] == "count"  # update({"count": 0}): one error naming it
    assert result["generations"] == [1, 2] and result["generation"] == 2
    assert result["plan_counts"] == [0, 1, 2]
    assert result["stored_counts"] == [3, 3]  # packing plan instances, topology parallelism
    assert result["state"] == "FINISHED"
    routes = mt.read_routes(tmp_path / "out")
    assert set(routes) == {2, 3, 1}
    for parallelism, words in routes.items():  # fields grouping held in every generation
        split = {w: tasks for w, tasks in words.items() if len(tasks) != 1}
        assert not split, f"parallelism {parallelism}: words counted by several tasks: {split}"
    assert len({t for tasks in routes[3].values() for t in tasks}) == 3
    text = rwc.write_corpus(tmp_path / "expected.txt", 4000)
    replayed = rwc.check_exact(text, tmp_path / "out", f"file://{tmp_path}/state", name, SPOUTS)
    print(f"{replayed} word records replayed")
    wait_nothing_left(session_client, tmp_path / "work")


@session_kinds("spark")
def test_kill_from_the_handle_stops_every_process_and_the_spark_job(session_client, tmp_path):
    result = session_client.run("kill", tmp_path)
    assert result["state"] == "KILLED"
    assert len(result["pids"]) == 6 and all(pid > 0 for pid in result["pids"])  # 2 stmgrs, 4 tasks
    wait_nothing_left(session_client, tmp_path / "work")
    for pid in result["pids"]:
        assert not _heron_process(pid), pid


def _heron_process(pid: int) -> bool:
    """Return True while ``pid`` is a live heron_spark process (not reused by another)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"heron_spark" in cmdline.read()
    except OSError:
        return False


@session_kinds("spark")
@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_a_committed_checkpoint_s_state_reads_as_a_dataframe(session_client, tmp_path, backend):
    """``option("state", "latest")`` after a stateful word count's committed checkpoint holds
    every word: one row per word with its exact count (from the corpus), on exactly one of the
    count tasks, its key group and the committed id; the spout's offset by id; SQL over it;
    and one clear error each for an unknown component, checkpoint and topology. Reads while it
    runs (a commit every 0.5 s) see one consistent checkpoint: the counts add up to the
    spout's offset in it."""
    if (session_client.kind, backend) in (("connect", "memory"), ("classic", "rocksdb")):
        pytest.skip("each backend in one kind of session: the reader runs on the executors "
                    "alike (tests/test_state_source_parts.py reads both without Spark)")
    name = f"{session_client.kind}-state-{backend}"
    result = session_client.run("state", tmp_path, name=name, backend=backend, lines=1500)
    expected = collections.Counter(result["expected"])
    rows = result["rows"]
    assert result["columns"] == ["key", "value", "task", "key_group", "checkpoint_id"]
    assert sst.counts_of(rows) == expected and len(rows) == len(expected)
    assert {task for _, _, task, _, _ in rows} == set(result["count_tasks"])
    assert all(group == key_group(key, 128) for key, _, _, group, _ in rows)
    assert {checkpoint for *_, checkpoint in rows} == {result["committed"]}
    assert result["sql"] == [len(expected), sum(expected.values()), 2]
    [[key, value, _, _, checkpoint]] = result["spout"]
    assert (key, int(value), checkpoint) == ("offset", sum(expected.values()),
                                             result["committed"])
    for checkpoint, counted, emitted in result["running"]:  # read while it ran, 0.5 s commits
        assert counted == emitted and 0 < checkpoint <= result["committed"], result["running"]
    errors = result["errors"]
    assert "'nope'" in errors["component"] and "no such component" in errors["component"]
    assert f"'{result['committed'] + 1000}'" in errors["checkpoint"]
    assert "retained: [" in errors["checkpoint"]  # the reads while it ran hold theirs
    assert f"{result['committed']}]" in errors["checkpoint"]
    assert "'no-such-topology'" in errors["topology"] and "heron-spark list" in errors["topology"]
    print(f"{session_client.kind} {backend}: {len(rows)} keys of checkpoint {result['committed']}; "
          f"while running [checkpoint, counted, emitted]: {result['running']}")
