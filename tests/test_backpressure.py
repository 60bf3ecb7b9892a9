"""Backpressure: a bolt sleeping 10 ms per tuple behind a spout that could emit far faster.

The spout emits 256 KiB tuples (300 MiB in all) to a slow bolt with one task in each of
two containers, so both the local stmgr and the remote one must hold the spout back. The run
must end with exactly the emitted tuples processed, report time spent in backpressure (per
stmgr and for the slow component), and keep the peak RSS of every process under a bound set
from the configured queue limits: far less than the data that went through.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import fault_support as faults
from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.scheduler.submit import submit

pytestmark = pytest.mark.spark

MiB = 1024 * 1024
TUPLES = 1200
PAYLOAD_BYTES = 256 * 1024
OUT = "test.out.dir"
ALLOWANCE = 96 * MiB
HIGH, LOW = 2 * MiB, 1 * MiB
CONF = {"heron.stmgr.backpressure.high.water.bytes": HIGH,
        "heron.stmgr.backpressure.low.water.bytes": LOW,
        "heron.batch.max.tuples": 4,
        "heron.instance.out.queue.bytes": 1 * MiB}


class BlobSpout(Spout):
    """Emits (index, 256 KiB payload) as fast as it is let."""

    outputs = ["index", "payload"]

    def initialize(self, config, context):
        self.next = 0
        self.payload = b"x" * PAYLOAD_BYTES

    def next_tuple(self):
        if self.next >= TUPLES:
            self.declare_exhausted()
            return
        self.emit([self.next, self.payload])
        self.next += 1


class SlowBolt(Bolt):
    """Sleeps 10 ms per tuple; writes the indexes it saw when its input ends."""

    def initialize(self, config, context):
        self.seen = []
        self.path = Path(config[OUT]) / f"slow-{context.get_task_id()}.txt"

    def process(self, tup):
        time.sleep(0.010)
        index, payload = tup.values
        assert len(payload) == PAYLOAD_BYTES
        self.seen.append(index)

    def end_of_input(self):
        self.path.write_text("\n".join(map(str, self.seen)))


class PeakRss:
    """Samples the peak RSS (VmHWM) of every heron_spark process under a work folder."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.peaks: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            for role in ("instance", "stmgr", "metrics"):
                for pid in faults.find(self.work, role):
                    peak = faults.peak_rss_bytes(pid)
                    key = (role, pid)
                    self.peaks[key] = max(self.peaks.get(key, 0), peak)
            self._stop.wait(0.05)


def test_slow_bolt_backpressure_bounds_memory(spark, tmp_path, hconf):
    out = tmp_path / "out"
    out.mkdir()
    builder = TopologyBuilder("backpressure")
    spout = builder.add_spout("blobs", BlobSpout, par=1)
    builder.add_bolt("slow", SlowBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 2, OUT: str(out)})
    with PeakRss(tmp_path / "work") as rss:
        handle = submit(builder.build(), spark=spark.session, conf={**hconf, **CONF},
                        master="local[4]")
        assert handle.wait(timeout=180) == "FINISHED"
    seen = sorted(int(v) for p in out.glob("slow-*.txt") for v in p.read_text().split())
    assert seen == list(range(TUPLES))
    stmgrs = handle.metrics()["__stmgr__"]
    assert stmgrs["__backpressure-secs"] > 0 and stmgrs["__backpressure-episodes"] >= 1
    assert stmgrs["__backpressure-secs/slow"] > 0
    # Baseline: a fresh process that imported what a stmgr and an instance import. Allowance:
    # the configured queues (water marks, instance queues, out queues: under 16 MiB here) a few
    # times over, for copies while a batch is routed and memory the allocators keep.
    baseline = faults.import_baseline_rss()
    bound = baseline + ALLOWANCE
    data = TUPLES * PAYLOAD_BYTES
    report = {f"{role}-{pid}": f"{peak / MiB:.0f} MiB" for (role, pid), peak in rss.peaks.items()}
    print(f"baseline {baseline / MiB:.0f} MiB, bound {bound / MiB:.0f} MiB, data "
          f"{data / MiB:.0f} MiB, backpressure {stmgrs['__backpressure-secs']:.2f} s; {report}")
    assert ALLOWANCE * 3 < data  # the bound is meaningful: far less than the data moved
    assert all(peak < bound for peak in rss.peaks.values()), report
