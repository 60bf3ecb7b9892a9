"""Window bolts: boundaries (a pure core with explicit times, then whole topologies in this
process, checked against the arrival times the windows report), acking when tuples leave a
window under at-least-once, and the errors for bad settings."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from heron_spark import (Bolt, Grouping, SlidingWindowBolt, Spout, TopologyBuilder,
                         TopologyRuntimeError, TopologyValueError, TumblingWindowBolt,
                         WindowContext)
from heron_spark.api.window import CountWindows, TimeWindows
from heron_spark.testing import COLLECT_DIR, CollectingBolt, run_local

TIMEOUT = 30


# --- the core, with explicit times ------------------------------------------------------------

def test_sliding_window_holds_exactly_the_tuples_of_its_closed_interval():
    windows = TimeWindows(duration=10.0, slide=5.0, start=100.0)
    for name, at in [("a", 101.0), ("b", 104.0), ("c", 105.0), ("d", 109.0)]:
        windows.add(name, at)
    assert windows.slide_to(105.0) == (WindowContext(95.0, 105.0), ["a", "b", "c", "d"], [])
    # at 114 the window is [104, 114]: "a" (101) left, "b" (104) sits on the boundary
    assert windows.slide_to(114.0) == (WindowContext(104.0, 114.0), ["b", "c", "d"], ["a"])
    assert windows.slide_to(119.5) == (WindowContext(109.5, 119.5), [], ["b", "c", "d"])


def test_a_late_tick_widens_the_sliding_window_so_no_tuple_falls_between_windows():
    windows = TimeWindows(duration=2.0, slide=2.0, start=0.0)
    assert windows.slide_to(2.0) == (WindowContext(0.0, 2.0), [], [])
    windows.add("gap", 2.5)  # the next tick is late: at 4.8, [2.8, 4.8] would miss it
    windows.add("in", 3.0)
    assert windows.slide_to(4.8) == (WindowContext(2.0, 4.8), ["gap", "in"], [])
    assert windows.slide_to(6.0) == (WindowContext(4.0, 6.0), [], ["gap", "in"])


def test_sliding_drain_fires_the_next_tick_times_until_every_tuple_left():
    windows = TimeWindows(duration=4.0, slide=2.0, start=0.0)
    windows.add("x", 1.0)
    windows.add("y", 3.0)
    drained = list(windows.drain_sliding())
    assert drained == [(WindowContext(-2.0, 2.0), ["x", "y"], []),
                       (WindowContext(0.0, 4.0), ["x", "y"], []),
                       (WindowContext(2.0, 6.0), ["y"], ["x"]),
                       (WindowContext(4.0, 8.0), [], ["y"])]


def test_tumbling_windows_tile_time_from_the_previous_end():
    windows = TimeWindows(duration=5.0, slide=5.0, start=0.0)
    windows.add("a", 1.0)
    windows.add("b", 5.0)
    assert windows.tumble_to(5.0) == (WindowContext(0.0, 5.0), ["a", "b"])
    windows.add("c", 5.5)
    assert windows.tumble_to(10.2) == (WindowContext(5.0, 10.2), ["c"])
    assert windows.tumble_to(15.0) == (WindowContext(10.2, 15.0), [])


# --- whole topologies -------------------------------------------------------------------------

def test_count_windows_fire_every_slide_tuples_with_the_last_size_tuples():
    windows = CountWindows(size=5, slide=2)
    fired = [windows.add(n, float(n)) for n in range(1, 9)]
    assert [f is None for f in fired] == [True, False] * 4
    # every 2 tuples a window of the last 5 (fewer at the start); a tuple is released once no
    # later window holds it
    assert fired[1] == (WindowContext(1.0, 2.0), [1, 2], [])
    assert fired[3] == (WindowContext(1.0, 4.0), [1, 2, 3, 4], [1])
    assert fired[5] == (WindowContext(2.0, 6.0), [2, 3, 4, 5, 6], [2, 3])
    assert fired[7] == (WindowContext(4.0, 8.0), [4, 5, 6, 7, 8], [4, 5])
    windows.add(9, 9.0)
    # the end: the window the next slide would fire (the last 5 at tuple 10), with what exists
    assert windows.flush() == (WindowContext(6.0, 9.0), [6, 7, 8, 9], [6, 7, 8, 9])
    assert windows.flush() is None


def test_tumbling_count_windows_partition_the_stream():
    windows = CountWindows(size=3, slide=3)
    fired = [f for f in (windows.add(n, float(n)) for n in range(8)) if f is not None]
    assert fired == [(WindowContext(0.0, 2.0), [0, 1, 2], [0, 1, 2]),
                     (WindowContext(3.0, 5.0), [3, 4, 5], [3, 4, 5])]
    assert windows.flush() == (WindowContext(6.0, 7.0), [6, 7], [6, 7])


class PacedSpout(Spout):
    """Emits ``n`` for n in range(count), one every ``gap`` seconds, with message ids; writes
    (id, emit time) and acks/fails as (id, time) lines to the collect folder."""

    outputs = ["n"]

    def initialize(self, config, context):
        self.count = int(config["paced.count"])
        self.gap = float(config["paced.gap"])
        self.folder = Path(config[COLLECT_DIR])
        self.sent = 0
        self.due = time.time()
        self.log_file = open(self.folder / f"spout-{context.get_task_id()}.log", "a")

    def next_tuple(self):
        if self.sent >= self.count:
            self.declare_exhausted()
            return
        now = time.time()
        if now < self.due:
            return
        self.emit([self.sent], tup_id=self.sent)
        self.log_file.write(f"emit {self.sent} {now!r}\n")
        self.sent += 1
        self.due = now + self.gap

    def ack(self, tup_id):
        self.log_file.write(f"ack {tup_id} {time.time()!r}\n")

    def fail(self, tup_id):
        self.log_file.write(f"fail {tup_id} {time.time()!r}\n")

    def close(self):
        self.log_file.close()


def _spout_log(folder: Path) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {"emit": {}, "ack": {}, "fail": {}}
    for path in folder.glob("spout-*.log"):
        for line in path.read_text().splitlines():
            kind, ident, at = line.split()
            out[kind][int(ident)] = float(at)
    return out


class ReportingSliding(SlidingWindowBolt):
    """Emits each window: (start, end, values, arrival times)."""

    outputs = ["start", "end", "values", "times"]

    def initialize(self, config, context):
        super().initialize(config, context)
        self.seen = 0

    def processWindow(self, window_info, tuples):  # noqa: N802 (heronpy's name)
        self.emit([window_info.start, window_info.end, [t.values[0] for t in tuples],
                   [t.creation_time for t in tuples]])


class ReportingTumbling(TumblingWindowBolt):
    outputs = ["start", "end", "values", "times"]

    def processWindow(self, window_info, tuples):  # noqa: N802
        self.emit([window_info.start, window_info.end, [t.values[0] for t in tuples],
                   [t.creation_time for t in tuples]])


def _window_topology(name: str, bolt, window_config: dict, count: int, gap: float,
                     reliable: bool = False) -> TopologyBuilder:
    builder = TopologyBuilder(name)
    spout = builder.add_spout("numbers", PacedSpout, par=1,
                              config={"paced.count": count, "paced.gap": gap})
    windows = builder.add_bolt("windows", bolt, par=1, inputs={spout: Grouping.SHUFFLE},
                               config=window_config)
    builder.add_bolt("collect", CollectingBolt, par=1, inputs={windows: Grouping.SHUFFLE})
    config = {"topology.stmgrs": 1}
    if reliable:
        config.update({"topology.reliability.mode": "ATLEAST_ONCE",
                       "topology.message.timeout.secs": 10,
                       "topology.max.spout.pending": None})
    builder.set_config(config)
    return builder


def _windows(run) -> list[tuple[float, float, list, list]]:
    return sorted((c.values for c in run.collected("collect")), key=lambda w: w[1])


def test_sliding_windows_hold_every_tuple_that_arrived_within_their_bounds(tmp_path):
    config = {SlidingWindowBolt.WINDOW_DURATION_SECS: 0.3,
              SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS: 0.1}
    run = run_local(_window_topology("sliding", ReportingSliding, config, 40, 0.02),
                    timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    windows = _windows(run)
    arrived = {}
    for _, _, values, times in windows:
        arrived.update(zip(values, times))
    assert sorted(arrived) == list(range(40))  # every tuple was in some window
    ticks = [w for w in windows if w[1] - w[0] == pytest.approx(0.3)]
    assert len(ticks) >= 5  # paced over ~0.8 s: windows fired while tuples arrived
    for start, end, values, _ in windows:
        expected = sorted(v for v, at in arrived.items() if start <= at <= end)
        assert sorted(values) == expected, (start, end)


def test_tumbling_windows_partition_the_stream_by_arrival_time(tmp_path):
    config = {TumblingWindowBolt.WINDOW_DURATION_SECS: 0.15}
    run = run_local(_window_topology("tumbling", ReportingTumbling, config, 40, 0.02),
                    timeout=TIMEOUT, collect_dir=tmp_path)
    windows = _windows(run)
    assert len(windows) >= 3
    seen = [v for _, _, values, _ in windows for v in values]
    assert sorted(seen) == list(range(40))  # each tuple in exactly one window
    for (_, end, _, _), (start, _, _, _) in zip(windows, windows[1:]):
        assert start == end  # consecutive windows tile time
    for start, end, values, times in windows:
        assert all(start < at <= end for at in times), (start, end, values)


@pytest.mark.parametrize("bolt,config,size,slide,count,reliable", [
    (ReportingTumbling, {TumblingWindowBolt.WINDOW_COUNT: 7}, 7, 7, 42, True),
    (ReportingSliding, {SlidingWindowBolt.WINDOW_COUNT: 6,
                        SlidingWindowBolt.WINDOW_SLIDE_COUNT: 4}, 6, 4, 45, False)])
def test_count_windows_hold_the_last_tuples_in_arrival_order(tmp_path, bolt, config, size,
                                                             slide, count, reliable):
    """One spout task, one window task: arrival order is emit order, so the windows are known
    in advance: every ``slide`` tuples the last ``size``, then at the end of input the window
    the next slide would fire, with the tuples it has. Under at-least-once every tuple is acked
    once its window was processed (a whole number of tumbling windows: a tuple still waiting
    for its window would hold the bounded spout open until it times out)."""
    run = run_local(_window_topology(f"count-{slide}", bolt, config, count, 0.0,
                                     reliable=reliable), timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    got = [values for _, _, values, _ in sorted(
        (c.values for c in run.collected("collect")), key=lambda w: w[2][-1])]
    ends = list(range(slide, count + 1, slide))
    expected = [list(range(max(0, end - size), end)) for end in ends]
    if ends[-1] != count:
        expected.append(list(range(max(0, ends[-1] - (size - slide)), count)))
    assert got == expected
    if reliable:
        log = _spout_log(tmp_path)
        assert sorted(log["ack"]) == list(range(count)) and not log["fail"]


def test_sliding_window_acks_each_tuple_when_it_leaves_the_window(tmp_path):
    config = {SlidingWindowBolt.WINDOW_DURATION_SECS: 0.2,
              SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS: 0.1}
    run = run_local(_window_topology("acked", ReportingSliding, config, 30, 0.01, reliable=True),
                    timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    log = _spout_log(tmp_path)
    assert sorted(log["ack"]) == list(range(30)) and not log["fail"]
    for ident, emitted in log["emit"].items():
        assert log["ack"][ident] - emitted >= 0.2  # held for the whole window, not acked at once


def test_tumbling_window_acks_its_tuples_after_the_window_fired(tmp_path):
    config = {TumblingWindowBolt.WINDOW_DURATION_SECS: 0.1}
    run = run_local(_window_topology("tacked", ReportingTumbling, config, 30, 0.01,
                                     reliable=True), timeout=TIMEOUT, collect_dir=tmp_path)
    log = _spout_log(tmp_path)
    assert sorted(log["ack"]) == list(range(30)) and not log["fail"]
    windows = _windows(run)
    for ident, acked in log["ack"].items():
        window_end = next(end for _, end, values, _ in windows if ident in values)
        assert acked >= window_end


# --- the heronpy example's shape, and initialize setting the tick frequency -------------------

class AverageWindowSize(SlidingWindowBolt):
    """Heron's window-size example, in our words: the mean number of tuples per window."""

    outputs = ["windows", "mean"]

    def initialize(self, config, context):
        super().initialize(config, context)
        self.total = 0.0
        self.windows = 0.0

    def processWindow(self, window_info, tuples):  # noqa: N802
        self.total += len(tuples)
        self.windows += 1
        self.emit([self.windows, self.total / self.windows])


def test_a_heronpy_style_window_bolt_runs_under_at_least_once(tmp_path):
    import heronpy.api.api_constants as constants
    from heronpy.api.bolt.window_bolt import SlidingWindowBolt as HeronpySliding

    assert HeronpySliding is SlidingWindowBolt
    builder = TopologyBuilder(name="window_size")
    spout = builder.add_spout("word_spout", PacedSpout, par=1,
                              config={"paced.count": 20, "paced.gap": 0.01})
    count = builder.add_bolt("count_bolt", AverageWindowSize, par=2,
                             inputs={spout: Grouping.fields("n")},
                             config={HeronpySliding.WINDOW_DURATION_SECS: 0.2,
                                     HeronpySliding.WINDOW_SLIDEINTERVAL_SECS: 0.1})
    builder.add_bolt("collect", CollectingBolt, par=1, inputs={count: Grouping.SHUFFLE})
    builder.set_config({constants.TOPOLOGY_RELIABILITY_MODE:
                        constants.TopologyReliabilityMode.ATLEAST_ONCE})
    run = run_local(builder, timeout=TIMEOUT, collect_dir=tmp_path)
    assert run.status == "FINISHED"
    assert sorted(_spout_log(tmp_path)["ack"]) == list(range(20))
    assert {c.task for c in run.collected("collect")} and run.collected("collect")


class TicksFromInitialize(Bolt):
    """Sets its own tick frequency in initialize, as Heron's window bolts do."""

    outputs = ["ticks"]

    def initialize(self, config, context):
        config["topology.tick.tuple.freq.secs"] = "0.05"
        self.ticks = 0

    def process(self, tup):
        pass

    def process_tick(self, tup):
        self.ticks += 1

    def end_of_input(self):
        self.emit([self.ticks])


def test_initialize_may_set_the_tick_frequency(tmp_path):
    builder = TopologyBuilder("ticks")
    spout = builder.add_spout("numbers", PacedSpout, par=1,
                              config={"paced.count": 20, "paced.gap": 0.02})
    ticker = builder.add_bolt("ticker", TicksFromInitialize, par=1,
                              inputs={spout: Grouping.SHUFFLE})
    builder.add_bolt("collect", CollectingBolt, par=1, inputs={ticker: Grouping.SHUFFLE})
    run = run_local(builder, timeout=TIMEOUT, collect_dir=tmp_path)
    [ticks] = [c.values[0] for c in run.collected("collect")]
    assert ticks >= 3  # ~0.4 s of input at 0.05 s per tick


# --- bad settings -----------------------------------------------------------------------------

def test_bad_window_settings_are_refused_naming_the_component():
    builder = TopologyBuilder("bad")
    spout = builder.add_spout("numbers", PacedSpout, par=1)
    with pytest.raises(TopologyValueError) as missing_method:
        builder.add_bolt("plain", SlidingWindowBolt, par=1, inputs={spout: Grouping.SHUFFLE},
                         config={SlidingWindowBolt.WINDOW_DURATION_SECS: 1})
    assert missing_method.value.component == "plain"
    with pytest.raises(TopologyValueError) as too_long:
        builder.add_bolt("w", ReportingSliding, par=1, inputs={spout: Grouping.SHUFFLE},
                         config={SlidingWindowBolt.WINDOW_DURATION_SECS: 1,
                                 SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS: 2})
    assert too_long.value.component == "w" and too_long.value.value == 2
    with pytest.raises(TopologyValueError) as negative:
        builder.add_bolt("w", ReportingTumbling, par=1, inputs={spout: Grouping.SHUFFLE},
                         config={TumblingWindowBolt.WINDOW_DURATION_SECS: -1})
    assert negative.value.value == -1


class Unchained(SlidingWindowBolt):
    outputs = ["n"]

    def initialize(self, config, context):
        self.ready = True  # forgot super().initialize

    def processWindow(self, window_info, tuples):  # noqa: N802
        pass


@pytest.mark.parametrize("bolt, config, problem", [
    (ReportingSliding, {}, "window duration"),
    (Unchained, {SlidingWindowBolt.WINDOW_DURATION_SECS: 1}, "super().initialize"),
    (ReportingSliding, {SlidingWindowBolt.WINDOW_DURATION_SECS: 20,
                        SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS: 15}, "time out"),
])
def test_runtime_window_errors_fail_the_run_naming_the_component(bolt, config, problem):
    builder = _window_topology("broken", bolt, config, 5, 0.0, reliable=True)
    with pytest.raises(TopologyRuntimeError) as failed:
        run_local(builder, timeout=TIMEOUT, conf={"heron.instance.restart.max": 0})
    assert failed.value.component == "windows"
    assert problem in str(failed.value)
