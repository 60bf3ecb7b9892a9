"""A Spark Connect client that submits a topology: ``connect_client.py MODE URL FOLDER OPTIONS``.

Run by ``tests/test_connect.py`` in its own process, which holds a Spark Connect session only
(never a SparkContext). Prints one JSON object last, for the test to check. The scenarios
(``SCENARIOS``) take any session: a test body shared by both session kinds
(``connect_support.session_kinds``) runs one here under Connect and in the test process on a
classic session.

- ``wordcount``: the at-least-once word count of ``reliable_word_count`` run bounded, with
  ``options["reliability"]`` as its reliability mode; prints the counts (raw and de-duplicated).
- ``wordcount`` with ``options["kill"]``: the same, and ``kill -9`` of one instance process
  while it runs (``options["victim"]`` ``stmgr``: of container 1's stmgr, then waits for it to
  be restarted and for the TMaster to re-broadcast the plan with its new address).
- ``placed``: the at-most-once word count with ``heron.tmaster.placement`` container; prints
  where its TMaster ran (its location record, container 0's ready file), what the handle saw
  while it ran, the counts and the stored final state.
- ``stateful``: the effectively-once word count of ``stateful_word_count``; once two
  checkpoints are committed, ``kill -9`` of every process of container
  ``options["container"]`` at once (its barrier task's Spark Python worker, the supervisor
  thread in it, and its children: stmgr, instances, metrics manager, in container 0 the
  TMaster); prints the pids killed, the checkpoint status and the generation at the end.
- ``manage``: the at-least-once word count (``manage_topologies.build_word_count``, which
  records which count task saw which word), deactivated until its output stops growing,
  activated, then rescaled with ``handle.update`` (count 2 -> 3 -> 1) while it runs; prints
  what the handle reported at each step and what the state manager stored for count 3.
- ``kill``: an unbounded topology, then ``handle.kill()``; prints the final status and the
  pids of the stmgrs and instances the physical plan listed before the kill.
- ``cancel``: an unbounded topology stopped by ``spark.interruptTag`` from the client's main
  thread (the stage runs in another); with ``options["recover"]``, first a container recovery
  (the driver interrupts the stage and resubmits it as generation 1).
- ``netns``: run from a network namespace that reaches only the Connect endpoint: a word
  count (status through the handle while it runs, timed; its final metrics), then an
  unbounded topology deactivated, activated and killed through the handle.
  ``options["statemgr"]``: the state manager URL (default: a folder of ``FOLDER``); the
  submit's time and state-manager jobs are reported.
- ``abandon``: an unbounded topology (``connect-forever``); prints its id and generation once
  it runs, then blocks until killed (the test's ``kill -9``: a client gone for good).
- ``unimportable``: a topology whose module only this client can import; prints the error
  (with ``options["installed_only"]``: the word count, for a server whose workers lack
  heron_spark itself).
- ``stream``: ``stream_topology`` submitted, its stream read by ``readStream.format(
  "heron_spark")`` (topology, component, stream) into a memory sink of this session, files
  added after the query started; then the topology killed. Prints the rows seen and expected.
- ``state``: ``state_source_topology``'s stateful word count (``options["backend"]``) run
  until a committed checkpoint holds every word, killed, then its state read with
  ``spark.read.format("heron_spark").option("state", ...)``; prints the rows and the errors
  of bad reads.
- ``dataframe``: a topology whose spout is ``from_dataframe(spark.range(...)...)`` (written by
  the server's executors) into a ``ParquetSink``, run to its end; prints what
  ``spark.read.parquet`` and ``spark.read.format("heron_spark")`` read back.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

TIMEOUT = 240


def _session(url: str):
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(url).getOrCreate()


def _conf(folder: Path, options: dict | None = None) -> dict:
    statemgr = (options or {}).get("statemgr") or f"file://{folder}/state"
    return {"heron.statemgr": statemgr, "heron.work.dir": f"{folder}/work"}


def wordcount(spark, folder: Path, options: dict) -> dict:
    import fault_support as faults
    import reliable_word_count as rwc
    from heron_spark import submit
    from heron_spark.testing import wait_until

    name = options.get("name", "connect-wc")
    corpus, out = folder / "corpus.txt", folder / "out"
    text = rwc.write_corpus(corpus, int(options.get("lines", 1000)))
    config = {"topology.reliability.mode": options.get("reliability", "ATLEAST_ONCE"),
              **options.get("config", {})}
    topology = rwc.build(name, corpus, out, spouts=2, config=config)
    started = time.monotonic()
    handle = submit(topology, spark=spark, conf=_conf(folder))
    handle.wait_running(timeout=120)
    running = time.monotonic() - started
    killed = None
    if options.get("kill"):
        def progress() -> int:
            return sum(path.stat().st_size for path in out.glob("count-*.log"))
        wait_until(lambda: progress() > 20_000, 60, message="the word count to make progress")
        work = folder / "work" / name
        if options.get("victim") == "stmgr":  # container 1's: the TMaster may be in container 0
            [stmgr] = faults.find(work, "stmgr", container=1)
            [before] = [s.data_port for s in handle.physical_plan.stmgrs
                        if s.container_index == 1]
            faults.kill9(stmgr)
            killed = "stmgr"
            wait_until(lambda: [p for p in faults.find(work, "stmgr", container=1)
                                if p != stmgr], 60, message="the stmgr to be restarted")
            wait_until(lambda: [s for s in handle.physical_plan.stmgrs
                                if s.container_index == 1 and s.data_port != before], 60,
                       interval=0.5,
                       message="the TMaster to re-broadcast the plan with the new stmgr address")
        else:
            victim = faults.find(work, "instance", component="count")[0]
            killed = faults.task_of(victim)
            faults.kill9(victim)
    state = handle.wait(timeout=TIMEOUT)
    raw, unique, records = rwc.read_counts(out)
    return {"state": state, "raw": dict(raw), "unique": dict(unique), "records": records,
            "killed_task": killed, "running_secs": round(running, 2),
            "failures": handle.status_detail().get("instance_failures", {}),
            "lines": len(text)}


def placed(spark, folder: Path, options: dict) -> dict:
    """Run the at-most-once word count with its TMaster in container 0; report where it ran."""
    import reliable_word_count as rwc
    from heron_spark import submit
    from heron_spark.contract.layout import TMASTER, container_root
    from heron_spark.statemgr import open_state_manager

    name = options.get("name", "placed-wc")
    conf = {**_conf(folder), "heron.tmaster.placement": "container", "heron.kill.grace.secs": 5}
    corpus, out = folder / "corpus.txt", folder / "out"
    rwc.write_corpus(corpus, int(options.get("lines", 1000)))
    topology = rwc.build(name, corpus, out, config={"topology.reliability.mode": "ATMOST_ONCE",
                                                    rwc.SLEEP_MS: 5})
    handle = submit(topology, spark=spark, conf=conf)
    try:
        running = handle.wait_running(120)
        with open_state_manager(conf["heron.statemgr"]) as statemgr:
            location = statemgr.get_tmaster_location(name) or {}
        root = container_root(f"{folder}/work", name, 0, 0)
        seen = {"running": running, "tmaster": type(handle._tmaster).__name__,
                "location": {"generation": location.get("generation"),
                             "pid": location.get("pid")},
                "ready": (root / f"{TMASTER}.ready.json").exists(),
                "has_plan": handle.physical_plan is not None,
                "registered": len(handle.status_detail()["registered"]),
                "status": handle.status}
        state = handle.wait(timeout=TIMEOUT)
    finally:
        handle.kill()
    with open_state_manager(conf["heron.statemgr"]) as statemgr:
        stored = statemgr.get_execution_state(name).state
    raw, _unique, _records = rwc.read_counts(out)
    return {**seen, "state": state, "stored": stored, "raw": dict(raw), "pid": os.getpid(),
            "executed": handle.metrics()["count"]["__execute-count/split/default"]}


def stateful(spark, folder: Path, options: dict) -> dict:
    import fault_support as faults
    import stateful_word_count as swc
    from heron_spark import submit
    from heron_spark.statemgr import open_state_manager
    from heron_spark.testing import wait_until

    name = options.get("name", "connect-eo")
    corpus, out = folder / "corpus.txt", folder / "out"
    swc.write_corpus(corpus, int(options.get("lines", 8000)))
    topology = swc.build(name, corpus, out, config={
        swc.SLEEP_MS: 2, "heron.stage.resubmit.backoff.secs": 0.5})
    conf = {**_conf(folder), **swc.SHORT_QUEUES}
    handle = submit(topology, spark=spark, conf=conf)
    assert handle.wait_running(timeout=120), handle.status

    def committed() -> int:
        with open_state_manager(conf["heron.statemgr"]) as statemgr:
            return int((statemgr.get_committed_checkpoint(name) or {}).get("id", 0))

    before = wait_until(lambda: committed() >= 2 and committed(), 90,
                        message="two committed checkpoints")
    container = int(options.get("container", 1))
    folder_of = folder / "work" / name / "gen-0" / f"container-{container}"
    [stmgr] = faults.find(folder_of, "stmgr")
    worker = faults.parent_of(stmgr)  # the Spark Python worker running the barrier task
    children = [pid for pid, _, _ in faults.processes_under(folder_of)]
    killed = {"worker": worker, "children": children,
              "tmaster": faults.find(folder_of, "tmaster")}
    for pid in (worker, *children):  # the whole container at once, as a lost machine
        try:
            faults.kill9(pid)
        except ProcessLookupError:
            pass
    state = handle.wait(timeout=TIMEOUT)
    detail = handle.status_detail()
    return {"state": state, "counts": dict(swc.read_counts(out)), "killed": killed,
            "committed_before": before, "generation": detail.get("generation"),
            "checkpoint": detail.get("checkpoint"), "work": str(folder / "work" / name)}


def manage(spark, folder: Path, options: dict) -> dict:
    import manage_topologies as mt
    import reliable_word_count as rwc
    from heron_spark import TopologyValueError, submit
    from heron_spark.testing import wait_until

    name = options.get("name", "connect-manage")
    corpus, out = folder / "corpus.txt", folder / "out"
    rwc.write_corpus(corpus, int(options.get("lines", 4000)))
    topology = mt.build_word_count(name, corpus, out, spouts=2, config={
        "topology.message.timeout.secs": 4, "topology.max.spout.pending": 300,
        rwc.SLEEP_MS: 3})
    started, steps = time.monotonic(), {}

    def step(what: str) -> None:
        steps[what] = round(time.monotonic() - started, 1)

    handle = submit(topology, spark=spark, conf=_conf(folder))
    assert handle.wait_running(timeout=120), handle.status
    step("running")

    def progress() -> int:
        return sum(path.stat().st_size for path in out.glob("count-*.log"))

    def more_than(seen: int, what: str) -> int:
        return wait_until(lambda: (progress() > seen) and progress(), 90, message=what)

    more_than(10_000, "the word count to make progress")
    handle.deactivate()
    paused = handle.status
    wait_until(_Unchanged(progress), 60, interval=1.0,
               message="the output to stop growing while deactivated")
    stopped_at = progress()
    step("paused")
    handle.activate()
    wait_until(lambda: handle.status == "RUNNING", 30, interval=0.7,
               message="the topology to run again")
    more_than(stopped_at + 5_000, "progress after activate")
    step("activated")
    refused = None
    try:
        handle.update({"count": 0})
    except TopologyValueError as exc:
        refused = exc.component
    up = handle.update({"count": 3})
    step("update 3")
    plan_counts = sorted(i.component_index for i in handle.physical_plan.instances
                         if i.component == "count")
    stored = wait_until(lambda: _stored_counts(_conf(folder)["heron.statemgr"], name, "count")
                        == [3, 3] and [3, 3], 30,
                        message="the update's packing plan and topology to be stored")
    wait_until(lambda: sum(len(w) for w in mt.read_routes(out).get(3, {}).values()) >= 40, 90,
               message="words to reach the three count tasks")
    step("three counted")
    down = handle.update({"count": 1})
    step("update 1")
    state = handle.wait(timeout=TIMEOUT)
    step("finished")
    return {"steps": steps, "state": state, "paused": paused, "stopped_at": stopped_at,
            "refused": refused, "generations": [up, down], "plan_counts": plan_counts,
            "stored_counts": stored, "generation": handle.status_detail()["generation"]}


def _stored_counts(statemgr_url: str, name: str, component: str) -> list[int]:
    """Return ``component``'s instances in the stored packing plan and its stored parallelism."""
    from heron_spark.statemgr import open_state_manager

    with open_state_manager(statemgr_url) as statemgr:
        packing, topology = statemgr.get_packing_plan(name), statemgr.get_topology(name)
    return [sum(i.component == component for c in packing.containers for i in c.instances),
            {c.name: c.parallelism for c in topology.components}[component]]


class _Unchanged:
    """A condition for ``wait_until``: true when ``read()`` returns what it did last call."""

    def __init__(self, read) -> None:
        self.read = read
        self.last: object = None

    def __call__(self) -> bool:
        now = self.read()
        same, self.last = now == self.last, now
        return same


def kill(spark, folder: Path, options: dict) -> dict:
    import resilience_topologies as topo
    from heron_spark import submit

    name = "connect-forever"
    handle = submit(topo.numbers(name, folder / "n", count=-1, sleep_ms=1), spark=spark,
                    conf=_conf(folder))
    assert handle.wait_running(120)
    plan = handle.physical_plan
    pids = [s.pid for s in plan.stmgrs] + [i.pid for i in plan.instances]
    handle.kill()
    state = handle.wait(timeout=60)
    spark.range(3).collect()  # the session is still usable
    return {"state": state, "work": str(folder / "work" / name), "pid": os.getpid(),
            "pids": pids}


def abandon(spark, folder: Path, options: dict) -> dict:
    import threading

    import resilience_topologies as topo
    from heron_spark import submit

    name = "connect-forever"
    handle = submit(topo.numbers(name, folder / "n", count=-1, sleep_ms=1), spark=spark,
                    conf=_conf(folder))
    assert handle.wait_running(120)
    detail = handle.status_detail()
    print(json.dumps({"id": detail["id"], "generation": detail["generation"],
                      "pid": os.getpid()}), flush=True)
    threading.Event().wait()  # until the test kills this process
    return {}


def cancel(spark, folder: Path, options: dict) -> dict:
    import resilience_topologies as topo
    from heron_spark import submit
    from heron_spark.scheduler.spark_scheduler import job_tag
    from heron_spark.testing import wait_until

    name = "connect-cancel"
    handle = submit(topo.numbers(name, folder / "n", count=-1, sleep_ms=1), spark=spark,
                    conf=_conf(folder))
    assert handle.wait_running(120)
    generation = None
    if options.get("recover"):  # the driver replaces its containers: interrupt, resubmit
        handle._run.recover("asked by the test")
        wait_until(lambda: handle.status_detail()["generation"] == 1
                   and len(handle.status_detail()["registered"]) == 2, 120, interval=0.1,
                   message="generation 1 to register")
        generation = handle.status_detail()["generation"]
    interrupted = spark.interruptTag(job_tag(name))  # the user's cancel, from this thread
    state = handle.wait(timeout=60)
    return {"state": state, "interrupted": interrupted, "generation": generation,
            "reason": handle.status_detail().get("reason")}


def netns(spark, folder: Path, options: dict) -> dict:
    import statistics

    import reliable_word_count as rwc
    import resilience_topologies as topo
    from heron_spark import submit
    from heron_spark.scheduler.remote import RemoteTMaster
    from heron_spark.testing import wait_until

    corpus, out = folder / "corpus.txt", folder / "out"
    rwc.write_corpus(corpus, int(options.get("lines", 1000)))
    topology = rwc.build("netns-wc", corpus, out, config={
        "topology.reliability.mode": "ATMOST_ONCE", rwc.SLEEP_MS: 40})
    started = time.perf_counter()
    handle = submit(topology, spark=spark, conf=_conf(folder, options))
    submit_secs = time.perf_counter() - started
    assert isinstance(handle._tmaster, RemoteTMaster)
    statemgr = handle._tmaster._statemgr
    submit_jobs = getattr(statemgr, "jobs", None)  # a RemoteStateManager's, one job each
    submit_job_secs = getattr(statemgr, "job_secs", None)
    assert handle.wait_running(120), handle.status
    costs, states = [], []
    for _ in range(7):  # one status call asks the TMaster in container 0 through a Spark job
        time.sleep(0.6)  # past the handle's cache
        started = time.perf_counter()
        states.append(handle.status)
        costs.append(time.perf_counter() - started)
    registered = handle.status_detail()["registered"]
    plan_stmgrs = len(handle.physical_plan.stmgrs)
    shown = repr(handle)
    state = handle.wait(timeout=TIMEOUT)
    counted = handle.metrics().get("count", {}).get("__execute-count/split/default", 0)

    forever = submit(topo.numbers("netns-forever", folder / "n", count=-1, sleep_ms=1),
                     spark=spark, conf=_conf(folder, options))
    assert forever.wait_running(120), forever.status
    forever.deactivate()
    paused = forever.status
    forever.activate()
    wait_until(lambda: forever.status == "RUNNING", 30, interval=0.7,
               message="the topology to run again")
    forever.kill()
    killed = forever.wait(timeout=60)
    return {"state": state, "states": states, "status_secs": costs,
            "status_median_secs": statistics.median(costs), "registered": registered,
            "plan_stmgrs": plan_stmgrs, "repr": shown, "counted": counted,
            "paused": paused, "killed": killed, "work": str(folder / "work"),
            "statemgr": type(statemgr).__name__, "submit_secs": submit_secs,
            "submit_statemgr_jobs": submit_jobs, "submit_statemgr_secs": submit_job_secs,
            "statemgr_jobs": getattr(statemgr, "jobs", None)}


def unimportable(spark, folder: Path, options: dict) -> dict:
    from heron_spark import WorkerEnvironmentError, submit

    private = folder / "client_only"
    private.mkdir(parents=True, exist_ok=True)
    (private / "client_only_topology.py").write_text(
        "from heron_spark import Grouping, Spout, TopologyBuilder\n"
        "from heron_spark.testing import COLLECT_DIR, CollectingBolt\n"
        "class OnlyHereSpout(Spout):\n"
        "    outputs = ['n']\n"
        "    def next_tuple(self):\n"
        "        self.emit([1])\n"
        "def build(out):\n"
        "    builder = TopologyBuilder('connect-unimportable')\n"
        "    spout = builder.add_spout('n', OnlyHereSpout, par=1)\n"
        "    builder.add_bolt('c', CollectingBolt, par=1, inputs={spout: Grouping.SHUFFLE},\n"
        "                     config={COLLECT_DIR: out})\n"
        "    return builder.build()\n")
    sys.path.insert(0, str(private))
    import client_only_topology

    topology = client_only_topology.build(str(folder / "c"))
    if options.get("installed_only"):  # only heron_spark itself, no module of the client's
        import reliable_word_count as rwc

        topology = rwc.build("connect-env", folder / "corpus.txt", folder / "out")
    try:
        submit(topology, spark=spark, conf=_conf(folder))
    except WorkerEnvironmentError as exc:
        return {"error": type(exc).__name__, "missing": exc.missing, "connect": exc.connect,
                "message": str(exc), "work_exists": (folder / "work").exists()}
    return {"error": None}


def stream(spark, folder: Path, options: dict) -> dict:
    import stream_topology as st

    result = st.stream_while_running(spark, "connect-stream", folder, _conf(folder),
                                     "connect_topology_stream", TIMEOUT)
    seen, expected = result["seen"], result["expected"]
    return {"state": result["state"], "exact": seen == expected,
            "final_exact": result["final"] == expected,
            "rows": sum(seen.values()), "expected": sum(expected.values()),
            "repeated": [list(row) for row, n in seen.items() if n > 1][:5],
            "latency_secs": result["latency_secs"], "secs": result["secs"],
            "connect": type(spark).__module__}


def state(spark, folder: Path, options: dict) -> dict:
    import state_source_topology as sst

    return sst.run_and_read(spark, folder, options.get("name", "connect-state"),
                            options.get("backend", "memory"), int(options.get("lines", 1500)),
                            TIMEOUT)


def dataframe(spark, folder: Path, options: dict) -> dict:
    from heron_spark import Grouping, TopologyBuilder, submit
    from heron_spark.io import ParquetSink, from_dataframe

    count = int(options.get("rows", 3000))
    df = (spark.range(0, count, 1, 3)
          .selectExpr("id", "id * 3 AS triple", "CAST(id % 7 AS STRING) AS k"))
    source = from_dataframe(df, path=str(folder / "df"))
    builder = TopologyBuilder("connect-dataframe")
    rows = builder.add_spout("rows", source, par=2)
    builder.add_bolt("out", ParquetSink, par=1, inputs={rows: Grouping.SHUFFLE},
                     config={"parquet.path": str(folder / "out")})
    builder.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    started = time.monotonic()
    handle = submit(builder.build(), spark=spark, conf=_conf(folder))
    state = handle.wait(timeout=TIMEOUT)
    secs = time.monotonic() - started

    def read(df) -> list[list]:
        return sorted([row["id"], row["triple"], row["k"]] for row in df.collect())

    return {"state": state, "fields": source.fields, "secs": secs,
            "parquet": read(spark.read.parquet(str(folder / "out"))),
            "heron_spark": read(spark.read.format("heron_spark").load(str(folder / "out"))),
            "expected": [[i, i * 3, str(i % 7)] for i in range(count)]}


# MODE -> the scenario: ``f(spark, folder, options) -> dict`` (JSON-able). Each takes any
# session: ``connect_support.ClassicSessionClient`` runs some on the tests' classic session.
SCENARIOS = {"wordcount": wordcount, "placed": placed, "stateful": stateful, "manage": manage, "kill": kill,
             "cancel": cancel, "netns": netns, "unimportable": unimportable,
             "abandon": abandon, "stream": stream, "dataframe": dataframe, "state": state}


def main() -> None:
    mode, url, folder, options = sys.argv[1], sys.argv[2], Path(sys.argv[3]), \
        json.loads(sys.argv[4])
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    spark = _session(url)
    assert "pyspark.context" not in sys.modules or \
        sys.modules["pyspark.context"].SparkContext._active_spark_context is None
    try:
        result = SCENARIOS[mode](spark, folder, options)
    finally:
        spark.stop()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
