"""What the scale benchmark reads from ``/proc``: memory, CPU and sockets per process role.

``snapshot()`` returns every descendant of this process with its role (``wc_report._role``:
driver, Spark JVM, Spark Python workers, stmgr, metricsmgr, ``instance <component>``),
VmRSS / VmHWM (KiB), threads, CPU seconds, and its sockets: TCP ones (from ``/proc/<pid>/fd`` and
``/proc/net/tcp`` + ``tcp6``, with the role of the process holding the other end when it is
one of ours) and Unix ones (``/proc/net/unix``). Linux only; the processes must share this
process's network namespace (they do on Spark ``local[N]``). Driver only.
"""

from __future__ import annotations

import os
from collections import Counter

from wc_report import _role, _stat, descendants

_TCP_LISTEN = "0A"
_TCP_ESTABLISHED = "01"


def _status_kb(pid: int) -> dict[str, int]:
    found = {}
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith((b"VmRSS:", b"VmHWM:", b"Threads:")):
                    key, value = line.split()[:2]
                    found[key[:-1].decode()] = int(value)
    except OSError:
        pass
    return found


def _socket_inodes(pid: int) -> list[int]:
    inodes = []
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.append(int(target[8:-1]))
    return inodes


def _tcp_table() -> dict[int, tuple[str, str, str]]:
    """Return inode -> (local address, remote address, state) of each TCP socket of this namespace."""
    table = {}
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as handle:
                next(handle)
                for line in handle:
                    fields = line.split()
                    table[int(fields[9])] = (fields[1], fields[2], fields[3])
        except OSError:
            continue
    return table


def _unix_inodes() -> set[int]:
    found = set()
    try:
        with open("/proc/net/unix") as handle:
            next(handle)
            for line in handle:
                fields = line.split()
                if len(fields) >= 7:
                    found.add(int(fields[6]))
    except OSError:
        pass
    return found


def snapshot() -> list[dict]:
    """Return one dict per live descendant (and this process): pid, role, memory, CPU, sockets.

    ``tcp_peers`` counts established TCP connections by the role holding the other end
    (``external`` when no descendant holds it); ``tcp_listen`` listening sockets, ``unix``
    Unix sockets, ``fds`` open file descriptors.
    """
    me = os.getpid()
    procs = {pid: stat for pid, stat in descendants(me).items() if stat[3] != b"Z"}
    tcp = _tcp_table()
    unix = _unix_inodes()
    rows, owner_of_local = [], {}
    for pid in procs:
        inodes = _socket_inodes(pid)
        role = _role(pid, me)
        try:
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            fds = 0
        row = {"pid": pid, "role": role, "inodes": inodes, "fds": fds,
               "cpu_s": (_stat(pid) or (0, 0.0))[1], **_status_kb(pid)}
        rows.append(row)
        for inode in inodes:
            if inode in tcp:
                owner_of_local[tcp[inode][0]] = role
    for row in rows:
        peers: Counter = Counter()
        listen = unix_count = 0
        for inode in row.pop("inodes"):
            if inode in tcp:
                local, remote, state = tcp[inode]
                if state == _TCP_LISTEN:
                    listen += 1
                elif state == _TCP_ESTABLISHED:
                    peers[owner_of_local.get(remote, "external")] += 1
            elif inode in unix:
                unix_count += 1
        row["tcp_peers"] = dict(peers)
        row["tcp_listen"] = listen
        row["unix"] = unix_count
    return rows


def cpu_by_pid() -> dict[int, tuple[str, float]]:
    """Return pid -> (role, CPU seconds) of every live descendant (and this process)."""
    me = os.getpid()
    return {pid: (_role(pid, me), stat[1]) for pid, stat in descendants(me).items()
            if stat[3] != b"Z"}
