"""The word count across hosts, TLS off against on: what encrypting the links costs.

Builds three hosts of our own (network namespaces on a bridge, ``tests/hosts_support``):
``h0`` runs the Spark master, the driver (the TMaster) and an idle ZooKeeper (the hosts
tier's cluster; the runs keep their state in files), ``h1`` and ``h2`` one Spark worker
each with one core, so the word count's two containers run on two hosts and every tuple from
a split task to the count task on the other container crosses the bridge, stmgr to stmgr,
as between two machines. It then runs ``benchmarks/word_count.py --tls both`` inside ``h0``
against that cluster: each mode with ``heron.tls.enabled`` off, then on, in one series
(median of --runs, every run listed), with its start-up times, CPU seconds per process role
and the on-against-off line. Every other argument goes to ``word_count.py`` unchanged.

Needs root (network namespaces). Everything it starts is stopped and the namespaces removed
when it ends, Ctrl-C too.

    .venv/bin/python benchmarks/tls_hosts.py --modes ATMOST_ONCE,ATLEAST_ONCE --styles plain
        [--phases throughput,latency] [--runs 3] [--json out.json]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent / "tests"), str(BENCH_DIR.parent)]

import hosts_support  # noqa: E402

WORKERS = 2  # one container each


def main(argv: list[str]) -> int:
    reason = hosts_support.unavailable()
    if reason is not None:
        print(f"tls_hosts: cannot make hosts here: {reason}", file=sys.stderr)
        return 2
    hosts_support.cleanup_stale()
    with hosts_support.standalone_cluster(WORKERS, cores=1) as (hosts, _zk, spark):
        print(f"hosts: h0 {hosts[0].address} (master, driver); "
              + "; ".join(f"h{h.index} {h.address} (worker, 1 core)" for h in hosts.hosts[1:]),
              flush=True)
        env = dict(os.environ, SPARK_LOCAL_IP=hosts[0].address)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return subprocess.run(
            [*hosts[0].exec_prefix(), sys.executable, str(BENCH_DIR / "word_count.py"),
             "--master", spark.url, "--tls", "both",
             "--sample-roots", ",".join(map(str, spark.worker_pids)), *argv],
            env=env, cwd=BENCH_DIR.parent).returncode

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
