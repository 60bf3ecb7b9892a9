"""Timers of keyed bolts through whole topologies (in-process): event-time timers fired by the
watermark, processing-time timers by the wall clock, and timers surviving an effectively-once
restore. Each expected output is computed here from the input alone.

The keyed bolt ``RoundCount`` counts each key's tuples in rounds: a round starts at the key's
first tuple with no round open (time ``f``) and ends at ``f + 1000``, when an event-time timer
for that time fires and the bolt emits ``(key, f + 1000, tuples of the round with a timestamp
before it)``; tuples of later times wait for the next round, which starts at the first of them.
Each key is emitted by one spout task, so the bolt sees its tuples in the order that task
emitted them, and a watermark reaching ``f + 1000`` means every tuple before it has come:
the rounds depend on the input only, whenever the watermarks come.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from heron_spark import Bolt, Grouping, Spout, TopologyBuilder
from heron_spark.api.event_time import WATERMARK_MAX
from heron_spark.api.state import StatefulComponent
from heron_spark.testing import COLLECT_DIR, CollectingBolt, Pause, ScriptedSpout, Stamped, run_local

TIMEOUT = 30
LAG_MS = 300
ROUND_MS = 1000
FAST = {"topology.bolts.watermark.event.interval.ms": 10}


def _scripts(tasks: int = 2, per_task: int = 120, pause_every: int = 40) -> list[list]:
    """Each task's script: its own keys, timestamps out of order by less than ``LAG_MS``."""
    scripts = []
    for task in range(tasks):
        items: list = []
        for i in range(per_task):
            key = f"k{task + tasks * (i % 3)}"  # task t emits keys k{t}, k{t+2}, k{t+4}
            jitter = (i * 7919 + task * 104_729) % 250  # < LAG_MS: never late
            items.append(Stamped((key,), 1_000_000 + 40 * i + jitter))
            if i % pause_every == pause_every - 1:
                items.append(Pause(0.03))  # watermarks move, and timers fire, mid-run
        scripts.append(items)
    return scripts


def expected_rounds(scripts: list[list]) -> list[tuple]:
    """Return every ``(key, round end, count)`` RoundCount emits, from the input alone."""
    by_key: dict[str, list[int]] = {}
    for script in scripts:
        for item in script:
            if isinstance(item, Stamped):
                by_key.setdefault(item.values[0], []).append(item.timestamp)
    out = []
    for key, stamps in by_key.items():
        waiting = list(stamps)  # in emission order
        while waiting:
            end = waiting[0] + ROUND_MS
            out.append((key, end, sum(1 for ts in waiting if ts < end)))
            waiting = [ts for ts in waiting if ts >= end]
    return sorted(out)


class RoundCount(Bolt):
    """See the module docstring. ``pending``: per key, the timestamps not counted yet."""

    outputs = ["key", "end", "count"]

    def initialize(self, config, context):
        self.context = context
        self.pending: dict = {}
        self.fired: list = []  # (ts, watermark then) of each timer, in firing order
        self.log = Path(config[COLLECT_DIR]) / f"fired-{context.get_task_id()}.json"

    def process(self, tup):
        key = tup.values[0]
        waiting = self._waiting(key)
        if not waiting:
            self.context.register_event_time_timer(key, tup.timestamp + ROUND_MS)
        waiting.append(tup.timestamp)
        self._store(key, waiting)

    def on_timer(self, key, ts_ms, kind):
        assert kind == "event"
        self.fired.append((ts_ms, self.context.get_current_watermark()))
        waiting = self._waiting(key)
        self.emit([key, ts_ms, sum(1 for ts in waiting if ts < ts_ms)])
        waiting = [ts for ts in waiting if ts >= ts_ms]
        if waiting:  # the next round started already; its end may be reached too
            self.context.register_event_time_timer(key, waiting[0] + ROUND_MS)
        self._store(key, waiting)

    def end_of_input(self):
        self.log.write_text(json.dumps(self.fired))

    def _waiting(self, key) -> list:
        return list(self.pending.get(key) or [])

    def _store(self, key, waiting: list) -> None:
        self.pending[key] = waiting


def _topology(name: str, scripts: list[list], bolt=RoundCount, spout=None, config=None):
    builder = TopologyBuilder(name)
    spec = spout or ScriptedSpout.spec(name="events", par=len(scripts), scripts=scripts,
                                       fields=("key",),
                                       config={"topology.bolts.tuple.timestamp.max.lag.ms":
                                               LAG_MS})
    if spout is None:
        builder.add_spec(spec)
    rounds = builder.add_bolt("rounds", bolt, par=2, inputs={spec: Grouping.fields("key")})
    builder.add_bolt("sink", CollectingBolt, par=1, inputs={rounds: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 2, **FAST, **(config or {})})
    return builder


@pytest.mark.parametrize("reliability", ["ATMOST_ONCE", "ATLEAST_ONCE"])
def test_event_time_timers_fire_per_key_when_the_watermark_reaches_them(tmp_path, reliability):
    scripts = _scripts()
    builder = _topology("event-timers", scripts,
                        config={"topology.reliability.mode": reliability,
                                "topology.bolt.auto.ack": True})
    run = run_local(builder.build(), timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    collected = run.collected("sink")
    got = sorted(c.values for c in collected)
    assert got == expected_rounds(scripts)
    assert sum(count for _, _, count in got) == 240
    assert {c.timestamp for c in collected} == {None}  # on_timer's emits carry none
    logs = [json.loads(p.read_text()) for p in tmp_path.glob("fired-*.json")]
    assert sum(map(len, logs)) == len(got)
    for fired in logs:  # in time order, each once the watermark reached it
        assert [ts for ts, _ in fired] == sorted(ts for ts, _ in fired)
        assert all(watermark >= ts for ts, watermark in fired)
    # some rounds ended mid-run, the rest at the end of input
    marks = [watermark for fired in logs for _, watermark in fired]
    assert min(marks) < WATERMARK_MAX and max(marks) == WATERMARK_MAX


# ---- effectively once: the timers are restored with the state ------------------------------
class ReplayableScript(Spout, StatefulComponent):
    """Emits its task's script (``Stamped`` items, ``Pause``s); its position is checkpointed."""

    outputs = ["key"]

    def init_state(self, state):
        self.state = state

    def initialize(self, config, context):
        self.items = config["scripts"][context.get_task_index()]
        self.position = self.state.get("position") or 0
        self.resume_at = 0.0

    def pre_save(self, checkpoint_id):
        self.state.put("position", self.position)

    def next_tuple(self):
        if time.monotonic() < self.resume_at:
            return
        if self.position >= len(self.items):
            self.declare_exhausted()
            return
        item = self.items[self.position]
        self.position += 1
        if isinstance(item, Pause):
            self.resume_at = time.monotonic() + item.seconds
        else:
            self.emit(list(item.values), timestamp=item.timestamp)


class StatefulRoundCount(RoundCount, StatefulComponent):
    """RoundCount keeping ``pending`` in its state; crashes once after ``crash.at`` tuples.

    A restarted task notes in ``<out>/restored-<task>.json`` how many keys it found pending in
    the restored state: each has a timer that only the checkpoint can give back.
    """

    def init_state(self, state):
        self.state = state

    def initialize(self, config, context):
        super().initialize(config, context)
        self.out = Path(config[COLLECT_DIR])
        self.crash_at = int(config["crash.at"])
        self.seen = 0
        if (self.out / "crashed").exists():
            pending = sum(1 for _, waiting in self.state.items() if waiting)
            (self.out / f"restored-{context.get_task_id()}.json").write_text(
                json.dumps(pending))

    def process(self, tup):
        super().process(tup)
        self.seen += 1
        marker = self.out / "crashed"
        if self.seen == self.crash_at and not marker.exists():
            marker.write_text(str(os.getpid()))
            raise RuntimeError("crashing once, as the test asked")

    def _waiting(self, key) -> list:
        return list(self.state.get(key) or [])

    def _store(self, key, waiting: list) -> None:
        self.state.put(key, waiting)


class StatefulSink(Bolt, StatefulComponent):
    """Keeps what it receives in its state; writes it to ``<out>/sink-<task>.json`` at the end."""

    def init_state(self, state):
        self.state = state

    def initialize(self, config, context):
        self.path = Path(config[COLLECT_DIR]) / f"sink-{context.get_task_id()}.json"

    def process(self, tup):
        key, end, count = tup.values
        self.state.put(f"{key}@{end}", count)

    def end_of_input(self):
        temp = self.path.with_suffix(".tmp")
        temp.write_text(json.dumps(dict(self.state.items())))
        os.replace(temp, self.path)


def test_timers_survive_an_effectively_once_restore_and_the_output_is_exact(tmp_path):
    scripts = _scripts(per_task=160, pause_every=10)  # about 0.5 s of input
    builder = TopologyBuilder("timers-eo")
    events = builder.add_spout("events", ReplayableScript, par=2,
                               config={"scripts": scripts,
                                       "topology.bolts.tuple.timestamp.max.lag.ms": LAG_MS})
    rounds = builder.add_bolt("rounds", StatefulRoundCount, par=2,
                              inputs={events: Grouping.fields("key")},
                              config={"crash.at": 100})
    builder.add_bolt("sink", StatefulSink, par=1, inputs={rounds: Grouping.SHUFFLE})
    builder.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                        "topology.stateful.checkpoint.interval.seconds": 0.05,
                        "heron.state.backend": "memory", "topology.stmgrs": 2, **FAST})
    run = run_local(builder.build(), timeout=TIMEOUT, collect_dir=tmp_path,
                    conf={"heron.work.dir": str(tmp_path / "work")})
    assert run.status == "FINISHED"
    assert (tmp_path / "crashed").exists()
    status = run.handle.checkpoints.status()
    assert status["restored_from"][1] > 0, status  # rolled back to a committed checkpoint
    restored = [json.loads(p.read_text()) for p in tmp_path.glob("restored-*.json")]
    assert restored and max(restored) > 0  # keys whose timers came from the checkpoint
    [sink] = tmp_path.glob("sink-*.json")
    got = sorted((key_end.split("@")[0], int(key_end.split("@")[1]), count)
                 for key_end, count in json.loads(sink.read_text()).items())
    assert got == expected_rounds(scripts)


# ---- processing time -----------------------------------------------------------------------
class Deadlines(Bolt):
    """Registers a processing-time timer per key, 150 ms on; emits (key, due, fired at) then."""

    outputs = ["key", "due", "fired"]

    def initialize(self, config, context):
        self.context = context

    def process(self, tup):
        key = tup.values[0]
        due = int(time.time() * 1000) + 150
        self.context.register_processing_time_timer(key, due)
        self.context.register_processing_time_timer(key, due)  # twice: one timer
        self.context.register_processing_time_timer(f"{key}-deleted", due)
        self.context.delete_processing_time_timer(f"{key}-deleted", due)

    def on_timer(self, key, ts_ms, kind):
        assert kind == "processing"
        self.emit([key, ts_ms, int(time.time() * 1000)])


class UntilFired(Spout):
    """Emits keys k0..k9, then ends once the sink saw them all (or after 10 s)."""

    outputs = ["key"]

    def initialize(self, config, context):
        self.keys = [f"k{i}" for i in range(10)]
        self.flag = Path(config[COLLECT_DIR]) / "all-fired"
        self.deadline = time.monotonic() + 10.0

    def next_tuple(self):
        if self.keys:
            self.emit([self.keys.pop()])
        elif self.flag.exists() or time.monotonic() > self.deadline:
            self.declare_exhausted()


class FlagWhenAll(CollectingBolt):
    """Collects; writes ``all-fired`` once ten tuples came."""

    def initialize(self, config, context):
        super().initialize(config, context)
        self.flag = Path(config[COLLECT_DIR]) / "all-fired"
        self.count = 0

    def process(self, tup):
        super().process(tup)
        self.count += 1
        if self.count == 10:
            self._flush()
            self.flag.write_text("10")


def processing_topology(name: str) -> TopologyBuilder:
    """Ten keys, a processing-time timer each, 150 ms on; the spout ends once all fired."""
    builder = TopologyBuilder(name)
    keys = builder.add_spout("keys", UntilFired, par=1)
    timed = builder.add_bolt("timed", Deadlines, par=2, inputs={keys: Grouping.fields("key")})
    builder.add_bolt("sink", FlagWhenAll, par=1, inputs={timed: Grouping.SHUFFLE})
    builder.set_config({"topology.stmgrs": 2})
    return builder


def test_processing_time_timers_fire_at_their_wall_clock_time(tmp_path):
    run = run_local(processing_topology("processing-timers").build(), timeout=TIMEOUT,
                    collect_dir=tmp_path)
    assert run.status == "FINISHED"
    got = run.collected("sink")
    assert sorted(c.values[0] for c in got) == [f"k{i}" for i in range(10)]
    assert all(fired >= due for _, due, fired in (c.values for c in got))
