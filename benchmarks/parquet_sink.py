"""ParquetSink benchmark: rows/s from a Parquet folder to a committed Parquet folder.

Input: --rows rows ``(word string, n int64)`` in 4 Parquet files, generated with pyarrow.
Topology: ``FileSource`` (2 tasks, bounded) -> ``ParquetSink`` (2 tasks, shuffle),
``topology.stmgrs: 2``, Spark ``local[2]``. Per mode (--modes): the time from RUNNING to
FINISHED, rows/s over it, and the files and commit-log batches written; the committed rows
are counted through the commit log (a mismatch exits 1). Under at-least-once the sink acks a
tuple only once its file is committed, so ``topology.max.spout.pending`` is raised to the
roll size (--roll-rows) or the spouts would wait on the roll's timer.

    .venv/bin/python benchmarks/parquet_sink.py [--rows 200000] [--modes ATLEAST_ONCE,...]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import bench_env  # first: the paths and environment the topology's processes inherit

bench_env.prepare()

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from heron_spark import Grouping, TopologyBuilder, submit  # noqa: E402
from heron_spark.io import FileSource, ParquetSink  # noqa: E402
from heron_spark.io.parquet_store import CommitLog  # noqa: E402


def write_input(folder: Path, rows: int) -> None:
    folder.mkdir(parents=True)
    per = rows // 4
    for part in range(4):
        start = part * per
        count = per if part < 3 else rows - start
        pq.write_table(pa.table({"word": [f"w{(start + i) % 1000}" for i in range(count)],
                                 "n": list(range(start, start + count))}),
                       folder / f"part-{part}.parquet")


def run(spark, root: Path, mode: str, rows: int, roll_rows: int) -> dict:
    out = root / f"out-{mode.lower()}"
    builder = TopologyBuilder(f"bench-parquet-{mode.lower()}")
    source = builder.add_spout("rows", FileSource, par=2, config={
        "file.path": str(root / "in"), "file.format": "parquet", "file.bounded": True,
        "file.rows.per.call": 512})
    builder.add_bolt("out", ParquetSink, par=2, inputs={source: Grouping.SHUFFLE},
                     config={"parquet.path": str(out), "parquet.roll.rows": roll_rows})
    builder.set_config({"topology.reliability.mode": mode, "topology.stmgrs": 2,
                        "topology.max.spout.pending": roll_rows,
                        "topology.stateful.checkpoint.interval.seconds": 1.0})
    conf = {"heron.statemgr": f"file://{root}/state-{mode}", "heron.work.dir": f"{root}/work"}
    handle = submit(builder.build(), spark=spark, conf=conf, master="local[2]")
    handle.wait_running(timeout=300)
    started = time.monotonic()
    status = handle.wait(timeout=1800)
    secs = time.monotonic() - started
    log = CommitLog.open(str(out))
    files = log.files()
    committed = sum(pq.ParquetFile(f.path.removeprefix("file://")).metadata.num_rows
                    for f in files)
    return {"mode": mode, "status": status, "secs": secs, "rows": committed,
            "rows_per_sec": committed / secs, "files": len(files), "batches": len(log.names())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--roll-rows", type=int, default=20_000)
    parser.add_argument("--modes", default="ATMOST_ONCE,ATLEAST_ONCE,EFFECTIVELY_ONCE")
    args = parser.parse_args()
    spark = bench_env.local_session("local[2]", "parquet-sink-bench")
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench_parquet_") as tmp:
        root = Path(tmp)
        write_input(root / "in", args.rows)
        for mode in args.modes.split(","):
            result = run(spark, root, mode, args.rows, args.roll_rows)
            ok = result["status"] == "FINISHED" and result["rows"] == args.rows
            failed |= not ok
            print(f"ParquetSink {mode}: {result['rows']} rows in {result['secs']:.1f} s = "
                  f"{result['rows_per_sec']:,.0f} rows/s, {result['files']} files, "
                  f"{result['batches']} commit-log batches{'' if ok else '  MISMATCH'}",
                  flush=True)
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
