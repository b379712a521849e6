"""A stage's log says where its session's time went (gemswatch.testing.stage_clock)."""

from __future__ import annotations

from gemswatch.testing.stage_clock import StageClock


def test_moments_are_counted_from_configure_and_pytests_are_marked_once():
    t = type("Now", (), {"now": 100.0})()  # a clock the test moves by hand
    clock = StageClock(lambda: t.now)
    t.now = 100.5
    clock.mark("candidate loaded")
    t.now = 101.0
    clock.pytest_collection_finish(None)
    t.now = 103.25
    clock.pytest_runtest_logfinish("t.py::a")
    t.now = 109.0
    clock.pytest_runtest_logfinish("t.py::b")  # not a first test again
    clock.pytest_sessionfinish(None)
    assert clock.line() == ("stage clock, s after configure: candidate loaded 0.50, collected 1.00, "
                            "first test 3.25, tests done 9.00")
