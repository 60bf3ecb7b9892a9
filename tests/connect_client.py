"""A Spark Connect client that submits a topology: ``connect_client.py MODE URL FOLDER OPTIONS``.

Run by ``tests/test_connect.py`` in its own process, which holds a Spark Connect session only
(never a SparkContext). Prints one JSON object last, for the test to check:

- ``wordcount``: the at-least-once word count of ``reliable_word_count`` run bounded, with
  ``options["reliability"]`` as its reliability mode; prints the counts (raw and de-duplicated).
- ``wordcount`` with ``options["kill"]``: the same, and ``kill -9`` of one instance process
  while it runs (``options["victim"]`` ``stmgr``: of container 1's stmgr).
- ``kill``: an unbounded topology, then ``handle.kill()``; prints the final status.
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
        if options.get("victim") == "stmgr":  # container 1's: the TMaster is in container 0
            faults.kill9(faults.find(work, "stmgr", container=1)[0])
            killed = "stmgr"
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


def kill(spark, folder: Path, options: dict) -> dict:
    import resilience_topologies as topo
    from heron_spark import submit

    name = "connect-forever"
    handle = submit(topo.numbers(name, folder / "n", count=-1, sleep_ms=1), spark=spark,
                    conf=_conf(folder))
    assert handle.wait_running(120)
    handle.kill()
    state = handle.wait(timeout=60)
    spark.range(3).collect()  # the session is still usable
    return {"state": state, "work": str(folder / "work" / name), "pid": os.getpid()}


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
        handle._tmaster.recover_containers("asked by the test")
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


def main() -> None:
    mode, url, folder, options = sys.argv[1], sys.argv[2], Path(sys.argv[3]), \
        json.loads(sys.argv[4])
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    spark = _session(url)
    assert "pyspark.context" not in sys.modules or \
        sys.modules["pyspark.context"].SparkContext._active_spark_context is None
    run = {"wordcount": wordcount, "kill": kill, "cancel": cancel, "netns": netns,
           "unimportable": unimportable, "abandon": abandon, "stream": stream,
           "dataframe": dataframe}[mode]
    try:
        result = run(spark, folder, options)
    finally:
        spark.stop()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
