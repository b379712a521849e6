"""Where a session's candidate calls spent their time: the judge's figures
add up, and what the worker reports (the candidate's process) is a hint
that cannot break the judge."""

from __future__ import annotations

import math

from gemswatch.testing.isolation.judge import CallTimes


def test_calls_add_up_and_read_as_one_line():
    times = CallTimes()
    times.add(120.0, 3.0, {"unpack": 1.0, "call": 110.0, "pack": 4.0})
    times.add(80.0, 2.0, {"unpack": 0.5, "call": 75.0, "pack": 1.5})
    assert (times.calls, times.round_trip_ms, times.judge_moving_ms) == (2, 200.0, 5.0)
    assert (times.in_candidate_ms, times.worker_moving_ms) == (185.0, 7.0)
    assert times.line() == (
        "candidate calls: 2, 0.20 s of round trips (the worker says 0.18 s in the candidate, 0.01 s moving tensors), "
        "0.01 s moving tensors in the judge"
    )


def test_a_worker_that_reports_nonsense_adds_nothing_of_it():
    times = CallTimes()
    for worker in (None, "fast", ["call", 1.0], {"call": "0"}, {"call": -5.0, "pack": math.nan, "unpack": math.inf}):
        times.add(10.0, 1.0, worker)
    assert (times.calls, times.round_trip_ms) == (5, 50.0)
    assert (times.in_candidate_ms, times.worker_moving_ms) == (0.0, 0.0)
