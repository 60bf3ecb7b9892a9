"""Across hosts with TLS on: what crosses the network between hosts is encrypted, and every
heron_spark port refuses whoever is not of the topology.

A Spark standalone cluster on hosts (``hosts_support``): ZooKeeper, the master and the driver
(``hosts_driver.py`` modes ``tls`` and ``plain``) on ``h0``, a worker on each of ``h1`` and
``h2``; the word count's two containers run on different worker hosts, so tuples cross hosts
stmgr to stmgr, and stmgrs and the TMaster talk across hosts too.

- Capture: ``tcpdump`` on each worker host's interface (inside its namespace) for the whole
  run. The corpus is 40 random 12-letter words: with TLS on no capture holds any of them (and
  the captures hold more bytes than the corpus, so an empty capture cannot pass); with TLS off
  they show (so the check can fail). Counts are exact in both runs.
- While the TLS run is held running: every TCP listener of a heron_spark process on every host
  (``Hosts.listeners``; PySpark's, Spark's and ZooKeeper's own are not ours) refuses a client
  of another topology's CA, one without a certificate and plain TCP clients, and fuzz (random
  bytes, a ClientHello then garbage, a huge frame length, a half-done handshake, an idle
  connection): each is closed, none gets a frame (``hosts_tls_probe.py``, run from another host
  for a port on the host's address, from the host itself for a loopback one). No heron_spark
  process dies, the topology keeps running and a real control client still gets through.

The TLS run is shared by the module's tests (one topology for the three checks).
"""

from __future__ import annotations

import collections
import json
import os
import random
import shutil
import signal
import socket
import string
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import hosts_support
import reliable_word_count as rwc
from cluster_support import cmdline
from hosts_support import IFACE, Host, Hosts
from heron_spark.contract.topology_view import TMasterLocation
from heron_spark.statemgr import open_state_manager
from heron_spark.testing import wait_until
from heron_spark.tmaster import client as tmaster_client
from heron_spark.wire import tls as wire_tls

pytestmark = pytest.mark.hosts

TESTS = Path(__file__).resolve().parent
DRIVER = TESTS / "hosts_driver.py"
PROBE = TESTS / "hosts_tls_probe.py"
WORKERS = 2
LINES = 3000


@pytest.fixture(scope="module")
def cluster():
    """Hosts h0..h2, ZooKeeper and the master on h0, a worker on each of h1 and h2."""
    if shutil.which("tcpdump") is None:
        message = "the TLS hosts tests capture with tcpdump: apt-get install tcpdump"
        if os.environ.get("CI") == "true":
            pytest.fail(message)  # .ci/run installs it
        pytest.skip(message)
    with hosts_support.standalone_cluster(WORKERS) as made:
        yield made


def write_corpus(path: Path, seed: int) -> tuple[list[str], list[str]]:
    """Write lines of 40 random 12-letter words (none can show up in a capture by chance);
    return (the words, the lines)."""
    rng = random.Random(seed)
    words = ["".join(rng.choices(string.ascii_lowercase, k=12)) for _ in range(40)]
    lines = [" ".join(rng.choices(words, k=rng.randint(3, 9))) for _ in range(LINES)]
    path.write_text("".join(f"{line}\n" for line in lines))
    return words, lines


class Capture:
    """``tcpdump`` on ``host``'s interface, from inside its namespace, into ``path``."""

    def __init__(self, host: Host, path: Path) -> None:
        self.host, self.path = host, path
        self._log = path.with_suffix(".log")
        with self._log.open("wb") as log:
            # ``ip netns exec`` execs tcpdump: the pid is tcpdump's. -Z root: write our folder.
            self.proc = subprocess.Popen(
                [*host.exec_prefix(), "tcpdump", "-i", IFACE, "-n", "-U", "-Z", "root", "-w",
                 str(path)], stdout=subprocess.DEVNULL, stderr=log)
        wait_until(lambda: b"listening on" in self._log.read_bytes() or self.proc.poll() is not None,
                   30, interval=0.05, message=f"tcpdump on {host.namespace} to listen")
        assert self.proc.poll() is None, self._log.read_text()

    def stop(self) -> bytes:
        """Stop capturing; return the capture file's bytes."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        self.proc.wait(30)
        return self.path.read_bytes()


class Run:
    """A word count across hosts (``hosts_driver.py`` mode ``tls`` or ``plain``), captured on
    every worker host; held running (paced) from ``ready()`` until ``finish()``."""

    def __init__(self, cluster, tmp: Path, tls: bool, seed: int) -> None:
        self.cluster, self.tmp, self.tls = cluster, tmp, tls
        self.hosts: Hosts = cluster[0]
        self.words, self.lines = write_corpus(tmp / "corpus.txt", seed)
        self.captures = [Capture(h, tmp / f"{h.namespace}.pcap") for h in self.hosts.hosts[1:]]
        self.mode = "tls" if tls else "plain"
        self.spec = hosts_support.driver_spec(cluster, tmp, cores=WORKERS)
        self.statemgr = self.spec["statemgr"]  # the run's own ZooKeeper root
        self._log = (tmp / "driver.log").open("wb")
        self.proc = subprocess.Popen(
            [*self.hosts[0].exec_prefix(), sys.executable, str(DRIVER), self.mode,
             json.dumps(self.spec)], stdout=self._log, stderr=subprocess.STDOUT, cwd=TESTS.parent)
        self._ready: dict | None = None
        self.pcaps: dict[str, bytes] | None = None

    def log(self) -> str:
        return (self.tmp / "driver.log").read_text()[-8000:]

    def ready(self) -> dict:
        """Wait until the topology runs and counts; return the driver's ``ready.json``."""
        if self._ready is None:
            path = self.tmp / "ready.json"
            wait_until(lambda: path.exists() or self.proc.poll() is not None, 240,
                       interval=0.1, message=lambda: f"the run to be ready:\n{self.log()}")
            assert path.exists(), f"the driver ended before the run was ready:\n{self.log()}"
            self._ready = json.loads(path.read_text())
        return self._ready

    def finish(self) -> dict[str, bytes]:
        """Let the run finish, stop the captures; return each worker host's capture."""
        if self.pcaps is None:
            (self.tmp / "go").touch()
            try:
                self.proc.wait(300)
            finally:
                self.pcaps = {c.host.namespace: c.stop() for c in self.captures}
                self._log.close()
            assert self.proc.returncode == 0, self.log()
            assert f"HOSTS {self.mode.upper()} OK" in self.log(), self.log()
            hosts_support.wait_nothing_left(self.hosts, hosts_support.daemons(self.cluster))
        return self.pcaps

    def close(self) -> None:
        """End the driver (after a failure: it kills the topology) and the captures
        (idempotent; ``Hosts.remove`` kills whatever is left on the hosts)."""
        (self.tmp / "go").touch()
        try:
            self.proc.wait(300)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        for capture in self.captures:
            capture.stop()
        self._log.close()

    def counts(self) -> tuple[collections.Counter, collections.Counter]:
        """(the counts the topology recorded, the corpus' counted with ``Counter``)."""
        raw, _, _ = rwc.read_counts(self.tmp / "out")
        return raw, collections.Counter(w for line in self.lines for w in line.split())


@pytest.fixture(scope="module")
def tls_run(cluster, tmp_path_factory):
    run = Run(cluster, tmp_path_factory.mktemp("tls"), tls=True, seed=37)
    try:
        run.ready()
        yield run
    finally:
        run.close()


# -- heron_spark's listeners ------------------------------------------------------------------
def _is_heron_spark(cmd: str) -> bool:
    """A heron_spark process: ``python -m heron_spark.…`` (stmgr, instance, metrics manager,
    TMaster in a container) or the driver (the TMaster beside it); not PySpark's workers."""
    args = cmd.split()
    if not args or "python" not in Path(args[0]).name:
        return False
    modules = [b for a, b in zip(args, args[1:]) if a == "-m"]
    return any(m.startswith("heron_spark.") for m in modules) or \
        (len(args) > 1 and Path(args[1]).name == DRIVER.name)


def heron_listeners(hosts: Hosts, ready: dict) -> list[tuple[Host, str, int, str]]:
    """``(host, address, port, what)`` of every TCP listener of a heron_spark process."""
    found = []
    for host in hosts.hosts:
        for local, _, cmd in hosts.listeners(host):
            if not _is_heron_spark(cmd):
                continue
            address, port = local.rsplit(":", 1)
            if Path(cmd.split()[1]).name == DRIVER.name and int(port) in ready["spark_ports"]:
                continue  # PySpark's accumulator server in the driver process
            if address in ("*", "0.0.0.0", "[::]"):
                address = host.address
            what = cmd.split(" -m ")[-1].split()[0] if " -m " in cmd else "driver"
            found.append((host, address.strip("[]"), int(port), what))
    return found


def heron_pids(hosts: Hosts) -> set[int]:
    return {pid for host in hosts.hosts for pid in hosts.pids(host)
            if _is_heron_spark(cmdline(pid))}


def probe(run: Run, tmp: Path, probes: str) -> dict[str, dict[str, str]]:
    """Run ``hosts_tls_probe.py`` against every heron_spark listener: a port on a host's
    address from the next host (across the bridge), a loopback port from its own host."""
    hosts = run.hosts
    ready = run.ready()
    listeners = heron_listeners(hosts, ready)
    # At least the TMaster (in the driver) and each worker host's stmgr and metrics manager.
    whats = {(host.index, what) for host, *_, what in listeners}
    assert {(0, "driver")} | {(h.index, f"heron_spark.entry.{c}") for h in hosts.hosts[1:]
                              for c in ("stmgr", "metrics")} <= whats, listeners
    with open_state_manager(run.statemgr) as statemgr:
        location = TMasterLocation.from_stored(statemgr.get_tmaster_location(ready["name"]))
    assert location is not None and location.control_tls
    other = tmp / "other-ca"
    wire_tls.write_material(other, wire_tls.new_topology_tls("another-topology", 1).container(0))
    base = {"probes": probes, "ca": wire_tls.TlsMaterial.from_json(location.control_tls).ca_pem.decode(),
            "other": str(other), "topology": ready["name"]}
    by_prober: dict[int, list[list]] = collections.defaultdict(list)
    for host, address, port, _ in listeners:
        prober = host.index if address.startswith("127.") else (host.index + 1) % len(hosts.hosts)
        by_prober[prober].append([address, port])
    procs = {index: subprocess.Popen(
        [*hosts[index].exec_prefix(), sys.executable, str(PROBE),
         json.dumps({**base, "targets": targets})], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=TESTS.parent)
        for index, targets in by_prober.items()}
    results: dict[str, dict[str, str]] = {}
    for index, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"probe from h{index} failed:\n{err[-4000:]}"
        results.update(json.loads(out))
    described = {f"{a}:{p}": f"h{h.index} {w}" for h, a, p, w in listeners}
    print("PROBED " + json.dumps({f"{described[t]} {t}": r for t, r in results.items()}))
    assert set(results) == set(described), "a listener was not probed"
    return results


def accepted(results: dict[str, dict[str, str]], probes: set[str] | None = None) -> dict:
    return {(target, name): outcome for target, by_probe in results.items()
            for name, outcome in by_probe.items()
            if (probes is None or name in probes) and not outcome.startswith("refused")}


def test_every_heron_spark_port_refuses_another_ca_no_certificate_and_plain_tcp(tls_run,
                                                                                tmp_path):
    results = probe(tls_run, tmp_path, "clients")
    wrong_clients = {"other_ca", "no_cert", "plain_frame", "plain_challenge"}
    assert all(wrong_clients <= set(r) for r in results.values())
    assert not accepted(results, wrong_clients)
    for by_probe in results.values():  # refused at the TLS handshake, not later
        assert by_probe["other_ca"].startswith("refused: TLS handshake"), by_probe
        assert by_probe["no_cert"].startswith("refused: TLS handshake"), by_probe


def test_fuzzing_every_port_is_refused_and_nothing_dies(tls_run, tmp_path):
    before = heron_pids(tls_run.hosts)
    results = probe(tls_run, tmp_path, "fuzz")
    assert results and not accepted(results)
    assert heron_pids(tls_run.hosts) >= before, "a heron_spark process died under the fuzz"
    with open_state_manager(tls_run.statemgr) as statemgr:  # a real control client
        assert tmaster_client.tmaster_status(statemgr, tls_run.ready()["name"]) == "RUNNING"


def tcp_segments(pcap: bytes) -> Iterator[tuple[str, int, str, int, int]]:
    """``(source, port, destination, port, payload bytes)`` of each IPv4 TCP segment of a
    capture of an Ethernet interface (classic pcap, as ``tcpdump -w`` writes)."""
    assert pcap[:4] == b"\xd4\xc3\xb2\xa1", "not a little-endian pcap"  # tcpdump's, here
    offset = 24  # the file header
    while offset + 16 <= len(pcap):
        captured = struct.unpack_from("<I", pcap, offset + 8)[0]
        packet = pcap[offset + 16:offset + 16 + captured]
        offset += 16 + captured
        if len(packet) < 34 or packet[12:14] != b"\x08\x00" or packet[23] != 6:
            continue  # not IPv4 TCP
        ip_len, ihl = struct.unpack_from(">H", packet, 16)[0], (packet[14] & 0x0F) * 4
        tcp = 14 + ihl
        sport, dport = struct.unpack_from(">HH", packet, tcp)
        payload = ip_len - ihl - (packet[tcp + 12] >> 4) * 4
        yield (socket.inet_ntoa(packet[26:30]), sport, socket.inet_ntoa(packet[30:34]), dport,
               payload)


def stmgr_bytes(pcap: bytes, stmgrs: list[list]) -> int:
    """TCP payload bytes between two stmgrs (one end a stmgr's data port, the other another
    stmgr's host) in ``pcap``."""
    ports = {(host, port) for host, port in stmgrs}
    hosts = {host for host, _ in stmgrs}
    total = 0
    for src, sport, dst, dport, size in tcp_segments(pcap):
        if src != dst and {src, dst} <= hosts and ((src, sport) in ports or (dst, dport) in ports):
            total += size
    return total


def test_with_tls_captures_between_hosts_hold_no_word_and_counts_are_exact(tls_run):
    pcaps = tls_run.finish()
    corpus_bytes = (tls_run.tmp / "corpus.txt").stat().st_size
    sizes = {ns: len(data) for ns, data in pcaps.items()}
    between = {ns: stmgr_bytes(data, tls_run.ready()["stmgrs"]) for ns, data in pcaps.items()}
    print(f"CAPTURE tls on: {sizes} bytes, of which stmgr to stmgr (TCP payload) {between}; "
          f"corpus {corpus_bytes} bytes")
    for namespace, data in pcaps.items():
        assert len(data) > corpus_bytes, f"{namespace} captured too little: {sizes}"
        # Tuples crossed hosts stmgr to stmgr: about half the words, each in a tuple.
        assert between[namespace] > corpus_bytes // 4, between
        shown = [w for w in tls_run.words if w.encode() in data]
        assert not shown, f"{namespace}'s capture shows corpus words in clear: {shown}"
    raw, expected = tls_run.counts()
    assert raw == expected


def test_without_tls_the_captures_show_the_words_and_counts_are_exact(cluster, tmp_path):
    run = Run(cluster, tmp_path, tls=False, seed=38)
    try:
        run.ready()
        pcaps = run.finish()
    finally:
        run.close()
    sizes = {ns: len(data) for ns, data in pcaps.items()}
    between = {ns: stmgr_bytes(data, run.ready()["stmgrs"]) for ns, data in pcaps.items()}
    print(f"CAPTURE tls off: {sizes} bytes, of which stmgr to stmgr (TCP payload) {between}")
    shown = {w for w in run.words for data in pcaps.values() if w.encode() in data}
    assert shown == set(run.words), f"words missing from the captures: {set(run.words) - shown}"
    raw, expected = run.counts()
    assert raw == expected
