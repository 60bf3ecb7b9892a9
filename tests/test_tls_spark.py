"""A topology with TLS on, on real Spark: every TCP port it opens refuses a plain client, and
the control client (the CLI's and the tracker's way in) reaches the TMaster over TLS with the
material the state manager keeps private for it, and the tracker (driver's or container 0's)
answers over HTTPS a client trusting the topology's CA only; ``heron.tls.enabled: auto``
follows Spark's ``spark.network.crypto.enabled``."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import resilience_topologies as topo

from heron_spark import submit
from heron_spark.contract.topology_view import TMasterLocation
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until
from heron_spark.tmaster import client as tmaster_client
from heron_spark.tracker.auth import tracker_token
from heron_spark.tracker.service import topology_ca_pem
from heron_spark.wire import frames
from heron_spark.wire.tls import https_client_context
from test_tracker import Tracker

pytestmark = pytest.mark.spark


def _hangs_up_on_a_plain_client(host: str, port: int) -> bool:
    raw = socket.create_connection((host, port), timeout=15)
    got = b""
    try:
        raw.sendall(frames.frame(frames.CONTROL, b"plain bytes, not a TLS hello"))
        while chunk := raw.recv(4096):
            got += chunk
    except ConnectionResetError:
        pass
    finally:
        raw.close()
    return got == b"" or got[0] == 0x15  # nothing, or a TLS alert: never a secret challenge


def _tracker_answers_over_https_only(statemgr, name: str, url: str | None) -> None:
    """The tracker (the driver's or container 0's) serves HTTPS under the topology's CA."""
    assert url is not None and url.startswith("https://"), url
    ca_pem = topology_ca_pem(statemgr, name)
    assert ca_pem is not None
    trusting = Tracker(url, tracker_token(statemgr), https_client_context(ca_pem))
    assert name in json.dumps(trusting.get("/topologies"))
    with pytest.raises(ssl.SSLCertVerificationError):  # the system CAs do not vouch for it
        Tracker(url, trusting.token, ssl.create_default_context()).request("GET", "/topologies")
    assert _hangs_up_on_a_plain_client(*trusting.address)


@pytest.mark.parametrize("placement", ["driver", "container"])
def test_every_port_of_a_tls_topology_refuses_a_plain_client(placement, spark, hconf, tmp_path):
    name = f"tls_ports_{placement}"
    handle = submit(topo.numbers(name, tmp_path / "out", count=-1, sleep_ms=1),
                    spark=spark.session,
                    conf={**hconf, "heron.tls.enabled": True,
                          "heron.tmaster.placement": placement})
    try:
        assert handle.wait_running(120)
        with open_state_manager(hconf["heron.statemgr"]) as statemgr:
            plan = wait_until(lambda: (p := statemgr.get_physical_plan(name)) is not None
                              and len(p.stmgrs) == 2 and p, 60, interval=0.1,
                              message="the physical plan")
            location = TMasterLocation.from_stored(statemgr.get_tmaster_location(name))
            assert location is not None and location.control_tls
            ports = [(location.host, location.port)] + [(s.host, s.data_port)
                                                         for s in plan.stmgrs]
            for host, port in ports:
                assert _hangs_up_on_a_plain_client(host, port), (host, port)
            assert tmaster_client.tmaster_status(statemgr, name) == "RUNNING"  # over TLS
            _tracker_answers_over_https_only(statemgr, name, handle.tracker_url)
            assert handle.tls_ca_pem() == topology_ca_pem(statemgr, name)
            tmaster_client.kill_topology(statemgr, name)
        assert handle.wait(120) == "KILLED"
    finally:
        handle.kill()


AUTO_SCRIPT = r"""
import sys
from pathlib import Path
repo, tests, out = sys.argv[1:4]
sys.path[:0] = [repo, tests]
from pyspark.sql import SparkSession
from examples.word_count import build
from heron_spark import submit
from heron_spark.testing import COLLECT_DIR

spark = (SparkSession.builder.master("local[2]").appName("tls-auto")
         .config("spark.authenticate", "true")
         .config("spark.network.crypto.enabled", "true")
         .config("spark.ui.enabled", "false").getOrCreate())
handle = submit(build(30), spark=spark, conf={COLLECT_DIR: out})
print("STATE", handle.wait(240))
print("KEYS", len(list(Path(out).parent.rglob("tls/key.pem"))))
spark.stop()
"""


def test_tls_follows_sparks_network_encryption_by_default(tmp_path):
    # heron.tls.enabled is left at auto: a session with spark.network.crypto.enabled gets TLS.
    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-c", AUTO_SCRIPT, str(repo), str(repo / "tests"),
                           str(tmp_path / "out")], cwd=tmp_path, env=dict(os.environ),
                          capture_output=True, text=True, timeout=400)
    output = f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, output
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert lines["STATE"] == "FINISHED", output
    assert int(lines["KEYS"]) == 2, output  # each container got its TLS material
