"""Time a baseline here and a candidate in its worker process, and judge both
with this process's clock and values.

The baseline is timed by the session's timer in this process, with the
wall time of its repetitions kept (:meth:`Timer.measure`): what a
repetition costs outside its window here is the allowance the candidate's
reported windows are checked with (:func:`~..isolation.remote_timing.check_reported_time`).
The candidate's repetitions run in the worker from the same rotating value
sets; the results of its last repetitions are compared with the baseline's
result for the same values (:func:`.timed_checks.check_timed_output`).

Imports torch, the worker channel and the benchmark's timing; never pytest or
``gemswatch.watch``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..isolation.judge import RemoteCandidate
from ..isolation.remote_timing import RemoteTiming, check_reported_time
from ..isolation.timed import ResultKeeper, storages
from .timed_checks import InputPool, check_timed_output
from .timing import Timer, clone_inputs

__all__ = ["FIRST_CHUNK", "remote_of", "time_isolated"]

FIRST_CHUNK = 10  # timed repetitions checked against the judge's clock before the rest run


def remote_of(fn: Callable) -> RemoteCandidate | None:
    """The worker-run candidate behind the session's counting wrapper, if any."""
    inner = getattr(fn, "__wrapped__", None)
    return inner if isinstance(inner, RemoteCandidate) else None


def time_isolated(op: str, timer: Timer, device: str, baseline: Callable[..., Any], remote: RemoteCandidate,
                  pool: InputPool, base_args: tuple, base_kwargs: dict) -> tuple[float, float]:
    """(baseline latency, candidate latency) in ms, the candidate's checked."""
    # The baseline's results are kept and let go as the worker does the
    # candidate's: the two loops do the same work outside their windows.
    inputs = storages((base_args, base_kwargs))
    keeper = ResultKeeper(lambda: inputs)
    refresh = pool.refresher(base_args, base_kwargs)

    def setup() -> None:
        keeper.let_go()
        refresh()

    # Each gets half the warm-up budget, as the two do when timed together.
    warmup_ms = timer.warmup_ms / 2
    measured = timer.measure(lambda: keeper.keep(0, baseline(*base_args, **base_kwargs)), setup, warmup_ms)
    keeper.clear()
    timing = RemoteTiming(remote, pool.sets, {"device": device, "warmup_ms": warmup_ms, "iter_ms": timer.iter_ms})
    timing.start()
    reps = timer.reps_for(timing.round_ms)
    windows: list[float] = []
    # A short first chunk: a tampered timer is caught before it has run a
    # thousand repetitions (its own clock chose how many).
    for i, n in enumerate(c for c in (min(reps, FIRST_CHUNK), reps - FIRST_CHUNK) if c > 0):
        chunk, wall_ms = timing.reps(n, first=i == 0)
        check_reported_time(op, chunk, wall_ms, measured.overhead_ms, timing.spin_ms)
        windows += chunk
    outputs = timing.outputs()
    for slot, got in zip(outputs.slots, outputs.values):
        want_args, want_kwargs = clone_inputs(*pool.sets[slot])
        check_timed_output(torch, op, got, baseline(*want_args, **want_kwargs))
    settled = timing.settle(timer.settle_reps(reps)) if device == "cuda" else None
    return measured.latency, timer.finish(windows, settled)

