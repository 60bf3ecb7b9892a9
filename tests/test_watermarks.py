"""The watermark cores of a task (``instance.watermarks``), without a topology."""

from __future__ import annotations

from heron_spark.api.event_time import WATERMARK_MAX, WATERMARK_MIN, timestamp_ms
from heron_spark.instance import watermarks
from heron_spark.instance.watermarks import IDLE, InputWatermarks, SourceWatermarks


def test_a_source_watermark_trails_its_slowest_partition_by_the_lag() -> None:
    marks = SourceWatermarks(lag_ms=100, idle_ms=0, now=0.0)
    assert marks.status(0.0) == WATERMARK_MIN
    marks.observe(5_000, "a")
    marks.observe(9_000, "b")
    marks.observe(4_000, "a")  # out of order: the newest stays
    assert marks.status(1.0) == 4_900
    marks.observe(7_000, "a")
    assert marks.status(1.0) == 6_900


def test_an_idle_partition_stops_holding_the_watermark_back_unless_backpressure_held_it() -> None:
    marks = SourceWatermarks(lag_ms=0, idle_ms=1_000, now=0.0)
    marks.observe(1_000, 0)
    marks.observe(50_000, 1)
    assert marks.status(0.5) == 1_000
    marks.observe(60_000, 1)
    marks.hold(0.9)  # backpressure: partition 0 could not be read, so it is not idle
    assert marks.status(1.5) == 1_000
    marks.observe(61_000, 1)
    assert marks.status(2.0) == 61_000  # partition 0 quiet for 1.1 s while it could emit
    marks.observe(2_000, 0)  # back, behind the watermark: the watermark never goes back
    assert marks.status(2.1) == 61_000


def test_a_task_without_event_time_goes_idle_after_the_idle_time() -> None:
    marks = SourceWatermarks(lag_ms=0, idle_ms=500, now=10.0)
    assert marks.status(10.4) == WATERMARK_MIN
    assert marks.status(10.5) == IDLE
    marks.hold(10.6)
    assert marks.status(10.7) == WATERMARK_MIN
    never = SourceWatermarks(lag_ms=0, idle_ms=0, now=0.0)
    assert never.status(1e9) == WATERMARK_MIN  # 0: never idle


def test_an_explicit_watermark_and_the_snapshot_survive_a_restore() -> None:
    marks = SourceWatermarks(lag_ms=10, idle_ms=0, now=0.0)
    marks.observe(500, None)
    marks.advance(2_000, 0.0)
    assert marks.status(0.0) == 2_000  # the generated 490 does not move it back
    again = SourceWatermarks(lag_ms=10, idle_ms=0, now=5.0)
    again.restore(marks.snapshot(), 5.0)
    assert again.status(5.0) == 2_000
    again.observe(3_000, None)
    assert again.status(5.0) == 2_990


def test_an_input_watermark_is_the_minimum_over_live_active_upstream_tasks() -> None:
    marks = InputWatermarks([1, 2, 3])
    assert marks.status() == WATERMARK_MIN
    assert not marks.on_watermark(1, 900)   # 2 and 3 still at MIN
    assert not marks.on_watermark(2, 500)
    assert marks.on_watermark(3, 700)
    assert marks.status() == 500
    assert marks.on_idle(2)                 # the slow one went idle
    assert marks.status() == 700
    assert not marks.on_watermark(2, 100)   # back, behind: never goes back
    assert marks.status() == 700
    assert marks.on_end(2) is False         # 2 held nothing above 700
    assert marks.on_watermark(3, 2_000)
    assert marks.status() == 900
    assert marks.on_idle(1)
    assert marks.on_idle(3)
    assert marks.status() == IDLE
    assert not marks.on_end(1)              # 3 is still idle
    assert marks.on_end(3)
    assert marks.status() == WATERMARK_MAX
    assert not marks.on_watermark(3, 5)     # ended: ignored


def test_an_input_watermark_restores_without_going_back() -> None:
    marks = InputWatermarks([4, 5])
    marks.on_watermark(4, 100)
    marks.on_watermark(5, 300)
    again = InputWatermarks([4, 5])
    again.restore(marks.snapshot())
    assert again.status() == 100
    assert again.on_watermark(4, 200)
    assert again.status() == 200


def test_frame_slots_and_timestamps() -> None:
    for status in (IDLE, 0, -5, WATERMARK_MAX, WATERMARK_MIN):
        assert watermarks.decode(watermarks.encode(status).decode()) == status
    assert timestamp_ms(5) == 5
    assert timestamp_ms(5.9) == 5
    assert timestamp_ms(True) is None
    assert timestamp_ms("5") is None
    assert timestamp_ms(float("nan")) is None
    assert timestamp_ms(None) is None
