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
from .timed_checks import InputPool, check_timed_output
from .timing import Timer, clone_inputs

__all__ = ["remote_of", "time_isolated"]


def remote_of(fn: Callable) -> RemoteCandidate | None:
    """The worker-run candidate behind the session's counting wrapper, if any."""
    inner = getattr(fn, "__wrapped__", None)
    return inner if isinstance(inner, RemoteCandidate) else None


def time_isolated(op: str, timer: Timer, device: str, baseline: Callable[..., Any], remote: RemoteCandidate,
                  pool: InputPool, base_args: tuple, base_kwargs: dict) -> tuple[float, float]:
    """(baseline latency, candidate latency) in ms, the candidate's checked."""
    measured = timer.measure(lambda: baseline(*base_args, **base_kwargs), pool.refresher(base_args, base_kwargs))
    timing = RemoteTiming(remote, pool.sets, {"device": device, "warmup_ms": timer.warmup_ms, "iter_ms": timer.iter_ms})
    timing.start()
    reps = timer.reps_for(timing.round_ms)
    windows, wall_ms = timing.reps(reps)
    check_reported_time(op, windows, wall_ms, measured.overhead_ms, timing.spin_ms)
    outputs = timing.outputs()
    for slot, got in zip(outputs.slots, outputs.values):
        want_args, want_kwargs = clone_inputs(*pool.sets[slot])
        check_timed_output(torch, op, got, baseline(*want_args, **want_kwargs))
    settled = timing.settle(timer.settle_reps(reps)) if device == "cuda" else None
    return measured.latency, timer.finish(windows, settled)
