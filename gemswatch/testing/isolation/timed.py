"""The worker's side of a timed benchmark case: the repetitions run where the
candidate runs, step by step, as the judge asks.

A timed case is four requests, so that the judge's own clock can be put
around the timed repetitions alone (:mod:`.judge`, ``RemoteTiming``):

- ``time-start`` (the case's value sets, the timer's settings, a seed, how
  many results to keep, the key of the digests): build the call's working
  inputs, then the timer's warm-up (:meth:`Timer.prepare`), which also
  builds the digests' weights; answers the spin and the round time;
- ``time-reps`` (n, seed, first): a chunk of n timed repetitions, each
  starting from values of its own (the chunk's seed and the repetition's
  index choose them) copied into the working inputs outside the window, as
  in the judge; answers the n windows and a digest of each result
  (:mod:`.commit`), made as the chunk runs. Every result of the chunk is
  kept;
- ``time-outputs`` (reps): the results of those repetitions of the last
  chunk (the judge picks them after the chunk ran);
- ``time-settle`` (n, seed): the timer's bound of work left on other streams.

Every call of the candidate here is a plain call, as in a checked call;
nothing here is trusted by the judge: the windows are cross-checked
against its wall clock and the results against its baseline.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable

import torch

from ..benchmark.timed_checks import InputPool
from ..benchmark.timing import Prepared, clone_inputs, make_timer
from ..integrity._values import strided_tensors
from .commit import Digester

__all__ = ["KEPT_RESULTS", "ResultKeeper", "TimedCase", "clone_result", "own_tensors", "poison_", "storages"]

# Results kept alive by default (the judge asks for more: a chunk's worth);
# while they are alive an honest kernel's results never share memory (a
# kernel that hands back a result it kept from an earlier call does).
KEPT_RESULTS = 6


def storages(value: Any) -> set[int]:
    """The data pointers of the (non-empty) storages of the tensors in ``value``."""
    return {t.untyped_storage().data_ptr() for _, t in strided_tensors(torch, value, "value")
            if t.untyped_storage().nbytes()}


def own_tensors(value: Any, spare: set[int]) -> list[torch.Tensor]:
    """The tensors of a result that live in memory of their own: not empty,
    not in a storage of ``spare`` (the inputs')."""
    return [t for _, t in strided_tensors(torch, value, "out")
            if t.untyped_storage().nbytes() and t.untyped_storage().data_ptr() not in spare]


def poison_(tensors: list[torch.Tensor]) -> None:
    """Overwrite the tensors of a result about to be let go (NaN, or every bit
    flipped; :func:`own_tensors` picks them): memory handed back to the
    allocator never holds a right answer, so a kernel that returns
    uninitialised memory cannot return a result left there by an earlier
    call with the same values."""
    with torch.no_grad():
        for t in tensors:
            if t.is_floating_point() or t.is_complex():
                t.fill_(float("nan"))
            elif t.dtype == torch.bool:
                t.logical_not_()
            else:
                t.bitwise_not_()


def clone_result(value: Any) -> Any:
    """A copy of a result whose tensors have memory of their own."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        copied = [clone_result(v) for v in value]
        return type(value)(*copied) if hasattr(value, "_fields") else type(value)(copied)
    if isinstance(value, dict):
        return {k: clone_result(v) for k, v in value.items()}
    return value


class ResultKeeper:
    """Keeps the results of the last calls alive and poisons each one it lets
    go (:func:`poison_`), in :meth:`let_go`, which the repetition's setup
    calls, outside the timed window. A result in an input's memory (an
    in-place operator's) is copied there first (:meth:`secure`): the next
    repetition's inputs overwrite it. The judge times its baseline through
    one too, so the two loops it compares do the same work outside their
    windows."""

    def __init__(self, spare: Callable[[], set[int]], size: int = KEPT_RESULTS):
        self.spare = spare
        self.kept: deque[tuple[Any, Any]] = deque()
        self.size = size

    def keep(self, tag: Any, out: Any) -> Any:
        self.kept.append((tag, out))
        return out

    def secure(self) -> None:
        """Copy the last result out of the inputs' memory, if it lives there."""
        if self.kept and storages(self.kept[-1][1]) & self.spare():
            tag, out = self.kept.pop()
            self.kept.append((tag, clone_result(out)))

    def let_go(self) -> None:
        """Poison and drop the results beyond the last ``size``."""
        while len(self.kept) > self.size:
            _, old = self.kept.popleft()
            if not any(old is o for _, o in self.kept):
                poison_(own_tensors(old, self.spare()))

    def get(self, tag: Any) -> Any:
        for t, out in self.kept:
            if t == tag:
                return out
        raise KeyError(tag)

    def clear(self) -> None:
        self.kept.clear()


class TimedCase:
    """One case being timed: the working inputs, their feeder, the timer.

    Repetitions come in chunks, each with a seed of its own (the values of
    its repetitions: :func:`~..benchmark.timed_checks.fill_rep_`); the
    results of the current chunk are all kept, for the judge may ask for
    any of them after the chunk (it picks at random, so a candidate cannot
    be right only on the repetitions that are checked)."""

    def __init__(self, func: Callable, sets: list[tuple[tuple, dict]], timer: dict[str, Any], seed: int = 0,
                 keep: int = KEPT_RESULTS, key: int = 0):
        self.func = func
        self.pool = InputPool(sets)
        self.args, self.kwargs = clone_inputs(*sets[0])
        self.timer = make_timer(str(timer["device"]), float(timer["warmup_ms"]), float(timer["iter_ms"]))
        self.warmup_ms = float(timer["warmup_ms"])
        self._targets = [t for _, t in strided_tensors(torch, (self.args, self.kwargs), "inputs")]
        self.feeder = self.pool.feeder(self.args, self.kwargs, seed)
        self.chunk = 0
        self._keeper = ResultKeeper(self._input_storages, size=max(int(keep), 1))
        self._prepared: Prepared | None = None
        self._digester = Digester(key)
        self._committing = False  # in a chunk: each result is digested as the next repetition is set up
        self._digests: dict[tuple[int, int], list[float]] = {}
        self._account: dict[str, float] = {}  # ms per part of the current chunk's setups

    def _setup(self) -> None:
        clock = time.perf_counter
        t0 = clock()
        self._keeper.secure()
        t1 = clock()
        self._commit_last()
        t2 = clock()
        self._keeper.let_go()
        t3 = clock()
        self.feeder()
        t4 = clock()
        for part, ms in zip(("secure", "digest", "release", "inputs"), (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            self._account[part] = self._account.get(part, 0.0) + ms * 1e3

    def _commit_last(self) -> None:
        """Digest the last result, if it is this chunk's and not digested yet.
        The warm-up digests too and drops the digest, as the judge's own loop
        does: it builds the weights and loads the digest's kernels outside the
        judge's clock (on an H200 the first digests of a chunk cost 3.5 ms
        each otherwise, and an honest first chunk failed the timer check)."""
        if not self._keeper.kept:
            return
        tag, out = self._keeper.kept[-1]
        if not self._committing:
            self._digester.digest(out)
        elif tag[0] == self.chunk and tag not in self._digests:
            self._digests[tag] = self._digester.digest(out)

    def _call(self) -> Any:
        return self._keeper.keep((self.chunk, self.feeder.rep - 1), self.func(*self.args, **self.kwargs))

    def start(self) -> dict[str, Any]:
        self._prepared = self.timer.prepare(self._call, self._setup, self.warmup_ms)
        # The warm-up's results go now, not inside the judge's clock around
        # the first chunk (freeing a chunk's worth of memory takes a while).
        self._keeper.clear()
        p = self._prepared
        return {"spin_ms": p.spin_ms, "round_ms": p.round_ms}

    def reps(self, n: int, seed: int, first: bool) -> dict[str, Any]:
        """``n`` more timed repetitions, a chunk seeded ``seed`` (``first``:
        the first of a case's chunks), each result digested as it is kept."""
        if self._prepared is None:
            raise RuntimeError("time-reps before time-start")
        if first:
            self._keeper.clear()
        self._next_chunk(seed)
        self._committing, self._digests, self._account = True, {}, {}
        t0 = time.perf_counter()
        try:
            windows = self.timer.windows(self._call, self._prepared, self._setup, int(n))
            self._keeper.secure()
            self._commit_last()
        finally:
            self._committing = False
        self._account["loop"] = (time.perf_counter() - t0) * 1e3
        # The worker's own account of the chunk's time (ms), for the judge's
        # message should the windows not add up: a hint, never evidence.
        account = {k: round(v, 3) for k, v in self._account.items()}
        return {"windows": windows, "digests": [self._digests.get((self.chunk, i)) for i in range(int(n))],
                "account": account}

    def settle(self, n: int, seed: int) -> dict[str, Any]:
        self._next_chunk(seed)
        return {"settled": self.timer.settled(self._call, self._setup, int(n))}

    def _next_chunk(self, seed: int) -> None:
        self.chunk += 1
        self.feeder.restart(seed)

    def reused(self) -> int:
        """How many of the kept results live in the memory of another kept
        result (not an input's): each is a result handed back twice."""
        inputs = self._input_storages()
        seen: set[int] = set()
        again = 0
        for _, out in self._keeper.kept:
            ptrs = storages(out) - inputs
            again += bool(ptrs & seen)
            seen |= ptrs
        return again

    def _input_storages(self) -> set[int]:
        return storages(self._targets)

    def outputs(self, picks: list[int]) -> list[Any]:
        """The results of repetitions ``picks`` of the last chunk."""
        self._keeper.secure()
        return [self._keeper.get((self.chunk, int(i))) for i in picks]
