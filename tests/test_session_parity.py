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

import reliable_word_count as rwc
from connect_support import session_kinds, wait_nothing_left

FAULT_CONF = {"topology.message.timeout.secs": 4, "topology.max.spout.pending": 300,
              rwc.SLEEP_MS: 2}
SPOUTS = 2  # connect_client.wordcount's


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
