"""Event time in the Streamlet API: timestamped sources, event-time windows (tumbling, sliding,
session) for reduce_by_window, reduce_by_key_and_window and the joins, run in this process on
the ordinary runtime with out-of-order input from several spout tasks; every result against
the same windows computed in plain Python from the elements' event times. Then the refusals."""

from __future__ import annotations

import collections
import datetime
import random
from pathlib import Path

import pytest

from heron_spark import (GlobalStreamId, Grouping, SessionWindowBolt, TopologyBuilder,
                         TopologyRuntimeError, TopologyTypeError, TopologyValueError)
from heron_spark.streamlet import (Builder, Config, Generator, KeyedWindow, Timestamped, Window,
                                   WindowConfig)
from heron_spark.testing import CollectingBolt, run_local

TIMEOUT = 30
BASE = 1_700_000_000_000  # event times: ms since the epoch
LAG = 1_000               # each source task's elements are at most this far out of order
CONF = {"topology.bolts.watermark.event.interval.ms": 10}


def _events(count: int, keys: str, seed: int, step: int = 7) -> list[tuple[str, int, int]]:
    """Return ``count`` (key, value, event time) triples, shuffled within blocks of 16.

    Event times rise by ``step`` ms per element; shuffling blocks of 16 puts elements up to
    16 * step ms out of order (less than LAG), so none is late.
    """
    rng = random.Random(seed)
    events = [(rng.choice(keys), rng.randint(1, 9), BASE + i * step + rng.randint(0, step - 1))
              for i in range(count)]
    out = []
    for start in range(0, count, 16):
        block = events[start:start + 16]
        rng.shuffle(block)
        out += block
    return out


def _at_least_once() -> Config:
    """Return at-least-once settings whose spout tasks may hold every element open.

    A window acks its elements only once the watermark passed it: a spout task keeps the
    elements of the lag and the windows open, more than the default 100 pending.
    """
    config = Config()
    config.set_delivery_semantics(Config.ATLEAST_ONCE)
    config.set_user_config("topology.max.spout.pending", 2_000)
    return config


def _run(builder: Builder, tmp_path: Path, config: Config | None = None):
    """Run to the end (at-least-once unless ``config`` says otherwise)."""
    run = run_local(builder.topology("event_time", config or _at_least_once()), conf=CONF,
                    timeout=TIMEOUT, collect_dir=tmp_path / "collect")
    assert run.status == "FINISHED"
    return run


def _source(builder: Builder, events: list, partitions: int, lag: int = LAG):
    """Return the timestamped streamlet of (key, value, event time) ``events`` on ``partitions``."""
    return builder.new_source(events).set_num_partitions(partitions) \
        .assign_timestamps(lambda e: e[2], max_lag_ms=lag)


def _values(run, component: str) -> list:
    return [c.values[0] for c in run.collected(component)]


def _sliding_starts(ts: int, size: int, slide: int) -> list[int]:
    """Every start k * slide with start <= ts < start + size, counted out one by one."""
    return [start for start in range(ts - size + 1, ts + 1) if start % slide == 0]


def _sessions(stamped: list[tuple[int, int]], gap: int) -> list[tuple[int, int, list[int]]]:
    """Split (event time, value) pairs into sessions: (start, end, values), gap ms apart."""
    out: list[tuple[int, int, list[int]]] = []
    for ts, value in sorted(stamped):
        if out and ts < out[-1][1]:
            start, _, values = out[-1]
            out[-1] = (start, ts + gap, [*values, value])
        else:
            out.append((ts, ts + gap, [value]))
    return out


def _keyed(out: list) -> dict:
    """Return {(key, start, end): value} from (KeyedWindow, value) results, one per window."""
    got = {(keyed.key, keyed.window.start_time, keyed.window.end_time): value
           for keyed, value in out}
    assert len(got) == len(out)  # each key and window once: nothing fired twice
    return got


# --- windows --------------------------------------------------------------------------------

@pytest.mark.parametrize("semantics", [
    Config.ATLEAST_ONCE, Config.ATMOST_ONCE])
def test_event_time_tumbling_counts_per_key_match_plain_python(tmp_path, semantics):
    config = Config()
    config.set_delivery_semantics(semantics)
    events = _events(600, "abcd", seed=1)
    builder = Builder()
    _source(builder, events, 3).map(lambda e: (e[0], e[1])) \
        .reduce_by_key_and_window(WindowConfig.event_time_tumbling(500), lambda a, b: a + b) \
        .set_num_partitions(2).to_bolt(CollectingBolt, name="sums")
    run = _run(builder, tmp_path, config)
    out = _values(run, "sums")
    assert all(isinstance(keyed, KeyedWindow) for keyed, _ in out)
    expected: dict = collections.Counter()
    for key, value, ts in events:
        start = ts - ts % 500
        expected[(key, start, start + 500)] += value
    assert _keyed(out) == expected


def test_event_time_sliding_reduce_by_window_matches_plain_python(tmp_path):
    events = _events(500, "x", seed=2)
    builder = Builder()
    _source(builder, events, 3).filter(lambda e: e[1] != 5).map(lambda e: e[1]) \
        .reduce_by_window(WindowConfig.event_time_sliding(datetime.timedelta(milliseconds=300),
                                                          100),
                          lambda a, b: a + b) \
        .to_bolt(CollectingBolt, name="totals")
    run = _run(builder, tmp_path)
    out = _values(run, "totals")
    assert all(isinstance(window, Window) for window, _ in out)
    got = {(window.start_time, window.end_time): total for window, total in out}
    assert len(got) == len(out)
    expected: dict = collections.Counter()
    for _, value, ts in events:
        if value != 5:
            for start in _sliding_starts(ts, 300, 100):
                expected[(start, start + 300)] += value
    assert got == expected


def test_event_time_sessions_of_the_whole_stream_reduce_by_window(tmp_path):
    rng = random.Random(6)
    stamps = sorted(BASE + rng.randint(0, 3_000) for _ in range(60))  # some gaps over 60 ms
    events = [("x", rng.randint(1, 9), ts) for ts in stamps]
    rng.shuffle(events)
    builder = Builder()
    _source(builder, events, 2, lag=4_000).map(lambda e: e[1]) \
        .reduce_by_window(WindowConfig.event_time_session(60), lambda a, b: a + b) \
        .to_bolt(CollectingBolt, name="sessions")
    run = _run(builder, tmp_path)
    got = {(w.start_time, w.end_time): total for w, total in _values(run, "sessions")}
    expected = {(start, end): sum(values)
                for start, end, values in _sessions([(ts, v) for _, v, ts in events], 60)}
    assert len(expected) > 5 and got == expected


def test_windowed_results_carry_their_window_end_as_event_time_and_window_again(tmp_path):
    events = _events(400, "ab", seed=5)
    builder = Builder()
    _source(builder, events, 2).map(lambda e: (e[0], e[1])) \
        .reduce_by_key_and_window(WindowConfig.event_time_tumbling(250), lambda a, b: a + b) \
        .map(lambda result: result[1]) \
        .reduce_by_window(WindowConfig.event_time_tumbling(1_000), lambda a, b: a + b) \
        .to_bolt(CollectingBolt, name="totals")
    run = _run(builder, tmp_path)
    expected: dict = collections.Counter()
    for _, value, ts in events:  # each 250 ms result (event time: its end - 1) in its second
        expected[(ts - ts % 1_000, ts - ts % 1_000 + 1_000)] += value
    got = {(w.start_time, w.end_time): total for w, total in _values(run, "totals")}
    assert got == expected


def test_event_time_sessions_per_key_match_plain_python(tmp_path):
    rng = random.Random(3)
    events = []  # bursts of elements per key, 0-40 ms apart, bursts 200-400 ms apart
    for key in "pq":
        ts = BASE
        for _ in range(12):
            for _ in range(rng.randint(1, 8)):
                ts += rng.randint(0, 40)
                events.append((key, rng.randint(1, 9), ts))
            ts += rng.randint(200, 400)
    rng.shuffle(events)  # the source tasks see them far out of order: a lag covers it all
    lag = max(ts for _, _, ts in events) - BASE + 1
    builder = Builder()
    builder.new_source([Timestamped((k, v), ts) for k, v, ts in events]) \
        .set_num_partitions(2).assign_timestamps(max_lag_ms=lag) \
        .reduce_by_key_and_window(WindowConfig.event_time_session(100), lambda a, b: a + b) \
        .to_bolt(CollectingBolt, name="sessions")
    run = _run(builder, tmp_path)
    expected = {}
    for key in "pq":
        stamped = [(ts, v) for k, v, ts in events if k == key]
        for start, end, values in _sessions(stamped, 100):
            expected[(key, start, end)] = sum(values)
    assert _keyed(_values(run, "sessions")) == expected


JOIN_WINDOWS = {"tumbling": WindowConfig.event_time_tumbling(400),
                "sliding": WindowConfig.event_time_sliding(400, 150),
                "session": WindowConfig.event_time_session(40)}


@pytest.mark.parametrize("method, kind", [("join", "tumbling"), ("outer_join", "tumbling"),
                                          ("join", "sliding"), ("outer_join", "session")])
def test_event_time_joins_match_a_plain_join_per_window(tmp_path, method, kind):
    rng = random.Random(4)
    left = [(rng.choice("abcde"), f"l{i}", BASE + i * 13 + rng.randint(0, 300)) for i in range(120)]
    right = [(rng.choice("abcdf"), f"r{i}", BASE + i * 11 + rng.randint(0, 300))
             for i in range(140)]
    builder = Builder()
    lefts = _source(builder, left, 2).map(lambda e: (e[0], e[1]))
    rights = _source(builder, right, 3).map(lambda e: (e[0], e[1]))
    getattr(lefts, method)(rights, JOIN_WINDOWS[kind], lambda x, y: (x, y)) \
        .set_num_partitions(2).to_bolt(CollectingBolt, name="joined")
    run = _run(builder, tmp_path)
    sessions = {key: _sessions([(ts, 0) for k, _, ts in left + right if k == key], 40)
                for key in "abcdef"}

    def windows_of(key: str, ts: int) -> list[tuple[int, int]]:
        if kind == "tumbling":
            return [(ts - ts % 400, ts - ts % 400 + 400)]
        if kind == "sliding":
            return [(start, start + 400) for start in _sliding_starts(ts, 400, 150)]
        return [(start, end) for start, end, _ in sessions[key] if start <= ts < end]

    windows: dict = collections.defaultdict(lambda: ([], []))
    for side, elements in ((0, left), (1, right)):
        for key, value, ts in elements:
            for start, end in windows_of(key, ts):
                windows[(key, start, end)][side].append(value)
    expected = []
    for where, (lvs, rvs) in windows.items():
        expected += [(where, (lv, rv)) for lv in lvs for rv in rvs]
        if method == "outer_join" and not (lvs and rvs):
            expected += [(where, (lv, None)) for lv in lvs] + [(where, (None, rv)) for rv in rvs]
    got = [((k.key, k.window.start_time, k.window.end_time), v) for k, v in _values(run, "joined")]
    assert sorted(got, key=repr) == sorted(expected, key=repr)


# --- late elements and acking ---------------------------------------------------------------

class _LateAfterFiring(Generator):
    """Emits on time, waits until the first window's result was written, then emits late.

    The late element C (window [BASE, BASE + 1000), 4.8 s behind the watermark) is within
    the allowed lateness; D's window ended long before and is dropped.
    """

    def __init__(self, fired: Path) -> None:
        self.fired = fired

    def setup(self, context):
        self.script = iter([Timestamped(("k", 1), BASE + 100),    # A
                            Timestamped(("k", 2), BASE + 5_000),  # B: watermark to BASE + 5000
                            "wait",
                            Timestamped(("k", 4), BASE + 200),    # C: late, updates A's window
                            Timestamped(("k", 8), BASE - 20_000)])  # D: too late, dropped

    def get(self):
        step = next(self.script)
        if step == "wait":
            if not self.fired.exists():
                self.script = iter(["wait", *self.script])
                return None
            step = next(self.script)
        return step


def test_late_elements_refire_their_window_within_the_lateness_and_are_dropped_after(tmp_path):
    fired = tmp_path / "fired.txt"

    def record(result):
        with open(fired, "a") as handle:
            handle.write(f"{result}\n")

    builder = Builder()
    sums = builder.new_source(_LateAfterFiring(fired)).assign_timestamps() \
        .reduce_by_key_and_window(WindowConfig.event_time_tumbling(1_000,
                                                                   allowed_lateness_ms=10_000),
                                  lambda a, b: a + b)
    sums.consume(record)
    sums.to_bolt(CollectingBolt, name="sums")
    run = _run(builder, tmp_path)
    got = [((k.window.start_time - BASE, k.window.end_time - BASE), n)
           for k, n in _values(run, "sums")]
    assert got == [((0, 1_000), 1), ((0, 1_000), 5), ((5_000, 6_000), 2)]
    metrics = run.handle.metrics()
    assert metrics["reducebykeyandwindow-1"]["__late-tuples"] == 1
    source = metrics["generator-1"]
    assert source["__ack-count"] == 4 and source.get("__fail-count", 0) == 0


class SessionSizes(SessionWindowBolt):
    """An ordinary session window bolt fed by a streamlet: acks its tuples as sessions fire."""

    outputs = ["start", "end", "size"]

    def processWindow(self, window_info, tuples):  # noqa: N802
        self.emit([window_info.start, window_info.end, len(tuples)])


def test_to_bolt_feeds_event_time_window_bolts_the_elements_event_times(tmp_path):
    events = [("k", 0, BASE + ts) for ts in (0, 30, 70, 400, 420, 900)]
    builder = Builder()
    _source(builder, events, 2).to_bolt(SessionSizes, name="sessions", par=1,
                                        config={SessionWindowBolt.WINDOW_GAP_MS: 100})
    topology = builder.build(TopologyBuilder("to_bolt"))
    topology.add_bolt("sizes", CollectingBolt, par=1,
                      inputs={GlobalStreamId("sessions", "default"): Grouping.SHUFFLE})
    topology.set_config(_at_least_once().as_dict())
    run = run_local(topology.build(), conf=CONF, timeout=TIMEOUT, collect_dir=tmp_path / "c")
    assert run.status == "FINISHED"
    got = sorted((c.values[0] - BASE, c.values[1] - BASE, c.values[2])
                 for c in run.collected("sizes"))
    assert got == [(0, 170, 3), (400, 520, 2), (900, 1_000, 1)]
    source = run.handle.metrics()["generator-1"]  # acked once each, by the window bolt
    assert source["__ack-count"] == len(events) and source.get("__fail-count", 0) == 0


# --- refusals -------------------------------------------------------------------------------

def test_bad_event_time_windows_are_refused_naming_the_value():
    for make, value in ((lambda: WindowConfig.event_time_tumbling(0), 0),
                        (lambda: WindowConfig.event_time_session(-5), -5),
                        (lambda: WindowConfig.event_time_sliding(100, 200), 200),
                        (lambda: WindowConfig.event_time_tumbling(100, allowed_lateness_ms=-1), -1)):
        with pytest.raises(TopologyValueError) as info:
            make()
        assert info.value.value == value and info.value.fix
    with pytest.raises(TopologyTypeError):
        WindowConfig.event_time_tumbling(1.5)
    with pytest.raises(TopologyTypeError):
        WindowConfig.event_time_session(100, allowed_lateness_ms="1s")
    config = WindowConfig.event_time_sliding(300, 100, allowed_lateness_ms=50)
    assert config.is_event_time and not config.is_tumbling
    assert (config.kind, config.size_ms, config.slide_ms, config.allowed_lateness_ms) == \
        ("sliding", 300, 100, 50)
    assert not WindowConfig.create_tumbling_window(1).is_event_time


def test_assign_timestamps_is_refused_off_a_source_and_with_a_bad_lag():
    builder = Builder()
    source = builder.new_source([1, 2])
    with pytest.raises(TopologyValueError) as info:
        source.map(str).set_name("strings").assign_timestamps(int)
    assert info.value.component == "strings" and "new_source" in info.value.fix
    with pytest.raises(TopologyValueError) as info:
        source.assign_timestamps(int, max_lag_ms=-1)
    assert info.value.value == -1
    with pytest.raises(TopologyTypeError):
        source.assign_timestamps(int, max_lag_ms=0.5)
    with pytest.raises(TopologyTypeError):
        source.assign_timestamps("ts")


def test_event_time_window_over_a_source_without_timestamps_is_refused_at_build():
    builder = Builder()
    stamped = builder.new_source([("a", 1)]).assign_timestamps(lambda e: BASE)
    plain = builder.new_source([("a", 2)]).set_name("plain")
    stamped.union(plain).reduce_by_key_and_window(WindowConfig.event_time_tumbling(1000),
                                                  lambda a, b: a + b).log()
    with pytest.raises(TopologyValueError) as info:
        builder.topology("no_timestamps")
    assert info.value.component == "reducebykeyandwindow-1"
    assert info.value.value == "'plain'" and "assign_timestamps" in info.value.fix


class _Untimed(Generator):
    def setup(self, context):
        self.items = iter([("a", 1)])

    def get(self):
        return next(self.items)


def test_a_generator_element_without_its_timestamp_fails_the_run_naming_the_source():
    builder = Builder()
    builder.new_source(_Untimed()).set_name("untimed").assign_timestamps() \
        .reduce_by_key_and_window(WindowConfig.event_time_tumbling(1000), lambda a, b: a).log()
    with pytest.raises(TopologyRuntimeError) as failed:
        run_local(builder.topology("untimed"), timeout=TIMEOUT,
                  conf={"heron.instance.restart.max": 0})
    assert failed.value.component == "untimed"
    assert "Timestamped" in str(failed.value)
