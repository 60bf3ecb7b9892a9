"""A Spark driver program for the driver-restart test: submits the reliable word count, waits.

Usage: python resumable_driver.py NAME CORPUS OUT STATEMGR_URL WORK_DIR
Prints ``status <STATE> generation <N>`` at the end. Started (and killed) by the tests.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import reliable_word_count as rwc  # noqa: E402
from heron_spark import submit  # noqa: E402


def main(argv: list[str]) -> int:
    name, corpus, out, statemgr, work = argv
    topology = rwc.build(name, Path(corpus), Path(out),
                         config={rwc.SLEEP_MS: 3, "topology.message.timeout.secs": 5,
                                 "topology.max.spout.pending": 200})
    handle = submit(topology, master="local[4]",
                    conf={"heron.statemgr": statemgr, "heron.work.dir": work,
                          "heron.tracker.port": -1})
    print("running", flush=True)
    status = handle.wait(timeout=600)
    print(f"status {status} generation {handle.status_detail()['generation']}", flush=True)
    return 0 if status == "FINISHED" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
