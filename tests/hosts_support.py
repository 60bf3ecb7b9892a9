"""Hosts of our own: network namespaces on a bridge, and the faults a network between hosts meets.

``Hosts`` makes ``h0`` (the driver, the Spark master and ZooKeeper) and ``h1``..``hN`` (one
Spark worker each), every one a network namespace with its own address on one bridge
(``10.213.K.0/24``, K picked free per run), plus the bridge's own address in the root namespace
so the test process can read the master's page. Every name carries a per-run prefix
``hs<pid>``: ``cleanup_stale`` removes those of earlier runs whose process is gone (a crash or a
SIGKILL skipped their cleanup), and ``Hosts.remove`` (a fixture finalizer, also registered with
``atexit``) kills every process left in the namespaces and deletes them and the bridge.

Faults, all from inside the host's namespace with ``ip -n`` / ``tc -n`` (this kernel has no
netem, no iptables and no nft):

- ``cut`` / ``heal``: the host's link down / up (a partition of that host from all others; its
  address and routes come back on ``up``).
- ``slow``: ``tbf`` at a low rate with a deep queue (bandwidth limit plus queueing delay).
- ``lossy``: ``tbf`` at a low rate with a queue of a few packets and a small bucket: what does
  not fit is dropped by the qdisc (real packet loss, counted in ``tc -s``'s ``dropped``), what
  fits waits (delay); TCP retransmits, so delivery is lossy and late, as on a bad link.
- ``flap``: link down and up every ``period`` seconds, from a thread.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from heron_spark.testing import wait_until

PREFIX = f"hs{os.getpid()}"
_NAME = re.compile(r"^hs(\d+)(?:-h\d+|br|v\d+|n\d+)$")
IFACE = "eth0"


def ip(*args: str, check: bool = True) -> str:
    """Run ``ip ARGS``; return its stdout (raise with its stderr when ``check``)."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def tc(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["tc", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"tc {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def unavailable() -> str | None:
    """Why this machine cannot make hosts (None: it can)."""
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    try:
        ip("netns", "list")
        subprocess.run(["tc", "-V"], capture_output=True, check=True, timeout=10)
    except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:
        return f"`ip netns` / `tc` unavailable: {exc}"
    return None


def require() -> None:
    """Skip the calling test when hosts cannot be made here; fail it under CI (``CI=true``)."""
    import pytest

    reason = unavailable()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the hosts tier needs root and `ip netns` under CI: {reason}")
        pytest.skip(reason)


def _pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def netns_pids(namespace: str) -> list[int]:
    """Pids of every process in ``namespace``."""
    return [int(p) for p in ip("netns", "pids", namespace, check=False).split()]


def _kill_all_in(namespace: str) -> None:
    """SIGKILL every process of ``namespace`` until none is left."""
    def gone() -> bool:
        pids = netns_pids(namespace)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        return not pids
    wait_until(gone, 30, interval=0.1, message=f"the processes of {namespace} to die")


def cleanup_stale() -> list[str]:
    """Remove namespaces and links of earlier runs (prefix ``hs<pid>`` with ``pid`` gone)."""
    removed = []
    for line in ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        match = _NAME.match(name)
        if match and not _pid_alive(int(match.group(1))):
            _kill_all_in(name)
            ip("netns", "del", name, check=False)
            removed.append(name)
    for line in ip("-o", "link", "show", check=False).splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        match = _NAME.match(name)
        if match and not _pid_alive(int(match.group(1))):
            ip("link", "del", name, check=False)
            removed.append(name)
    return removed


def _free_subnet() -> ipaddress.IPv4Network:
    """A 10.213.K.0/24 no route of this machine overlaps."""
    routes = ip("-4", "route", "show", "table", "all", check=False)
    used = {ipaddress.ip_network(word, strict=False) for word in re.findall(
        r"\b10\.213\.\d+\.\d+(?:/\d+)?\b", routes)}
    for offset in range(250):
        k = (os.getpid() + offset) % 250 + 1
        net = ipaddress.ip_network(f"10.213.{k}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free 10.213.K.0/24 subnet")


@dataclass(frozen=True)
class Host:
    index: int
    namespace: str
    address: str
    veth: str   # the root namespace's end, on the bridge

    def exec_prefix(self) -> list[str]:
        """Prefix a command line with this to run it on this host."""
        return ["ip", "netns", "exec", self.namespace]


class Hosts:
    """``count`` hosts ``h0``..; see the module docstring."""

    @classmethod
    def attach(cls, hosts: list[Host]) -> "Hosts":
        """The hosts another process made: for faults and kills only (it removes them)."""
        self = cls.__new__(cls)
        self.hosts, self._flappers, self._removed = list(hosts), [], True
        return self

    def __init__(self, count: int) -> None:
        cleanup_stale()
        self.net = _free_subnet()
        base = self.net.network_address
        self.bridge = f"{PREFIX}br"
        self.bridge_address = str(base + 254)
        self.hosts = [Host(i, f"{PREFIX}-h{i}", str(base + 1 + 10 * i), f"{PREFIX}v{i}")
                      for i in range(count)]
        self._flappers: list[tuple[threading.Event, threading.Thread]] = []
        self._removed = False
        atexit.register(self.remove)

    def __getitem__(self, index: int) -> Host:
        return self.hosts[index]

    def create(self) -> "Hosts":
        try:
            ip("link", "add", self.bridge, "type", "bridge")
            ip("addr", "add", f"{self.bridge_address}/{self.net.prefixlen}", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
            for host in self.hosts:
                inner = f"{PREFIX}n{host.index}"
                ip("netns", "add", host.namespace)
                ip("link", "add", host.veth, "type", "veth", "peer", "name", inner)
                ip("link", "set", inner, "netns", host.namespace)
                ip("link", "set", host.veth, "master", self.bridge)
                ip("link", "set", host.veth, "up")
                ip("-n", host.namespace, "link", "set", inner, "name", IFACE)
                ip("-n", host.namespace, "addr", "add",
                   f"{host.address}/{self.net.prefixlen}", "dev", IFACE)
                ip("-n", host.namespace, "link", "set", IFACE, "up")
                ip("-n", host.namespace, "link", "set", "lo", "up")
        except BaseException:
            self.remove()
            raise
        return self

    # -- faults --------------------------------------------------------------------------------
    def cut(self, *hosts: Host) -> None:
        for host in hosts:
            ip("-n", host.namespace, "link", "set", IFACE, "down")

    def heal(self, *hosts: Host) -> None:
        for host in hosts:
            ip("-n", host.namespace, "link", "set", IFACE, "up")

    def slow(self, host: Host, rate: str = "200kbit") -> None:
        """Limit ``host``'s outgoing bandwidth (deep queue: delay, no loss)."""
        tc("-n", host.namespace, "qdisc", "replace", "dev", IFACE, "root", "tbf", "rate", rate,
           "burst", "16kbit", "latency", "2s")

    def lossy(self, host: Host, rate: str = "64kbit") -> None:
        """Drop what does not fit a queue of one packet at ``rate`` (see the docstring)."""
        tc("-n", host.namespace, "qdisc", "replace", "dev", IFACE, "root", "tbf", "rate", rate,
           "burst", "1600", "limit", "1600")

    def dropped(self, host: Host) -> int:
        """Packets the root qdisc of ``host`` dropped."""
        stats = tc("-s", "-n", host.namespace, "qdisc", "show", "dev", IFACE)
        match = re.search(r"dropped (\d+)", stats)
        return int(match.group(1)) if match else 0

    def unshape(self, host: Host) -> None:
        tc("-n", host.namespace, "qdisc", "del", "dev", IFACE, "root", check=False)

    def flap(self, host: Host, period: float = 1.0) -> None:
        """Take ``host``'s link down and up every ``period`` seconds until ``steady``."""
        stop = threading.Event()

        def loop() -> None:
            down = False
            while not stop.wait(period):
                down = not down
                (self.cut if down else self.heal)(host)
            self.heal(host)

        thread = threading.Thread(target=loop, name=f"flap-{host.namespace}", daemon=True)
        thread.start()
        self._flappers.append((stop, thread))

    def steady(self) -> None:
        """Stop every flapping link (each ends up)."""
        for stop, thread in self._flappers:
            stop.set()
            thread.join(10)
        self._flappers.clear()

    def listeners(self, host: Host) -> list[tuple[str, int, str]]:
        """``(local address, pid, command line)`` of each TCP listener on ``host``."""
        proc = subprocess.run([*host.exec_prefix(), "ss", "-ltnpH"], capture_output=True,
                              text=True, timeout=30, check=True)
        found = []
        for line in proc.stdout.splitlines():
            fields = line.split()
            for pid in re.findall(r"pid=(\d+)", line):
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                except OSError:
                    continue
                found.append((fields[3], int(pid), cmd.decode(errors="replace")))
        return found

    # -- processes -----------------------------------------------------------------------------
    def pids(self, host: Host) -> list[int]:
        return netns_pids(host.namespace)

    def kill_host(self, host: Host) -> list[int]:
        """SIGKILL every process of ``host`` (a host dying); return their pids."""
        pids = self.pids(host)
        _kill_all_in(host.namespace)
        return pids

    def remove(self) -> None:
        """Kill what runs in the namespaces, delete them and the bridge (idempotent)."""
        if self._removed:
            return
        self._removed = True
        self.steady()
        errors = []
        for host in self.hosts:
            if Path(f"/var/run/netns/{host.namespace}").exists():
                try:
                    _kill_all_in(host.namespace)
                except AssertionError as exc:
                    errors.append(exc)
                ip("netns", "del", host.namespace, check=False)
            ip("link", "del", host.veth, check=False)
        ip("link", "del", self.bridge, check=False)
        if errors:
            raise errors[0]


@contextlib.contextmanager
def standalone_cluster(workers: int, cores: int = 2) -> Iterator[tuple[Hosts, object, object]]:
    """Hosts ``h0``..``h<workers>``: ZooKeeper and the Spark master on ``h0``, a worker (``cores``
    cores, 2 GB) on each of the others; yield ``(hosts, zk, spark)`` and remove it all
    afterwards. Skips (fails under CI) where hosts cannot be made."""
    from cluster_support import StandaloneCluster
    from zk_support import ZooKeeperServer

    require()
    hosts = Hosts(workers + 1).create()
    try:
        zk = ZooKeeperServer(host=hosts[0].address, prefix=hosts[0].exec_prefix()).start()
        try:
            spark = StandaloneCluster(
                workers=workers, cores=cores, memory="2g", master_host=hosts[0].address,
                master_prefix=hosts[0].exec_prefix(),
                worker_hosts=[h.address for h in hosts.hosts[1:]],
                worker_prefixes=[h.exec_prefix() for h in hosts.hosts[1:]]).start()
            try:
                yield hosts, zk, spark
            finally:
                spark.stop()
        finally:
            zk.stop()
    finally:
        hosts.remove()


def driver_spec(cluster: tuple, tmp: Path, **extra) -> dict:
    """The JSON argument of a driver subprocess on ``h0`` (``hosts_driver.py``)."""
    hosts, zk, spark = cluster
    return {"tmp": str(tmp), "master": spark.url, "statemgr": zk.url(),
            "hosts": [{"index": h.index, "namespace": h.namespace, "address": h.address,
                       "veth": h.veth} for h in hosts.hosts], **extra}


def daemons(cluster: tuple) -> set[int]:
    """Pids of the cluster's own daemons (the Spark master and workers, ZooKeeper)."""
    _, zk, spark = cluster
    return {p.pid for p in spark.procs} | {zk.proc.pid}


def wait_gone(pids: list[int], timeout: float = 30.0) -> None:
    wait_until(lambda: not any(_pid_alive(p) for p in pids), timeout,
               message=lambda: f"processes {[p for p in pids if _pid_alive(p)]} to exit")



def wait_nothing_left(hosts: Hosts, daemons: set[int], timeout: float = 60.0) -> None:
    """Wait until no process but ``daemons`` (pids) is left on any of ``hosts``."""
    from cluster_support import cmdline

    left: dict[str, list[str]] = {}

    def nothing_left() -> bool:
        left.clear()
        for host in hosts.hosts:
            extra = [cmdline(p)[:120] for p in hosts.pids(host) if p not in daemons]
            if extra:
                left[host.namespace] = extra
        return not left

    wait_until(nothing_left, timeout, message=lambda: f"processes left behind: {left}")
