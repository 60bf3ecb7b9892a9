"""An effectively-once topology of event-time windows, for the crash and kill -9 tests.

- ``OffsetSpout``: each task emits its list of [name, ts] at event time ts, one every
  ``pace.ms``, from an offset kept in its checkpointed state (a rollback rewinds it).
- ``CrashingWindows``: tumbling event-time windows of 200 ms emitting (start, end, names);
  ``crash.at`` > 0 makes the first task to see that many tuples raise once (the marker file
  ``<out>/crashed`` remembers it across restarts).
- ``WindowSink``: keeps each window's names in its state only and writes them at the end of
  input to ``<out>/windows-<task>.json`` (atomically: a rollback after that re-runs the end).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from heron_spark import Bolt, Grouping, Spout, StatefulComponent, TopologyBuilder
from heron_spark import TumblingWindowBolt

OUT = "test.out.dir"


class OffsetSpout(Spout, StatefulComponent):
    outputs = ["name", "ts"]

    def init_state(self, stateful_state):
        self.state = stateful_state

    def initialize(self, config, context):
        self.events = config["events.per.task"][context.get_task_index()]
        self.offset = self.state.get("offset") or 0
        self.pace = float(config["pace.ms"]) / 1000.0
        self.due = 0.0

    def pre_save(self, checkpoint_id):
        self.state.put("offset", self.offset)

    def next_tuple(self):
        if self.offset >= len(self.events):
            self.declare_exhausted()
            return
        now = time.monotonic()
        if now < self.due:
            return
        self.due = now + self.pace
        name, ts = self.events[self.offset]
        self.offset += 1
        self.emit([name, ts], timestamp=ts)


class CrashingWindows(TumblingWindowBolt):
    outputs = ["start", "end", "names"]

    def initialize(self, config, context):
        super().initialize(config, context)
        self.crash_at = int(config["crash.at"])
        self.marker = Path(config[OUT]) / "crashed"
        self.seen = 0

    def process(self, tup):
        super().process(tup)
        self.seen += 1
        if self.crash_at and self.seen == self.crash_at and not self.marker.exists():
            self.marker.write_text(str(os.getpid()))
            raise RuntimeError("crashing once, as the test asked")

    def processWindow(self, window_info, tuples):  # noqa: N802 (heronpy's name)
        self.emit([window_info.start, window_info.end, sorted(t.values[0] for t in tuples)])


class WindowSink(Bolt, StatefulComponent):
    def init_state(self, stateful_state):
        self.state = stateful_state

    def initialize(self, config, context):
        self.out = Path(config[OUT]) / f"windows-{context.get_task_id()}.json"

    def process(self, tup):
        start, end, names = tup.values
        key = f"{start}:{end}"
        self.state.put(key, (self.state.get(key) or []) + names)

    def end_of_input(self):
        temp = self.out.with_suffix(".tmp")
        temp.write_text(json.dumps(dict(self.state.items())))
        os.replace(temp, self.out)


def build(name: str, events: list, out: Path, *, pace_ms: float, crash_at: int,
          windows: int = 1, extra: dict | None = None):
    """Return the topology: one spout task per list in ``events``, ``windows`` window tasks."""
    builder = TopologyBuilder(name)
    spout = builder.add_spout("events", OffsetSpout, par=len(events),
                              config={"events.per.task": events, "pace.ms": pace_ms,
                                      "topology.bolts.tuple.timestamp.max.lag.ms": 30})
    bolt = builder.add_bolt("windows", CrashingWindows, par=windows,
                            inputs={spout: Grouping.SHUFFLE},
                            config={"heron.window.event.time": True,
                                    "tumblingwindowbolt_duration_secs": 0.2,
                                    "crash.at": crash_at})
    builder.add_bolt("sink", WindowSink, par=1, inputs={bolt: Grouping.SHUFFLE})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE", OUT: str(out),
                        **(extra or {})})
    return builder.build()


def read_windows(out: Path) -> dict:
    """Return {(start, end): sorted names} the sink wrote (its window tasks' parts joined)."""
    got: dict = {}
    for path in sorted(out.glob("windows-*.json")):
        for key, names in json.loads(path.read_text()).items():
            start, end = (int(x) for x in key.split(":"))
            got.setdefault((start, end), []).extend(names)
    return {k: sorted(v) for k, v in got.items()}
