"""The judge's checks of what a candidate's worker reports about its timed
repetitions, with figures made up (no worker, no timer)."""

from __future__ import annotations

import random

import pytest

from gemswatch.gems.ops._timing import Measurement
from gemswatch.testing.benchmark.isolated_timing import STALL_MS, TIMER_TRIES, timed_chunk
from gemswatch.testing.integrity import IntegrityError
from gemswatch.testing.isolation.remote_timing import (MEAN_SHARE, OVERHEAD_FACTOR, SLACK, check_reported_time,
                                                       judged_latency)


def test_windows_that_account_for_the_wall_time_pass():
    # 100 repetitions of 1 ms, 0.1 ms of setup and flush around each.
    check_reported_time("softmax", [1.0] * 100, wall_ms=110.0, overhead_ms=0.1, spin_ms=0.0)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_windows_may_not_fall_short_of_the_wall_time_by_more_than_the_allowance(device):
    n, overhead, spin, slack = 100, 0.1, 0.02, SLACK[device]
    fixed = n * (OVERHEAD_FACTOR * overhead + spin + slack.per_rep_ms) + slack.per_request_ms
    wall = (100.0 + fixed) / (1 - slack.wall_share) - 1e-6  # 100 ms of windows plus all that may pass outside them
    check_reported_time("softmax", [1.0] * n, wall_ms=wall, overhead_ms=overhead, spin_ms=spin, device=device)
    with pytest.raises(IntegrityError, match=r"integrity check 'timer' failed: the candidate's 100 timed repetitions "
                                             r"of softmax reported 99.9 ms in all, but the judge's clock saw"):
        check_reported_time("softmax", [0.999] * n, wall_ms=wall + 0.01, overhead_ms=overhead, spin_ms=spin,
                            device=device)


def test_a_gpu_hides_less_than_the_loaded_cpu_machine():
    # 100 repetitions that report 0.1 ms each while 0.8 ms a repetition pass:
    # possible on a loaded 2-core machine, a lie on a GPU host.
    check_reported_time("mm", [0.1] * 100, wall_ms=80.0, overhead_ms=0.1, spin_ms=0.0, device="cpu")
    with pytest.raises(IntegrityError, match="integrity check 'timer' failed"):
        check_reported_time("mm", [0.1] * 100, wall_ms=80.0, overhead_ms=0.1, spin_ms=0.0, device="cuda")


def test_a_thousandfold_slower_clock_is_caught():
    # The worker's clock runs at a thousandth: 2 ms of work reports 2 us.
    with pytest.raises(IntegrityError, match="'timer'"):
        check_reported_time("softmax", [0.002] * 50, wall_ms=50 * 2.1, overhead_ms=0.05, spin_ms=0.0)
    # A fifth under-reported hides in the slack for a loaded machine: that is the bound.
    check_reported_time("softmax", [1.6] * 50, wall_ms=50 * 2.0, overhead_ms=0.0, spin_ms=0.0)


@pytest.mark.parametrize("windows", [[], [1.0, -0.5], [1.0, float("nan")], [1.0, float("inf")], [1.0, "1"]])
def test_impossible_reports_are_rejected(windows):
    with pytest.raises(IntegrityError, match="'timer'"):
        check_reported_time("softmax", windows, wall_ms=10.0, overhead_ms=0.1, spin_ms=0.0)


def test_the_overhead_of_a_measurement_is_what_its_wall_time_holds_beyond_windows_and_spin():
    m = Measurement(latency=1.0, windows=(1.0, 1.0, 1.0, 1.0), wall_ms=4.0 + 4 * 0.3, spin_ms=0.1)
    assert m.overhead_ms == pytest.approx(0.2)
    assert Measurement(1.0, (1.0,), wall_ms=0.5).overhead_ms == 0.0  # a clock hiccup never goes negative


class _Timing:
    """A worker's timing side that reports each chunk as its script says:
    (windows, the judge's wall time around them)."""

    spin_ms = 0.0
    account = None

    def __init__(self, script):
        self.script = list(script)
        self.asked = []

    def reps(self, n, seed, first=True):
        self.asked.append((n, seed, first))
        windows, wall_ms = self.script.pop(0)
        return windows, wall_ms, [f"digest-{seed}-{i}" for i in range(n)]


def test_a_chunk_stalled_once_by_a_loaded_machine_is_run_again_and_its_honest_rerun_counts():
    honest = ([1.0, 1.0], 2.2)
    stalled = ([1.0, 1.0], 40.0)  # another process's time slice inside the chunk
    timing = _Timing([stalled, honest])
    seed, windows, committed, _ = timed_chunk(timing, "softmax", 2, random.Random(0), True, overhead_ms=0.1,
                                              device="cpu")
    assert windows == [1.0, 1.0]
    assert [a[1] for a in timing.asked][-1] == seed and committed == [f"digest-{seed}-0", f"digest-{seed}-1"]
    # New values for the rerun, and only the case's first chunk clears the warm-up's results.
    assert timing.asked[0][1] != timing.asked[1][1] and [a[2] for a in timing.asked] == [True, False]


def test_a_timer_that_lies_on_every_try_fails_the_case():
    lie = ([0.001, 0.001], 40.0)
    timing = _Timing([lie] * TIMER_TRIES)
    with pytest.raises(IntegrityError, match=rf"'timer' failed: .* \(on each of {TIMER_TRIES} tries\)"):
        timed_chunk(timing, "softmax", 2, random.Random(0), True, overhead_ms=0.1, device="cpu")
    assert len(timing.asked) == TIMER_TRIES


def test_a_shortfall_no_stall_explains_fails_at_once():
    lie = ([0.001] * 100, 100 * 2.0 + 2 * STALL_MS)  # a long chunk missing far more than a stall
    timing = _Timing([lie] * TIMER_TRIES)
    with pytest.raises(IntegrityError, match=r"'timer' failed: .*tampered with \(the judge"):
        timed_chunk(timing, "softmax", 100, random.Random(0), True, overhead_ms=0.1, device="cuda")
    assert len(timing.asked) == 1


def test_a_median_shrunk_by_moving_the_time_into_a_few_windows_earns_no_more_than_the_clock_allows():
    # 100 repetitions of 2 ms on the judge's clock, reported as 99 of 1 us and one that holds the rest.
    n, wall = 100, 100 * 2.1
    windows = [0.001] * (n - 1) + [2.0 * n - 0.001 * (n - 1)]
    least = check_reported_time("softmax", windows, wall_ms=wall, overhead_ms=0.1, spin_ms=0.0, device="cuda")
    allowance = n * (OVERHEAD_FACTOR * 0.1 + SLACK["cuda"].per_rep_ms) + SLACK["cuda"].per_request_ms + \
        SLACK["cuda"].wall_share * wall
    assert least == pytest.approx(wall - allowance)
    latency = judged_latency(0.001, windows, least)
    assert latency == pytest.approx((wall - allowance) / n) and latency > 1.0
    # On the loaded CPU machine's looser clock the mean's share binds: half the time, at most, goes.
    least = check_reported_time("softmax", windows, wall_ms=wall, overhead_ms=0.1, spin_ms=0.0, device="cpu")
    assert judged_latency(0.001, windows, least) == pytest.approx(MEAN_SHARE * 2.0)


def test_an_honest_median_stands_and_a_few_stalls_make_it_slower_never_a_failure():
    n, wall = 100, 100 * 2.1
    honest = [2.0] * n
    least = check_reported_time("softmax", honest, wall_ms=wall, overhead_ms=0.1, spin_ms=0.0, device="cuda")
    assert judged_latency(2.0, honest, least) == 2.0
    stalled = [1.0, 1.0, 30.0]  # a median of 1 ms and two thirds of the time in one stall
    least = check_reported_time("softmax", stalled, wall_ms=32.5, overhead_ms=0.1, spin_ms=0.0)
    assert judged_latency(1.0, stalled, least) == pytest.approx(MEAN_SHARE * 32.0 / 3)
