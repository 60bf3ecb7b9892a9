"""The I/O-free rules of a run's lifecycle (``scheduler/lifecycle.py``): generations, the
resubmission budget and backoff, and why a run ended. No Spark, a fake clock."""

from __future__ import annotations

import pytest

from heron_spark.scheduler.lifecycle import (Cause, Generation, Generations, GiveUp,
                                             ResubmissionPolicy, Resubmit, end_detail)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_generations_move_forward_and_remember_why():
    generations = Generations(0, 2)
    assert generations.current == Generation(0, 2, Cause.SUBMITTED)
    assert generations.upcoming == 1
    generations.begin(1, 2, Cause.RESUBMITTED)
    generations.begin(2, 3, Cause.UPDATED)
    assert [(g.number, g.containers, g.cause) for g in generations.history] == [
        (0, 2, Cause.SUBMITTED), (1, 2, Cause.RESUBMITTED), (2, 3, Cause.UPDATED)]
    with pytest.raises(ValueError, match="generation 2 cannot follow generation 2"):
        generations.begin(2, 3, Cause.RESUBMITTED)
    assert generations.current.number == 2


def test_a_resumed_run_starts_at_the_prior_runs_next_generation():
    generations = Generations(4, 3, resumed=True)
    assert generations.current == Generation(4, 3, Cause.RESUMED)
    assert generations.upcoming == 5


def test_resubmissions_back_off_and_stop_at_the_budget():
    clock = Clock()
    policy = ResubmissionPolicy(budget=3, window_secs=60.0, backoff_secs=0.5, clock=clock)
    decisions = []
    for _ in range(3):
        decisions.append(policy.decide(planned=False, deterministic=False))
        clock.now += 1.0
    assert decisions == [Resubmit(0.5, 1, 3), Resubmit(1.0, 2, 3), Resubmit(2.0, 3, 3)]
    assert policy.decide(planned=False, deterministic=False) is GiveUp.BUDGET


def test_failures_leave_the_budget_after_the_window():
    clock = Clock()
    policy = ResubmissionPolicy(budget=1, window_secs=10.0, backoff_secs=1.0, clock=clock)
    assert policy.decide(False, False) == Resubmit(1.0, 1, 1)
    clock.now += 10.5  # the first failure is out of the window: the backoff starts again
    assert policy.decide(False, False) == Resubmit(1.0, 1, 1)
    clock.now += 1.0
    assert policy.decide(False, False) is GiveUp.BUDGET


def test_planned_and_deterministic_ends_are_never_resubmitted_nor_counted():
    policy = ResubmissionPolicy(budget=1, window_secs=60.0, backoff_secs=1.0, clock=Clock())
    assert policy.decide(planned=True, deterministic=False) is GiveUp.PLANNED
    assert policy.decide(planned=False, deterministic=True) is GiveUp.DETERMINISTIC
    assert policy.decide(planned=True, deterministic=True) is GiveUp.PLANNED
    assert policy.decide(planned=False, deterministic=False) == Resubmit(1.0, 1, 1)


def test_end_detail_says_why_the_stage_ended():
    assert end_detail(None, False, "", "cancelled") == \
        "every container exited before the topology ended"
    error = RuntimeError("boom")
    assert end_detail(error, True, "boom", "the Spark job was cancelled") == \
        "the Spark job was cancelled"
    assert end_detail(error, False, "boom", "unused") == "the Spark barrier stage failed: boom"
