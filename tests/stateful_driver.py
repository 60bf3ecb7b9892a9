"""A Spark driver program for the effectively-once driver-restart test.

Usage: python stateful_driver.py NAME CORPUS OUT STATEMGR_URL WORK_DIR
Submits the stateful word count and waits; prints ``status <STATE> generation <N>`` at the end.
Started (and killed with kill -9) by the test.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import stateful_word_count as swc  # noqa: E402
from heron_spark import submit  # noqa: E402


def main(argv: list[str]) -> int:
    name, corpus, out, statemgr, work = argv
    topology = swc.build(name, Path(corpus), Path(out), config={swc.SLEEP_MS: 2})
    handle = submit(topology, master="local[4]",
                    conf={"heron.statemgr": statemgr, "heron.work.dir": work,
                          "heron.tracker.port": -1, **swc.SHORT_QUEUES})
    print("running", flush=True)
    status = handle.wait(timeout=600)
    print(f"status {status} generation {handle.status_detail()['generation']}", flush=True)
    return 0 if status == "FINISHED" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
