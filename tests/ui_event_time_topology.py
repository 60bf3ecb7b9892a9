"""The topology the Event time view's browser test watches: timestamped tuples whose watermarks
settle at known values, and a bolt that counts a known set of them late.

``Events`` (``SPOUT_TASKS`` tasks) emits ``TUPLES`` tuples ``[n, late]`` per task, task index
``k``'s ``n``-th stamped ``timestamp(base, k, n)``, then idles without ending (the topology stays
RUNNING). With a lag of ``LAG_MS`` and idleness off (``heron.watermark.idle.ms`` 0), each spout
task's watermark settles at its newest timestamp minus the lag, and every bolt task's at the
minimum of those. ``Late`` (``BOLT_TASKS`` tasks, shuffle grouping) counts each tuple marked
``late`` (every ``LATE_EVERY``-th) with ``context.record_late_tuples(1)`` and writes its own
tally to ``<dir>/late-<task>.json``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.api import api_constants as keys

SPOUT_TASKS = 2
BOLT_TASKS = 2
TUPLES = 200
LATE_EVERY = 10
LAG_MS = 2_000
STEP_MS = 10
TASK_OFFSET_MS = 1_500  # task index k's timestamps start k * this later
DIR_KEY = "test.ui.dir"
BASE_KEY = "test.ui.base.ms"
IDLE_SECS = 0.05


def timestamp(base: int, index: int, n: int) -> int:
    """The event time (ms) of spout task index ``index``'s ``n``-th tuple."""
    return base + index * TASK_OFFSET_MS + n * STEP_MS


def spout_watermark(base: int, index: int) -> int:
    """Where spout task index ``index``'s watermark settles: its newest timestamp - the lag."""
    return timestamp(base, index, TUPLES - 1) - LAG_MS


LATE_TOTAL = SPOUT_TASKS * len(range(0, TUPLES, LATE_EVERY))


class Events(Spout):
    outputs = ["n", "late"]

    def initialize(self, config, context):
        self.base = int(config[BASE_KEY])
        self.index = context.get_task_index()
        self.next = 0

    def next_tuple(self):
        if self.next < TUPLES:
            n = self.next
            self.emit([n, n % LATE_EVERY == 0], timestamp=timestamp(self.base, self.index, n))
            self.next += 1
        else:
            time.sleep(IDLE_SECS)


class Late(Bolt):
    def initialize(self, config, context):
        self.context = context
        self.late = 0
        self.path = Path(config[DIR_KEY]) / f"late-{context.get_task_id()}.json"

    def process(self, tup):
        if tup.values[1]:
            self.context.record_late_tuples(1)
            self.late += 1
            temp = self.path.with_suffix(".tmp")
            temp.write_text(json.dumps(self.late))
            os.replace(temp, self.path)


def topology(name: str, folder: Path, base_ms: int):
    builder = TopologyBuilder(name)
    # the spout's own config: a topology-wide heron.* key is read as a system key (and refused)
    events = builder.add_spout("events", Events, par=SPOUT_TASKS, config={
        keys.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS: LAG_MS, keys.HERON_WATERMARK_IDLE_MS: 0})
    builder.add_bolt("late", Late, par=BOLT_TASKS, inputs={events: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 2,
                        keys.TOPOLOGY_BOLTS_WATERMARK_EVENT_INTERVAL_MS: 100,
                        DIR_KEY: str(folder), BASE_KEY: base_ms})
    return builder
