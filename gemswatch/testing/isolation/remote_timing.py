"""The judge's side of a timed case whose candidate runs in the worker.

The timed repetitions must run where the candidate runs (a round trip per
call would time the channel), so the worker runs them (:mod:`.timed`) and
reports their windows. The judge trusts none of it:

- its own clock is around the timed repetitions (one request, nothing else
  in it): :func:`check_reported_time` rejects windows whose total is
  smaller than that wall time minus a stated allowance per repetition for
  what happens outside a window (the allowance is measured on the judge's
  own timing of the baseline with the same protocol);
- the repetitions come in chunks, each with values of its own; after a
  chunk the judge may ask for the results of any of its repetitions (it
  picks them at random then) and checks them against the baseline's
  result for the same values;
- a tensor subclass or an active torch mode fails the case, as for a call.

Imports torch and the worker channel; never pytest or ``gemswatch.watch``.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Any

from ..integrity import IntegrityError
from . import transport
from .judge import RemoteCandidate, _reraise, check_results

__all__ = ["MEAN_SHARE", "OVERHEAD_FACTOR", "SLACK", "RemoteTiming", "Slack", "TimerShortfall", "check_reported_time",
           "judged_latency"]

# What may pass outside a repetition's window, per repetition: this many
# times the judge's own figure for the baseline, plus the candidate's spin,
# plus the device's slack below.
OVERHEAD_FACTOR = 1.5
# The least share of the windows' mean a reported latency (their median) may be.
MEAN_SHARE = 0.5


class TimerShortfall(IntegrityError):
    """The 'timer' check failed: the windows fell ``shortfall_ms`` short of
    what the judge's clock allows."""

    def __init__(self, shortfall_ms: float, detail: str) -> None:
        self.shortfall_ms = shortfall_ms
        super().__init__("timer", detail)


@dataclass(frozen=True)
class Slack:
    """What else may pass outside the windows of one request of ``n``
    repetitions: ``n x per_rep_ms + per_request_ms + wall_share x`` the wall time."""

    per_rep_ms: float
    per_request_ms: float
    wall_share: float


SLACK = {
    # On a 2-core machine running two stages at once, an honest worker lost
    # up to 1.2 ms a repetition outside its windows to the other processes,
    # waking the worker alone took up to 5 ms, and 12 % of the wall time
    # went to other work: a verdict must not depend on the machine's load.
    "cpu": Slack(per_rep_ms=1.0, per_request_ms=5.0, wall_share=0.3),
    # On the H200 (16 cores) an honest worker lost at most 0.06 ms a
    # repetition beyond the judge's own overhead and its spin (the bundled
    # candidates' benchmark, 92 requests): a lie hides in far less.
    "cuda": Slack(per_rep_ms=0.25, per_request_ms=5.0, wall_share=0.15),
}


def check_reported_time(op: str, windows: list[float], wall_ms: float, overhead_ms: float, spin_ms: float,
                        device: str = "cpu", account: dict[str, Any] | None = None) -> float:
    """IntegrityError('timer') when the reported windows cannot be true: their
    total must account for the judge's wall time around them, less
    ``len(windows) x (OVERHEAD_FACTOR x overhead_ms + spin_ms)`` and the
    device's :data:`SLACK`. So a tampered timer can hide at most that much:
    it cannot make a call that takes a millisecond on the judge's clock
    report a microsecond. Returns that least total (ms, at least 0): how
    much of the chunk's wall time the windows must hold, for
    :func:`judged_latency`."""
    n = len(windows)
    if n == 0:
        raise IntegrityError("timer", f"the candidate's worker reported no timed repetitions of {op}")
    if any(not _finite(w) or w < 0 for w in windows):
        raise IntegrityError("timer", f"the candidate's worker reported an impossible window for {op}")
    slack = SLACK.get(device, SLACK["cpu"])
    allowance = (n * (OVERHEAD_FACTOR * overhead_ms + spin_ms + slack.per_rep_ms) + slack.per_request_ms
                 + slack.wall_share * wall_ms)
    reported = float(sum(windows))
    if reported < wall_ms - allowance:
        raise TimerShortfall(
            wall_ms - allowance - reported,
            f"the candidate's {n} timed repetitions of {op} reported {reported:.4g} ms in all, but the judge's clock "
            f"saw {wall_ms:.4g} ms around them, more than the {allowance:.4g} ms that may pass outside the windows: "
            "the timer in the candidate's process was tampered with"
            + f" (the judge's own loop lost {overhead_ms:.3g} ms a repetition outside its windows, the spin {spin_ms:.3g} ms"
            + (f"; the worker's own account of the chunk, ms: {_account_text(account)})" if account else ")"),
        )
    return max(wall_ms - allowance, 0.0)


def judged_latency(latency_ms: float, windows: list[float], least_ms: float) -> float:
    """The latency of the reported ``windows`` (their median: ``latency_ms``),
    at least :data:`MEAN_SHARE` of their mean and the judge's floor: the
    least total its clock allows them (:func:`check_reported_time`, summed
    over the chunks) over the repetitions. The windows' total is checked,
    but a worker could shrink their median by moving the time of most
    repetitions into a few: so it can halve its time at most, and never
    below what hiding the time outside the windows would earn. An honest
    median lies above both unless a few stalls hold half the time, and then
    the figure comes out slower, never failed."""
    reps = max(len(windows), 1)
    return max(latency_ms, MEAN_SHARE * sum(windows) / reps, least_ms / reps)


def _account_text(account: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.3g}" for k, v in account.items() if isinstance(v, (int, float)))


class RemoteTiming:
    """One timed case run in the candidate's worker, step by step."""

    def __init__(self, candidate: RemoteCandidate, sets: list[tuple[tuple, dict]], timer: dict[str, Any],
                 seed: int, keep: int, key: int = 0):
        self.candidate = candidate
        self.worker = candidate.worker
        self.name = candidate.__name__
        self.sets = sets
        self.timer = timer
        self.seed = seed  # of the warm-up's values
        self.keep = keep  # results the worker keeps alive: the longest chunk's
        self.key = key  # of the digests the worker commits to (.commit)
        self.spin_ms = 0.0
        self.round_ms = 0.0
        self.account: dict[str, Any] | None = None  # the worker's account of its last chunk (a hint)

    def _ask(self, header: dict[str, Any], fd: int | None = None) -> tuple[dict[str, Any], int | None]:
        __tracebackhide__ = True
        reply, reply_fd = self.worker.request(header, fd)
        if reply.get("modes"):
            if reply_fd is not None:
                os.close(reply_fd)
            raise IntegrityError(
                "torch-mode",
                f"{'; '.join(map(str, reply['modes']))} in the candidate {self.name}'s process while it was timed; "
                "a candidate may not intercept torch's operators",
            )
        if "error" in reply:
            if reply_fd is not None:
                os.close(reply_fd)
            raise _reraise(reply["error"], self.name)
        if "override_error" in reply:
            raise RuntimeError(str(reply["override_error"]))
        return reply, reply_fd

    def start(self) -> None:
        with self.worker.call_lock:
            try:
                packed = transport.pack(self.sets, arena=self.worker.arena, op="time-start",
                                        file=str(self.candidate.path), name=self.name, timer=self.timer,
                                        seed=self.seed, keep=self.keep, key=self.key)
            except transport.TransportError as e:
                raise TypeError(str(e)) from None
            try:
                reply, _ = self._ask(packed.header, packed.fd)
            finally:
                packed.close()
        # The spin is the worker's word, and it widens the allowance: it is
        # at most what the timer would choose for the candidate's fastest
        # call as the judge timed it (a round trip: more than its host time).
        ceiling = 2 * self.candidate.fastest_ms + 0.02 if self.candidate.fastest_ms is not None else 0.0
        self.spin_ms = min(_number(reply.get("spin_ms")), ceiling, 5.0)
        # The worker's figure of a repetition decides how many run: one that
        # claimed a long one would be timed once, inside the per-request
        # slack. The judge's own figure (a round trip, longer than a
        # repetition) caps it.
        self.round_ms = _number(reply.get("round_ms"))
        if self.candidate.fastest_ms is not None:
            self.round_ms = min(self.round_ms, self.candidate.fastest_ms)

    def reps(self, n: int, seed: int, first: bool = True) -> tuple[list[float], float, list[Any]]:
        """The reported windows of a chunk of ``n`` more repetitions whose
        values ``seed`` chooses, the judge's wall time around them
        (``first``: the case's first chunk), and the worker's digest of each
        result under the case's key (:mod:`.commit`)."""
        t0 = time.perf_counter()
        reply, _ = self._ask({"op": "time-reps", "n": int(n), "seed": int(seed), "first": bool(first)})
        wall_ms = (time.perf_counter() - t0) * 1e3
        windows = reply.get("windows")
        if not isinstance(windows, list) or len(windows) != n:
            raise IntegrityError("timer", f"the candidate's worker reported {len(windows or [])} windows for {n} repetitions")
        digests = reply.get("digests")
        if not isinstance(digests, list) or len(digests) != n:
            raise IntegrityError("timed-output", f"the candidate's worker committed to {len(digests or [])} results "
                                                 f"for {n} repetitions")
        account = reply.get("account")
        self.account = account if isinstance(account, dict) else None
        return windows, wall_ms, digests

    def outputs(self, picks: list[int]) -> list[Any]:
        """The results of repetitions ``picks`` of the last chunk, as plain tensors."""
        with self.worker.call_lock:
            reply, fd = self._ask({"op": "time-outputs", "reps": [int(i) for i in picks]})
            try:
                values, received = transport.unpack(reply, None if fd is None else os.dup(fd), own=True,
                                                   mappings=self.worker.mappings)
                received.close()
            finally:
                if fd is not None:
                    os.close(fd)
        check_results(reply, self.name, timed=True)
        if not isinstance(values, list) or len(values) != len(picks):
            raise IntegrityError("timed-output", f"the candidate's worker returned no result of the timed calls of {self.name}")
        return values

    def settle(self, n: int, seed: int) -> float | None:
        reply, _ = self._ask({"op": "time-settle", "n": int(n), "seed": int(seed)})
        value = reply.get("settled")
        if value is None:
            return None
        # Less the idle device's figure, an honest bound may come out a few
        # microseconds below zero; only a larger one can change the latency.
        if not _finite(value):
            raise IntegrityError("timer", f"the candidate's worker reported an impossible figure ({value!r})")
        return max(float(value), 0.0)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(value: Any) -> float:
    if not _finite(value) or value < 0:
        raise IntegrityError("timer", f"the candidate's worker reported an impossible figure ({value!r})")
    return float(value)
