"""The driver of ``test_hosts``: runs inside host ``h0``'s network namespace (``ip netns exec``),
submits a word count to the standalone cluster whose workers run on hosts ``h1``..``h3``, and
hurts the network between the hosts while it runs (``hosts_support``'s faults, applied from
here with ``ip -n``). After each fault it measures the stall: from healing until the topology
acks (at least once) or counts (effectively once) more than it had at the moment of healing.

``python tests/hosts_driver.py MODE SPEC_JSON``; MODE ``alo`` (faults a-f on an at-least-once
word count) or ``eo`` (a partition, then host loss, on an effectively-once word count). Prints
one ``FAULT {json}`` line per fault and ``HOSTS <MODE> OK`` at the end.

MODE ``tls`` / ``plain`` (``test_hosts_tls``): the at-least-once word count of the corpus the
test wrote to ``<tmp>/corpus.txt``, with ``heron.tls.enabled`` true / false, its containers on
different hosts. Once it runs and counts, the driver writes ``<tmp>/ready.json`` (topology name,
placement, each stmgr's data address, the driver's Spark ports) and holds the run (paced) until
the test creates ``<tmp>/go``; then it lets the run finish.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS), str(TESTS.parent)]
os.environ["PYSPARK_PYTHON"] = sys.executable

import hosts_topologies as topologies  # noqa: E402
import reliable_word_count as rwc  # noqa: E402
import stateful_word_count as swc  # noqa: E402
from cluster_support import cluster_driver_session  # noqa: E402
from hosts_support import Host, Hosts  # noqa: E402
from heron_spark.testing import wait_until  # noqa: E402

MESSAGE_TIMEOUT = 4
HEARTBEAT_TIMEOUT = 5
CUT_SECS = 7.0  # past the message and the liveness timeouts; under twice the latter (no restart)


def main(mode: str, spec: dict) -> None:
    tmp = Path(spec["tmp"])
    driver = spec["hosts"][0]["address"]
    os.environ["SPARK_LOCAL_IP"] = driver
    spark = cluster_driver_session(spec["master"], f"heron_spark-hosts-{mode}", driver,
                                   spec.get("cores", 3))
    for module in (rwc, swc, topologies):
        spark.sparkContext.addPyFile(module.__file__)
    hconf = {"heron.statemgr": spec["statemgr"], "heron.work.dir": f"{tmp}/work",
             # Shared storage stands in for HDFS / S3: a host taking over reads it there.
             "heron.checkpoint.root": f"file://{tmp}/shared-checkpoints"}
    hosts = Hosts.attach([Host(**h) for h in spec["hosts"]])
    try:
        if mode in ("tls", "plain"):
            run_tls(spark, tmp, hconf, mode == "tls")
        else:
            (run_alo if mode == "alo" else run_eo)(spark, hosts, tmp, hconf)
    finally:
        spark.stop()
    print(f"HOSTS {mode.upper()} OK", flush=True)


def stmgr_metrics(handle) -> dict:
    """Backpressure and drops, summed over the stmgrs (``__stmgr__``'s metrics)."""
    metrics = handle.metrics().get("__stmgr__", {})
    return {key: round(metrics.get(key, 0), 2) for key in
            ("__backpressure-secs", "__tuples-dropped", "__peer-frames-dropped")}


class Progress:
    """Samples a progress counter; measures each fault's stall after healing."""

    def __init__(self, read) -> None:
        self.read = read

    def stall_after(self, healed_at: float, timeout: float = 90.0) -> float:
        base = self.read()
        wait_until(lambda: self.read() > base, timeout, interval=0.05,
                   message="the flow to resume after healing")
        return round(time.monotonic() - healed_at, 2)


def report(name: str, **fields) -> None:
    print("FAULT " + json.dumps({"fault": name, **fields}), flush=True)


def placement(handle, generation: int = 0) -> dict[int, str]:
    """Container index -> the address its stmgr registered with, in ``generation``'s plan."""
    plan = wait_until(lambda: (lambda p: p if p is not None and p.generation == generation
                               else None)(handle.physical_plan), 120,
                      message=f"the physical plan of generation {generation}")
    return {s.container_index: s.host for s in plan.stmgrs}


def fault(hosts: Hosts, progress: Progress, handle, mode: str, name: str, apply, undo,
          secs: float = CUT_SECS, **extra) -> None:
    """Apply a fault for ``secs`` seconds, undo it, measure the stall and report."""
    before, metrics_before = progress.read(), stmgr_metrics(handle)
    apply()
    threading.Event().wait(secs)  # how long the fault lasts (a duration, not a condition)
    at_heal = progress.read()
    observed = {k: v() if callable(v) else v for k, v in extra.items()}  # before undoing it
    undo()
    healed = time.monotonic()
    stall = progress.stall_after(healed)
    # The next fault starts once the TMaster hears every stmgr again (none left "dead").
    wait_until(lambda: not handle.status_detail()["dead_stmgrs"], 30,
               message=lambda: f"every stmgr to heartbeat again: {handle.status_detail()}")
    alive = round(time.monotonic() - healed, 2)
    after = stmgr_metrics(handle)
    report(name, mode=mode, secs=secs, progress_before=before, progress_at_heal=at_heal,
           stall_after_heal_secs=stall, all_stmgrs_alive_after_heal_secs=alive,
           status=handle.status,
           generation=handle.status_detail().get("generation"),
           backpressure_secs=round(after["__backpressure-secs"]
                                   - metrics_before["__backpressure-secs"], 2),
           tuples_dropped=after["__tuples-dropped"],
           peer_frames_dropped=after["__peer-frames-dropped"],
           **observed)


def check_listeners(hosts: Hosts) -> None:
    """Every heron_spark listener binds its host's own address (or loopback), never all."""
    seen = {}
    for host in hosts.hosts:
        ours = [(address, cmd.split(" -m ")[-1].split()[0] if " -m " in cmd
                 else "driver (TMaster, tracker)")
                for address, _, cmd in hosts.listeners(host)
                if "python" in cmd.split(" ")[0] and ("heron_spark" in cmd
                                                      or "hosts_driver" in cmd)]
        wrong = [(a, c) for a, c in ours
                 if a.rsplit(":", 1)[0] not in (host.address, "127.0.0.1")]
        assert not wrong, f"heron_spark listeners on {host.namespace} not on its address: {wrong}"
        seen[host.address] = sorted({f"{c}@{a.rsplit(':', 1)[0]}" for a, c in ours})
    print("LISTENERS " + json.dumps(seen), flush=True)


def run_faults(hosts: Hosts, progress: Progress, handle, mode: str) -> None:
    h0, h1, h2, h3 = hosts[0], hosts[1], hosts[2], hosts[3]

    def run(name, apply, undo, **kwargs):
        fault(hosts, progress, handle, mode, name, apply, undo, **kwargs)

    run("a: partition h2 from all", lambda: hosts.cut(h2), lambda: hosts.heal(h2))
    run("b: slow link h1 (tbf 200kbit)", lambda: hosts.slow(h1), lambda: hosts.unshape(h1),
        secs=5.0)
    run("c: lossy link h3 (tbf 64kbit, one-packet queue: tail drops)", lambda: hosts.lossy(h3),
        lambda: hosts.unshape(h3), secs=5.0, dropped_packets=lambda: hosts.dropped(h3))
    run("d: h1 link flapping every 1 s", lambda: hosts.flap(h1), hosts.steady, secs=6.0)
    run("e: TMaster host h0 cut off", lambda: hosts.cut(h0), lambda: hosts.heal(h0))
    run("f: two partitions (h1 and h3 cut)", lambda: hosts.cut(h1, h3),
        lambda: hosts.heal(h1, h3))
    assert handle.status_detail()["generation"] == 0, \
        "a fault shorter than twice the liveness timeout restarted the stage"


def run_alo(spark, hosts: Hosts, tmp: Path, hconf: dict) -> None:
    from heron_spark.scheduler.submit import submit

    name = "hosts-alo"
    corpus, out = tmp / "corpus.txt", tmp / "out"
    text = rwc.write_corpus(corpus, 8000)
    topology = topologies.build_alo(name, corpus, out, 3, {
        "topology.message.timeout.secs": MESSAGE_TIMEOUT, "topology.max.spout.pending": 100,
        rwc.SLEEP_MS: 25, "heron.tmaster.stmgr.heartbeat.timeout.secs": HEARTBEAT_TIMEOUT})
    handle = submit(topology, spark=spark, conf=hconf)
    try:
        assert handle.wait_running(timeout=120), handle.status
        print("PLACEMENT " + json.dumps(placement(handle)), flush=True)
        progress = Progress(lambda: topologies.marks(out))
        wait_until(lambda: progress.read() > 200, 60, message="the topology to make progress")
        check_listeners(hosts)
        run_faults(hosts, progress, handle, "alo")
        topologies.unpace(out)
        assert handle.wait(timeout=240) == "FINISHED", handle.status
    except BaseException:
        handle.kill()
        raise
    replays = rwc.check_exact(text, out, hconf["heron.statemgr"], name, 3)
    spans = topologies.check_no_split_brain(out)
    report("final", mode="alo", lines=len(text), words=sum(rwc.expected_counts(text).values()),
           distinct_counts_exact=True, replayed_records=replays,
           generation=handle.status_detail().get("generation"),
           generations_per_task={t: sorted(g) for t, g in spans.items()})


def run_eo(spark, hosts: Hosts, tmp: Path, hconf: dict) -> None:
    from heron_spark.scheduler.submit import submit

    name = "hosts-eo"
    corpus, out = tmp / "corpus.txt", tmp / "out"
    text = swc.write_corpus(corpus, 5000)
    topology = topologies.build_eo(name, corpus, out, 3, {
        swc.SLEEP_MS: 25, "heron.tmaster.stmgr.heartbeat.timeout.secs": HEARTBEAT_TIMEOUT,
        "heron.stage.resubmit.backoff.secs": 0.2})
    handle = submit(topology, spark=spark, conf={**hconf, **swc.SHORT_QUEUES})
    try:
        assert handle.wait_running(timeout=120), handle.status
        where = placement(handle)
        print("PLACEMENT " + json.dumps(where), flush=True)
        progress = Progress(lambda: topologies.marks(out))
        wait_until(lambda: progress.read() > 200, 60, message="the topology to make progress")
        h2 = hosts[2]
        fault(hosts, progress, handle, "eo", "a: partition h2 from all", lambda: hosts.cut(h2),
              lambda: hosts.heal(h2))
        assert handle.status_detail()["generation"] == 0
        fault(hosts, progress, handle, "eo", "e: TMaster host h0 cut off",
              lambda: hosts.cut(hosts[0]), lambda: hosts.heal(hosts[0]))
        assert handle.status_detail()["generation"] == 0
        # A host dies: every process of the host of container 1 (worker JVM, executor, its
        # python workers, the container's heron_spark children).
        [lost] = [h for h in hosts.hosts if h.address == where[1]]
        before = progress.read()
        killed = hosts.kill_host(lost)
        killed_at = time.monotonic()
        [loss] = wait_until(lambda: handle.status_detail()["executor_losses"], 60,
                            message="the TMaster to report the lost executor")
        reported = round(time.monotonic() - killed_at, 2)
        assert loss["hosts"] == [lost.address], loss
        assert handle.wait_generation(1, timeout=120), handle.status_detail()
        running = round(time.monotonic() - killed_at, 2)
        stall = progress.stall_after(killed_at)
        report("4: host loss (every process of the host of container 1 killed)", mode="eo",
               host=lost.address, processes_killed=len(killed), loss_reported_secs=reported,
               loss=loss, generation_1_running_secs=running,
               progress_resumed_secs=stall, progress_before=before,
               placement_after=placement(handle, 1))
        assert lost.address not in placement(handle, 1).values()
        topologies.unpace(out)
        assert handle.wait(timeout=240) == "FINISHED", handle.status
    except BaseException:
        handle.kill()
        raise
    assert swc.read_counts(out) == swc.expected_counts(text)
    spans = topologies.check_no_split_brain(out)
    report("final", mode="eo", lines=len(text), words=sum(swc.expected_counts(text).values()),
           counts_exact=True, generation=handle.status_detail().get("generation"),
           generations_per_task={t: sorted(g) for t, g in spans.items()})


TLS_CONTAINERS = 2


def run_tls(spark, tmp: Path, hconf: dict, tls: bool) -> None:
    from heron_spark.scheduler.submit import submit

    name = "hosts-tls" if tls else "hosts-plain"
    out = tmp / "out"
    topology = topologies.build_alo(name, tmp / "corpus.txt", out, TLS_CONTAINERS, {
        # No replay under a loaded machine: each word is counted exactly once.
        "topology.message.timeout.secs": 120, "topology.max.spout.pending": 100,
        rwc.SLEEP_MS: 40})
    # No tracker HTTP server: it is not under TLS (docs/deployment.md, "Not covered yet").
    handle = submit(topology, spark=spark, conf={**hconf, "heron.tls.enabled": tls,
                                                 "heron.tracker.port": -1})
    try:
        assert handle.wait_running(timeout=120), handle.status
        where = placement(handle)
        assert len(set(where.values())) == TLS_CONTAINERS, f"containers share a host: {where}"
        wait_until(lambda: topologies.marks(out) > 100, 60, message="the topology to count")
        # PySpark's own listener in this process (a Unix socket in UDS mode: no port).
        accumulator = spark.sparkContext._accumulatorServer.server_address
        ready = tmp / "ready.json"
        stmgrs = [[s.host, s.data_port] for s in handle.physical_plan.stmgrs]
        ready.with_suffix(".part").write_text(json.dumps({
            "name": name, "placement": where, "stmgrs": stmgrs,
            "spark_ports": [accumulator[1]] if isinstance(accumulator, tuple) else []}))
        ready.with_suffix(".part").rename(ready)
        wait_until(lambda: (tmp / "go").exists(), 300, interval=0.1,
                   message="the test to let the run finish")
        topologies.unpace(out)
        assert handle.wait(timeout=240) == "FINISHED", handle.status
    except BaseException:
        handle.kill()
        raise


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
