"""The event-time window core: out-of-order input from random seeds, every firing checked
against windows computed here from the event times alone (plain Python, no core helper), then
lateness, purging, release (what a bolt acks) and snapshot/restore."""

from __future__ import annotations

import pickle
import random

import pytest

from heron_spark.api.event_windows import WATERMARK_MIN, EventWindows
from heron_spark.errors import TopologyValueError

MAX = 2 ** 63 - 1


def _stream(seed: int, count: int, disorder: int, keys: int = 1):
    """Return (ts, name, key) in arrival order: times rising by 0..40 ms, each arriving up to
    ``disorder`` ms early or late against that order, so the input is out of order."""
    rng = random.Random(seed)
    base, events = 1_000_000 + rng.randrange(1000), []
    for n in range(count):
        base += rng.randrange(41)
        events.append((base + rng.randrange(disorder + 1), f"e{n}", rng.randrange(keys)))
    return events


def _feed(windows: EventWindows, events, lag: int, every: int = 7):
    """Add ``events`` to ``windows``, advancing the watermark to (max seen - lag) every ``every``
    events, then to the end; return (log of (watermark, fired), late names, accepted)."""
    log, late, accepted, top = [], [], [], WATERMARK_MIN
    for n, (ts, name, key) in enumerate(events):
        (accepted if windows.add(ts, name, key) else late).append((ts, name, key))
        top = max(top, ts)
        if n % every == every - 1:
            log.append((max(windows.watermark, top - lag), windows.advance(top - lag),
                        list(accepted)))
    log.append((MAX, windows.advance(MAX), list(accepted)))
    return log, late, accepted


def _aligned(ts: int, size: int, slide: int) -> list[tuple[int, int]]:
    """Every window [k*slide, k*slide + size) holding ts, by walking k down from ts // slide."""
    out, k = [], ts // slide
    while k * slide + size > ts:
        out.append((k * slide, k * slide + size))
        k -= 1
    return sorted(out)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("size,slide", [(100, 100), (100, 30), (90, 30)])
def test_windows_fire_once_complete_with_exactly_their_items(seed, size, slide):
    events = _stream(seed, 300, disorder=60)
    windows = EventWindows.sliding(size, slide)
    log, late, accepted = _feed(windows, events, lag=60)
    assert not late and len(accepted) == len(events)  # disorder <= lag: nothing is late
    fired_ends, previous = set(), WATERMARK_MIN
    for watermark, fired, arrived in log:
        # what fires: every window holding an item whose end passed the watermark just now
        expected = sorted({b for ts, _, _ in arrived for b in _aligned(ts, size, slide)
                           if previous < b[1] <= watermark})
        assert [(f.start, f.end) for f in fired] == expected
        for f in fired:
            assert sorted(f.items) == sorted(n for ts, n, _ in arrived if f.start <= ts < f.end)
            assert not f.refire and (f.start, f.end) not in fired_ends
            fired_ends.add((f.start, f.end))
        previous = watermark
    assert len(windows) == 0  # the end purged everything


@pytest.mark.parametrize("seed", range(4))
def test_released_items_are_each_released_once_by_their_last_window(seed):
    size, slide = 100, 25
    events = _stream(seed, 200, disorder=30)
    windows = EventWindows.sliding(size, slide)
    log, _, _ = _feed(windows, events, lag=30)
    released = [(f.end, name) for _, fired, _ in log for f in fired for name in f.released]
    assert sorted(name for _, name in released) == sorted(name for _, name, _ in events)
    at = {ts_name[1]: ts_name[0] for ts_name in events}
    for end, name in released:  # released with the window of the latest start holding it
        assert end == max(e for _, e in _aligned(at[name], size, slide))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("lateness", [0, 50, 400])
def test_late_items_update_kept_windows_and_refire_else_are_refused(seed, lateness):
    size = 100
    events = _stream(seed, 300, disorder=300)
    windows = EventWindows.tumbling(size, lateness_ms=lateness)
    log, late, accepted = _feed(windows, events, lag=20, every=3)
    assert late or lateness > 0  # disorder far beyond the lag
    # refused exactly when the item's window was purged by the watermark before it came
    watermark, accepted_names = WATERMARK_MIN, set()
    top = WATERMARK_MIN
    for n, (ts, name, _) in enumerate(events):
        start = ts - ts % size
        if start + size + lateness > watermark:
            accepted_names.add(name)
        top = max(top, ts)
        if n % 3 == 2:
            watermark = max(watermark, top - 20)
    assert {name for _, name, _ in accepted} == accepted_names
    # every window's last firing holds all its accepted items; refires follow late items
    last: dict = {}
    for _, fired, _ in log:
        for f in fired:
            assert f.refire == ((f.start, f.end) in last)
            last[(f.start, f.end)] = f
    expected: dict = {}
    for ts, name, _ in accepted:
        expected.setdefault((ts - ts % size, ts - ts % size + size), []).append(name)
    assert {k: sorted(f.items) for k, f in last.items()} == {
        k: sorted(v) for k, v in expected.items()}
    if lateness == 0:
        assert not any(f.refire for f in last.values())


def test_a_late_item_in_a_fired_window_refires_it_at_once_with_fire_updated():
    windows = EventWindows.tumbling(10, lateness_ms=20)
    windows.add(3, "a")
    assert [(f.start, f.items) for f in windows.advance(15)] == [(0, ["a"])]
    assert windows.add(5, "b")          # late (5 < 15) but [0, 10) is kept until 30
    [again] = windows.fire_updated()
    assert (again.items, again.released, again.refire) == (["a", "b"], ["b"], True)
    assert windows.fire_updated() == []
    windows.advance(30)                 # 10 + 20 <= 30: purged
    assert not windows.add(9, "c") and len(windows) == 0


def test_a_late_item_opening_a_window_already_complete_fires_it_at_once():
    windows = EventWindows.tumbling(10, lateness_ms=50)
    windows.add(31, "x")
    assert windows.advance(35) == []
    assert windows.add(12, "late")      # [10, 20) never existed; kept until 70
    [first] = windows.fire_updated()
    assert (first.start, first.items, first.released, first.refire) == (10, ["late"], ["late"],
                                                                         False)
    assert [(f.start, f.items) for f in windows.advance(40)] == [(30, ["x"])]


def _sessions(events, gap: int) -> dict:
    """Sessions per key by sorting each key's times: a new one starts at a gap >= ``gap``."""
    out: dict = {}
    for key in {k for _, _, k in events}:
        mine = sorted((ts, n) for ts, n, k in events if k == key)
        group = [mine[0]]
        for ts, n in mine[1:]:
            if ts - group[-1][0] >= gap:
                out[(key, group[0][0], group[-1][0] + gap)] = sorted(x for _, x in group)
                group = []
            group.append((ts, n))
        out[(key, group[0][0], group[-1][0] + gap)] = sorted(x for _, x in group)
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gap", [25, 60])
def test_sessions_per_key_merge_and_fire_once_their_gap_passed(seed, gap):
    events = _stream(seed, 300, disorder=50, keys=3)
    windows = EventWindows.session(gap)
    log, late, _ = _feed(windows, events, lag=50)
    assert not late
    got = {}
    previous = WATERMARK_MIN
    for watermark, fired, _ in log:
        assert [f.end for f in fired] == sorted(f.end for f in fired)
        for f in fired:
            assert previous < f.end <= watermark and not f.refire
            got[(f.key, f.start, f.end)] = sorted(f.items)
            assert sorted(f.released) == sorted(f.items)
        previous = watermark
    assert got == _sessions(events, gap)


def test_a_late_item_merging_fired_sessions_refires_the_merged_session():
    windows = EventWindows.session(10, lateness_ms=100)
    for ts, name in [(0, "a"), (5, "b"), (22, "c")]:
        windows.add(ts, name)
    fired = windows.advance(35)
    assert [(f.start, f.end, f.items) for f in fired] == [(0, 15, ["a", "b"]),
                                                           (22, 32, ["c"])]
    assert windows.add(13, "d")         # [13, 23) bridges [0, 15) and [22, 32): [0, 32)
    [merged] = windows.fire_updated()
    assert (merged.start, merged.end, merged.items, merged.released, merged.refire) == (
        0, 32, ["a", "b", "c", "d"], ["d"], True)
    assert windows.add(30, "e")         # late (30 < 35): [30, 40) grows the session to 40
    assert windows.fire_updated() == []  # past the watermark: not complete any more
    [grown] = windows.advance(40)
    assert (grown.end, grown.items, grown.refire) == (40, ["a", "b", "c", "d", "e"], True)
    windows.advance(140)                # 40 + 100 <= 140: purged
    assert len(windows) == 0
    assert not windows.add(20, "f")     # [20, 30) ended 110 ms before the watermark


@pytest.mark.parametrize("kind", ["tumbling", "sliding", "session"])
def test_a_restored_snapshot_continues_exactly_as_the_original(kind):
    events = _stream(7, 240, disorder=80, keys=2)
    make = {"tumbling": lambda: EventWindows.tumbling(50, lateness_ms=40),
            "sliding": lambda: EventWindows.sliding(60, 20, lateness_ms=40),
            "session": lambda: EventWindows.session(30, lateness_ms=40)}[kind]
    original = make()
    first, rest = events[:120], events[120:]
    _feed(original, first, lag=30)
    saved = pickle.loads(pickle.dumps(original.snapshot()))
    copy = make()
    copy.restore(saved)
    assert copy.watermark == original.watermark and len(copy) == len(original)
    # _feed ends with advance(MAX); feed the rest from the state the snapshot has
    twin = make()
    twin.restore(saved)
    a, b = _feed(twin, rest, lag=30), _feed(copy, rest, lag=30)
    assert a == b


def test_a_snapshot_taken_before_the_end_restores_pending_windows():
    windows = EventWindows.sliding(20, 10, lateness_ms=5)
    for ts in (1, 12, 25, 26):
        windows.add(ts, f"t{ts}")
    done = windows.advance(20)
    saved = pickle.loads(pickle.dumps(windows.snapshot()))
    restored = EventWindows.sliding(20, 10, lateness_ms=5)
    restored.restore(saved)
    assert [(f.start, f.items) for f in done] == [(-10, ["t1"]), (0, ["t1", "t12"])]
    later = [(f.start, f.end, f.items, f.released) for f in windows.advance(MAX)]
    assert [(f.start, f.end, f.items, f.released) for f in restored.advance(MAX)] == later
    assert later == [(10, 30, ["t12", "t25", "t26"], ["t12"]),
                     (20, 40, ["t25", "t26"], ["t25", "t26"])]


def test_restoring_into_other_windows_is_refused():
    saved = EventWindows.tumbling(10).snapshot()
    with pytest.raises(TopologyValueError) as refused:
        EventWindows.tumbling(20).restore(saved)
    assert refused.value.value == ("tumbling", 10, 10)


@pytest.mark.parametrize("make, value", [
    (lambda: EventWindows.tumbling(0), 0),
    (lambda: EventWindows.sliding(10, 20), 20),
    (lambda: EventWindows.session(-5), -5),
    (lambda: EventWindows.tumbling(10, lateness_ms=-1), -1),
    (lambda: EventWindows.tumbling(1.5), 1.5),  # type: ignore[arg-type]
])
def test_bad_settings_are_refused(make, value):
    with pytest.raises(TopologyValueError) as refused:
        make()
    assert refused.value.value == value


def test_negative_event_times_are_aligned_to_the_epoch():
    windows = EventWindows.sliding(10, 5)
    assert windows.bounds_of(-3) == [(-10, 0), (-5, 5)]
    assert windows.bounds_of(0) == [(-5, 5), (0, 10)]
    assert EventWindows.tumbling(10).bounds_of(-1) == [(-10, 0)]
