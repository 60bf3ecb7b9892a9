"""A Spark Connect client that goes away for good (``kill -9``, no session close).

The Connect server abandons the client's executions once they have been detached for
``spark.connect.execute.manager.detachedTimeout`` (checked every
``spark.connect.execute.manager.maintenanceInterval``) and interrupts the barrier stage; Spark
kills every container's task. Container 0's TMaster hears its task die and, with nobody left to
resubmit the stage, its record is the last word: the stored execution state says KILLED and
why, no heron_spark process is left, the Spark job is gone, and submitting again starts a new
run (``submit`` resumes only a live stored state). The server here runs with short timeouts
(static confs, given at its start) so that takes seconds, not the defaults' minutes.
"""

from __future__ import annotations

import io
import os
import signal
from contextlib import redirect_stdout

import pytest

import fault_support as faults
from connect_support import ConnectServer, printed_json, start_client
from heron_spark.contract import execution_state
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until
from heron_spark.entry.tmaster import task_ended_detail

pytestmark = pytest.mark.connect

SHORT_TIMEOUTS = {"spark.connect.execute.manager.detachedTimeout": "3s",
                  "spark.connect.execute.manager.maintenanceInterval": "1s",
                  "spark.connect.execute.reattachable.senderMaxStreamDuration": "5s"}


def _stored(statemgr_url: str, name: str):
    with open_state_manager(statemgr_url) as statemgr:
        return statemgr.get_execution_state(name)


def test_a_client_killed_for_good_leaves_a_stopped_topology_and_no_process(tmp_path):
    from heron_spark.cli.main import main as cli

    name = "connect-forever"
    statemgr_url = f"file://{tmp_path}/client/state"
    work = tmp_path / "client" / "work"
    server = ConnectServer(tmp_path / "server", conf=SHORT_TIMEOUTS).start()
    client = None
    try:
        client, out = start_client(server, "abandon", tmp_path / "client")
        wait_until(lambda: printed_json(out) is not None or client.poll() is not None, 180,
                   interval=0.5, message="the client's topology to run")
        running = printed_json(out)
        assert running is not None, (tmp_path / "client" / "client-abandon.err").read_text()[-3000:]
        assert _stored(statemgr_url, name).state in ("STARTING", "RUNNING")
        os.kill(client.pid, signal.SIGKILL)  # gone for good: no session close, no kill
        client.wait()

        wait_until(lambda: not faults.processes_under(work), 120, interval=0.5,
                   message="every heron_spark process of the topology to exit")
        wait_until(lambda: not server.running_jobs(), 60, interval=0.5,
                   message="the Spark job of the barrier stage to end")
        stored = _stored(statemgr_url, name)
        assert (stored.state, stored.id, stored.generation) == \
            ("KILLED", running["id"], running["generation"])
        assert stored.detail == task_ended_detail(running["generation"])
        assert stored.HasField("ended_at")
        listing = io.StringIO()
        with redirect_stdout(listing):
            assert cli(["list", "--conf", f"heron.statemgr={statemgr_url}"]) == 0
        assert f"{name}\tKILLED\tnot running" in listing.getvalue()

        # Submitting again starts a new run (not a resume), as after a kill: submit resumes
        # only a topology whose stored state is live.
        assert not execution_state.is_live(stored)
    finally:
        if client is not None and client.poll() is None:
            client.kill()
            client.wait()
        server.stop()
