"""``heron_spark.testing.wait_until``: the one poll-with-deadline helper of the tests (and users')."""

import time

import pytest

from heron_spark.testing import wait_until


def test_returns_the_first_truthy_value_of_the_predicate():
    values = iter([0, [], None, ["ready"], "later"])
    assert wait_until(lambda: next(values), 10, interval=0) == ["ready"]
    assert next(values) == "later"  # not called again once truthy


def test_times_out_naming_what_it_waited_for_and_the_last_value():
    calls = []
    started = time.monotonic()
    with pytest.raises(AssertionError) as info:
        wait_until(lambda: calls.append(1) or len(calls) * 0, 0.2, interval=0.05,
                   message="the queue to drain")
    assert 0.2 <= time.monotonic() - started < 5
    assert len(calls) >= 2  # polled, and once more at the deadline
    assert "timed out after 0.2 s waiting for the queue to drain" in str(info.value)
    assert "last value: 0" in str(info.value)


def test_a_message_function_describes_the_state_at_the_timeout():
    state = {"seen": 0}

    def predicate():
        state["seen"] += 1
        return False

    with pytest.raises(AssertionError, match=r"waiting for 3\+ polls"):
        wait_until(predicate, 0.1, interval=0.01,
                   message=lambda: f"{min(state['seen'], 3)}+ polls")


def test_an_exception_of_the_predicate_stops_the_wait_at_once():
    def dead():
        raise RuntimeError("the process died")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="the process died"):
        wait_until(dead, 60)
    assert time.monotonic() - started < 5
