"""Spark's loss of an executor hosting a container reaches the TMaster, which restarts the
stage at once.

The pure part (which executor hosts which container, from the bridge's events) is tested here
with event dicts as the bridge writes them; the end-to-end test kills the executor JVM of a
container on a real standalone cluster (master and two workers on loopback) and checks the
TMaster acted on the bridge's event and the topology finished with exact counts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from heron_spark.scheduler.executors import ContainerExecutors, ExecutorLoss

GROUP = "heron_spark:wc"


def _start(stage, attempt, partition, executor, group=GROUP):
    return {"type": "task_start", "group": group, "stage": stage, "attempt": attempt,
            "partition": partition, "executor": executor, "host": "h", "time_ms": 1}


def _removed(executor):
    return {"type": "executor_removed", "executor": executor, "reason": "worker lost",
            "time_ms": 2}


def test_only_an_executor_hosting_a_container_of_the_current_attempt_is_a_loss():
    executors = ContainerExecutors(GROUP)
    for event in (_start(3, 0, 0, "1"), _start(3, 0, 1, "2"), _start(4, 0, 0, "9", "other")):
        assert executors.on_event(event, 0) is None
    assert executors.on_event(_removed("9"), 0) is None        # another topology's executor
    assert executors.on_event(_removed("1"), 1) == ExecutorLoss("1", (0,), "worker lost", 0)
    assert executors.on_event(_removed("1"), 1) is None        # reported once
    # The stage is resubmitted: executors of the old attempt no longer host anything.
    executors.on_event(_start(5, 0, 0, "3"), 1)
    executors.on_event(_start(5, 0, 1, "3"), 1)
    assert executors.on_event(_removed("2"), 1) is None
    executors.on_event(_start(3, 0, 1, "7"), 1)                # a late event of an old attempt
    assert executors.hosting == {"3": {0, 1}}
    assert executors.on_event(_removed("3"), 1) == ExecutorLoss("3", (0, 1), "worker lost", 1)


DRIVER = Path(__file__).resolve().parent / "executor_loss_driver.py"


@pytest.mark.cluster
def test_a_killed_executor_restarts_the_stage_at_once(tmp_path):
    proc = subprocess.run([sys.executable, str(DRIVER), str(tmp_path)], capture_output=True,
                          text=True, timeout=420, cwd=DRIVER.parent.parent)
    output = f"--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, output
    assert "EXECUTOR LOSS OK" in proc.stdout, output
