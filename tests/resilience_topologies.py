"""Small topologies for the resilience tests: numbers through a slow bolt, and a spout that
blocks in user code.

- ``NumberSpout``: task i emits the integers ``n`` with ``n % par == i`` below ``test.count``
  (``-1``: forever), then declares exhaustion. At-most-once; no replay.
- ``SlowBolt``: sleeps ``test.sleep.ms`` per tuple and appends each value to
  ``<test.out.dir>/bolt-<task>-<pid>.log`` (unbuffered, so a killed process keeps its lines).
- ``BlockingSpout``: emits ``test.count`` tuples in its first ``next_tuple`` call, then blocks
  inside ``next_tuple`` (user code) for ``test.block.secs``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder

COUNT = "test.count"
SLEEP_MS = "test.sleep.ms"
OUT = "test.out.dir"
BLOCK_SECS = "test.block.secs"


class NumberSpout(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self._par = context.get_component_parallelism(context.get_component_id())
        self._next = context.get_task_index()
        self._count = int(config[COUNT])

    def next_tuple(self):
        if 0 <= self._count <= self._next:
            self.declare_exhausted()
            return
        self.emit([self._next])
        self._next += self._par


class SlowBolt(Bolt):
    def initialize(self, config, context):
        self._sleep = float(config.get(SLEEP_MS, 0) or 0) / 1000.0
        folder = Path(config[OUT])
        folder.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(folder / f"bolt-{context.get_task_id()}-{os.getpid()}.log",
                           os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def process(self, tup):
        if self._sleep:
            time.sleep(self._sleep)
        os.write(self._fd, f"{tup.values[0]}\n".encode())


class BlockingSpout(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self._count = int(config[COUNT])
        self._block = float(config[BLOCK_SECS])
        self._done = False

    def next_tuple(self):
        if self._done:
            time.sleep(self._block)  # stuck in user code, well inside the user-code limit
            return
        for n in range(self._count):
            self.emit([n])
        self._done = True


def numbers(name: str, out: Path, *, count: int, sleep_ms: float = 0, spouts: int = 2,
            bolts: int = 2, containers: int = 2, config: dict | None = None):
    """NumberSpout -> (shuffle) -> SlowBolt."""
    builder = TopologyBuilder(name)
    spout = builder.add_spout("numbers", NumberSpout, par=spouts, config={COUNT: count})
    builder.add_bolt("slow", SlowBolt, par=bolts, inputs={spout: Grouping.SHUFFLE},
                     config={SLEEP_MS: sleep_ms, OUT: str(out)})
    builder.set_config({"topology.stmgrs": containers, **(config or {})})
    return builder.build()


def blocking(name: str, out: Path, *, count: int, block_secs: float):
    """BlockingSpout -> SlowBolt on one container."""
    builder = TopologyBuilder(name)
    spout = builder.add_spout("blocking", BlockingSpout, par=1,
                              config={COUNT: count, BLOCK_SECS: block_secs})
    builder.add_bolt("slow", SlowBolt, par=1, inputs={spout: Grouping.SHUFFLE},
                     config={OUT: str(out), SLEEP_MS: 1})
    builder.set_config({"topology.stmgrs": 1})
    return builder.build()


def bolt_values(out: Path) -> list[int]:
    """Every value any SlowBolt process logged."""
    return [int(line) for path in out.glob("bolt-*.log")
            for line in path.read_text().splitlines() if line]
