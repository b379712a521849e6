"""Time a baseline here and a candidate in its worker process, and judge both
with this process's clock and values.

The baseline is timed by the session's timer in this process, with the
wall time of its repetitions kept (:meth:`Timer.measure`): what a
repetition costs outside its window here is the allowance the candidate's
reported windows are checked with (:func:`~..isolation.remote_timing.check_reported_time`).

The candidate's repetitions run in the worker in chunks (:func:`plan_chunks`:
a short first one, then as long as the memory for their results allows),
each with a seed this process draws just before it (so the values of a
repetition exist only once it is due, and none repeats:
:func:`.timed_checks.fill_rep_`). The worker keeps every result of a
chunk and commits to a digest of each as the chunk runs
(:mod:`..isolation.commit`; this process digests its baseline's results
alike, so both loops do that work outside their windows); after the
chunk, this process asks for the results of some repetitions,
picked at random then (:func:`plan_checks`), and compares each with the
baseline's result for the same values
(:func:`.timed_checks.check_timed_output`), once each matches its digest:
a candidate that is right only on some repetitions is caught on the
others, and one that makes the picked results only when asked is caught
by its digests.

Imports torch, the worker channel and the benchmark's timing; never pytest or
``gemswatch.watch``.
"""

from __future__ import annotations

import json
import os
import random
from contextlib import AbstractContextManager
from typing import Any, Callable

import torch

from ..integrity import IntegrityError
from ..isolation.commit import Digester, same_digest
from ..isolation.judge import RemoteCandidate
from ..isolation.remote_timing import RemoteTiming, TimerShortfall, check_reported_time, judged_latency
from ..isolation.timed import ResultKeeper, storages
from .base import Benchmark
from .case_accuracy import baseline_on_copy
from .timed_checks import InputPool, check_timed_accuracy, check_timed_output
from .timing import Timer

__all__ = ["CHECKED_REPS", "FIRST_CHUNK", "STALL_MS", "TIMER_TRIES", "plan_checks", "plan_chunks", "remote_of",
           "time_isolated", "timed_chunk"]

FIRST_CHUNK = 10  # timed repetitions checked against the judge's clock before the rest run
CHECKED_REPS = 8  # timed results compared with the baseline, per case
TIMER_TRIES = 3  # runs of a chunk whose windows fall short of the judge's clock, before the verdict
STALL_MS = 50.0  # the most a stall of a loaded machine (a few time slices) takes from one chunk
# The results of a chunk are kept alive together: at most this much memory.
KEPT_BYTES = {"cuda": 2 << 30, "cpu": 256 << 20}
TRACE_ENV = "GEMSWATCH_TIMER_TRACE"  # a file to append each chunk's timer figures to (JSON lines)


def remote_of(fn: Callable) -> RemoteCandidate | None:
    """The worker-run candidate behind the session's counting wrapper, if any."""
    inner = getattr(fn, "__wrapped__", None)
    return inner if isinstance(inner, RemoteCandidate) else None


def longest_chunk(device: str, result_bytes: int, reps: int) -> int:
    """The longest chunk (at most ``reps``) whose results fit the memory kept for them."""
    budget = KEPT_BYTES.get(device, KEPT_BYTES["cpu"])
    return max(2, min(reps, budget // max(result_bytes, 1)))


def plan_chunks(reps: int, longest: int) -> list[int]:
    """Chunk lengths for ``reps`` repetitions: a short first chunk (a
    tampered timer is caught before it has run a thousand repetitions),
    then chunks of about equal length, none longer than ``longest``."""
    first = min(reps, FIRST_CHUNK)
    left = reps - first
    if left <= 0:
        return [first]
    count = -(-left // longest)
    return [first] + [left // count + (i < left % count) for i in range(count)]


def plan_checks(chunks: list[int], rng: random.Random, count: int = CHECKED_REPS) -> dict[int, list[int]]:
    """chunk -> the repetitions of it whose results are checked: ``count``
    drawn at random over all repetitions, and always the very last one."""
    where = [(c, i) for c, n in enumerate(chunks) for i in range(n)]
    picked = set(rng.sample(where, min(count, len(where)))) | {where[-1]}
    plan: dict[int, list[int]] = {}
    for c, i in sorted(picked):
        plan.setdefault(c, []).append(i)
    return plan


def timed_chunk(timing: RemoteTiming, op: str, n: int, rng: random.Random, first: bool, overhead_ms: float,
                device: str) -> tuple[int, list[float], list[Any], float]:
    """(seed, reported windows, committed digests, the least total of the
    windows the judge's clock allows) of a chunk of ``n``
    repetitions whose windows account for the judge's clock around them
    (:func:`check_reported_time`). A chunk that falls short by no more than
    a stall (:data:`STALL_MS`) runs again with new values, up to
    :data:`TIMER_TRIES` times in all: a tampered timer falls short on every
    try, while a stall of a loaded machine (another process's time slices
    landing inside a short chunk) does not repeat. Only windows that passed
    the check are ever used, so a retry hides nothing."""
    for attempt in range(TIMER_TRIES):
        seed = rng.getrandbits(62)
        chunk, wall_ms, committed = timing.reps(n, seed, first=first and attempt == 0)
        _trace(op, chunk, wall_ms, overhead_ms, timing.spin_ms, timing.account)
        try:
            return seed, chunk, committed, check_reported_time(op, chunk, wall_ms, overhead_ms, timing.spin_ms,
                                                               device, timing.account)
        except TimerShortfall as e:
            if e.shortfall_ms > STALL_MS:
                raise
            short = e
    raise IntegrityError(short.check, f"{short.detail} (on each of {TIMER_TRIES} tries)")


def time_isolated(bm: Benchmark, timer: Timer, device: str, remote: RemoteCandidate, pool: InputPool,
                  base_args: tuple, base_kwargs: dict, result_bytes: int,
                  judge_side: AbstractContextManager) -> tuple[float, float]:
    """(baseline latency, candidate latency) in ms of a case of ``bm``, the
    candidate's checked (by the benchmark's accuracy rule too, where it
    declares one: :mod:`.case_accuracy`). ``judge_side``: the scope the
    baseline is timed in (the candidate's processes held still:
    :meth:`.state.BenchState.judge_side`)."""
    op, baseline = bm.op, bm.baseline
    rng = random.SystemRandom()  # the worker cannot see this process's draws
    longest = longest_chunk(device, result_bytes, timer.max_reps)
    # The baseline's results are kept, secured and let go as the worker
    # does the candidate's: the two loops do the same work outside their windows.
    inputs = storages((base_args, base_kwargs))
    keeper = ResultKeeper(lambda: inputs, size=longest)
    feed = pool.feeder(base_args, base_kwargs, rng.getrandbits(62))
    digester = Digester(rng.getrandbits(62))

    def setup() -> None:
        keeper.secure()
        if keeper.kept:  # as the worker digests each result it keeps
            digester.digest(keeper.kept[-1][1])
        keeper.let_go()
        feed()

    # Each gets half the warm-up budget, as the two do when timed together.
    warmup_ms = timer.warmup_ms / 2
    with judge_side:  # nothing the candidate started runs while its baseline is timed
        measured = timer.measure(lambda: keeper.keep(0, baseline(*base_args, **base_kwargs)), setup, warmup_ms)
    keeper.clear()
    key = rng.getrandbits(62)  # of the digests the worker commits to (isolation.commit)
    timing = RemoteTiming(remote, pool.sets, {"device": device, "warmup_ms": warmup_ms, "iter_ms": timer.iter_ms},
                          seed=rng.getrandbits(62), keep=longest, key=key)
    timing.start()
    chunks = plan_chunks(timer.reps_for(timing.round_ms), longest)
    checks = plan_checks(chunks, rng)
    received = Digester(key)  # the judge's own digests of the results it receives
    windows: list[float] = []
    least_ms = 0.0  # of the windows' total, by the judge's clock
    for c, n in enumerate(chunks):
        seed, chunk, committed, least = timed_chunk(timing, op, n, rng, c == 0, measured.overhead_ms, device)
        windows += chunk
        least_ms += least
        picks = checks.get(c)
        if picks:
            for i, got in zip(picks, timing.outputs(picks)):
                if not same_digest(received.digest(got), committed[i]):
                    raise IntegrityError(
                        "timed-output",
                        f"the result of timed repetition {i} of {op} is not the one its worker committed to when the "
                        "chunk ended: results must exist when the timed repetitions end, not be made when asked for")
                want_args, want_kwargs = pool.values(seed, i)
                eager = baseline_on_copy(baseline, want_args, want_kwargs)
                check_timed_accuracy(op, bm.accuracy, baseline, got, want_args, want_kwargs, eager)
                check_timed_output(torch, op, got, eager)
    settled = timing.settle(timer.settle_reps(len(windows)), rng.getrandbits(62)) if device == "cuda" else None
    return measured.latency, judged_latency(timer.finish(windows, settled), windows, least_ms)


def _trace(op: str, windows: list[float], wall_ms: float, overhead_ms: float, spin_ms: float,
           account: dict[str, Any] | None) -> None:
    """Append a chunk's figures to the trace file, when one is named (for
    measuring how much an honest worker loses outside its windows)."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps({"op": op, "n": len(windows), "reported_ms": sum(windows), "wall_ms": wall_ms,
                            "overhead_ms": overhead_ms, "spin_ms": spin_ms, "account": account}) + "\n")
