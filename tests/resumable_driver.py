"""A Spark driver program for the driver-restart tests: submits a word count, waits.

Usage: python resumable_driver.py KIND NAME CORPUS OUT STATEMGR_URL WORK_DIR
KIND is ``reliable`` (the at-least-once word count), ``stateful`` (the effectively-once
one), ``stateful-rocksdb`` (that one on the rocksdb state backend) or ``kafka-eo`` (Kafka ->
running count -> Kafka transactions, bounded: CORPUS is then a JSON file naming ``servers``,
``source`` and ``sink``; see ``kafka_word_count.build_running_counts``) or ``delta-eo``
(a file's words -> ``DeltaSink`` effectively once, two sink tasks; ``delta_support.build``;
OUT is the table). Prints
``status <STATE> generation <N>`` at the end. Started (and killed) by the tests.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import reliable_word_count as rwc  # noqa: E402
import stateful_word_count as swc  # noqa: E402
from heron_spark import submit  # noqa: E402


def _topology(kind: str, name: str, corpus: Path, out: Path):
    """The topology of ``kind`` and the runtime conf it runs with."""
    if kind == "kafka-eo":
        import json

        import kafka_word_count as kwc

        kafka = json.loads(corpus.read_text())
        return kwc.build_running_counts(name, kafka["servers"], kafka["source"], kafka["sink"],
                                        out=out, bounded=True, split_sleep_ms=25), \
            swc.SHORT_QUEUES
    if kind == "delta-eo":
        import delta_support as ds
        import parquet_word_count as pwc

        return ds.build(name, corpus, out, mode="EFFECTIVELY_ONCE", sinks=2, config={
            "topology.stmgrs": 2, "topology.stateful.checkpoint.interval.seconds": 0.5,
            pwc.SLEEP_MS: 2}), swc.SHORT_QUEUES
    if kind.startswith("stateful"):
        backend = "rocksdb" if kind == "stateful-rocksdb" else "memory"
        return swc.build(name, corpus, out, config={swc.SLEEP_MS: 2,
                                                    "heron.state.backend": backend}), \
            swc.SHORT_QUEUES
    return rwc.build(name, corpus, out,
                     config={rwc.SLEEP_MS: 3, "topology.message.timeout.secs": 5,
                             "topology.max.spout.pending": 200}), {}


def main(argv: list[str]) -> int:
    kind, name, corpus, out, statemgr, work = argv
    topology, conf = _topology(kind, name, Path(corpus), Path(out))
    handle = submit(topology, master="local[4]",
                    conf={"heron.statemgr": statemgr, "heron.work.dir": work,
                          "heron.tracker.port": -1, **conf})
    print("running", flush=True)
    status = handle.wait(timeout=600)
    print(f"status {status} generation {handle.status_detail()['generation']}", flush=True)
    return 0 if status == "FINISHED" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
