"""The worker's side of a timed benchmark case: the repetitions run where the
candidate runs, step by step, as the judge asks.

A timed case is four requests, so that the judge's own clock can be put
around the timed repetitions alone (:mod:`.judge`, ``RemoteTiming``):

- ``time-start`` (the case's value sets, the timer's settings): build the
  call's working inputs from the first set, then the timer's warm-up
  (:meth:`Timer.prepare`); answers the spin and the round time;
- ``time-reps`` (n, first): n timed repetitions (a case asks for them in
  chunks, the first one ``first``), each starting from the next value
  set copied into the working inputs (outside the window, as in the judge);
  answers the n windows. The results of the last repetitions are kept;
- ``time-outputs``: the kept results, with the value set each was computed
  from (a result that lives in an input's memory is good for the last
  repetition only: the next one's inputs overwrite it);
- ``time-settle`` (n): the timer's bound of work left on other streams.

Every call of the candidate here is a plain call, as in a checked call;
nothing here is trusted by the judge: the windows are cross-checked
against its wall clock and the results against its baseline.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

import torch

from ..benchmark.timing import Prepared, clone_inputs, make_timer
from ..integrity._values import strided_tensors

__all__ = ["KEPT_RESULTS", "ResultKeeper", "TimedCase", "own_tensors", "poison_", "storages"]

# The judge checks the results of the last KEPT_RESULTS repetitions; twice
# as many are kept alive, and while they are alive an honest kernel's
# results never share memory (a kernel that hands back a result it kept
# from an earlier call does).
KEPT_RESULTS = 3


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


class ResultKeeper:
    """Keeps the results of the last calls alive and poisons each one it lets
    go (:func:`poison_`), in :meth:`let_go`, which the repetition's setup
    calls, outside the timed window. The judge times its baseline through
    one too, so the two loops it compares do the same work outside their
    windows."""

    def __init__(self, spare: Callable[[], set[int]], size: int = 2 * KEPT_RESULTS):
        self.spare = spare
        self.kept: deque[tuple[int, Any]] = deque()
        self.size = size

    def keep(self, slot: int, out: Any) -> Any:
        self.kept.append((slot, out))
        return out

    def let_go(self) -> None:
        """Poison and drop the results beyond the last ``size``."""
        while len(self.kept) > self.size:
            _, old = self.kept.popleft()
            if not any(old is o for _, o in self.kept):
                poison_(own_tensors(old, self.spare()))

    def clear(self) -> None:
        self.kept.clear()


class TimedCase:
    """One case being timed: the working inputs, the value sets, the timer."""

    def __init__(self, func: Callable, sets: list[tuple[tuple, dict]], timer: dict[str, Any]):
        if not sets:
            raise ValueError("a timed case needs at least one value set")
        self.func = func
        self.sets = sets
        self.args, self.kwargs = clone_inputs(*sets[0])
        self.timer = make_timer(str(timer["device"]), float(timer["warmup_ms"]), float(timer["iter_ms"]))
        self.warmup_ms = float(timer["warmup_ms"])
        self._targets = [t for _, t in strided_tensors(torch, (self.args, self.kwargs), "inputs")]
        self._sources = [[t for _, t in strided_tensors(torch, values, "inputs")] for values in sets]
        self._next = 0  # the value set the next setup copies in
        self._keeper = ResultKeeper(self._input_storages)
        self._prepared: Prepared | None = None

    def _setup(self) -> None:
        self._keeper.let_go()
        with torch.no_grad():
            for dst, src in zip(self._targets, self._sources[self._next % len(self._sources)]):
                dst.copy_(src)
        self._next += 1

    def _call(self) -> Any:
        return self._keeper.keep((self._next - 1) % len(self.sets), self.func(*self.args, **self.kwargs))

    def start(self) -> dict[str, Any]:
        self._prepared = self.timer.prepare(self._call, self._setup, self.warmup_ms)
        p = self._prepared
        return {"spin_ms": p.spin_ms, "round_ms": p.round_ms}

    def reps(self, n: int, first: bool) -> dict[str, Any]:
        """``n`` more timed repetitions (``first``: the first of a case's chunks)."""
        if self._prepared is None:
            raise RuntimeError("time-reps before time-start")
        if first:
            self._next = 0  # the judge knows which set repetition i used: i % len(sets)
            self._keeper.clear()
        return {"windows": self.timer.windows(self._call, self._prepared, self._setup, int(n))}

    def settle(self, n: int) -> dict[str, Any]:
        return {"settled": self.timer.settled(self._call, self._setup, int(n))}

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

    def outputs(self) -> tuple[list[int], list[Any]]:
        """(value set of each kept result, the results) of the last
        KEPT_RESULTS repetitions, the results that live in the working
        inputs' memory dropped except the last one's."""
        inputs = self._input_storages()
        kept = list(self._keeper.kept)[-KEPT_RESULTS:]
        slots, values = [], []
        for i, (slot, out) in enumerate(kept):
            if i < len(kept) - 1 and storages(out) & inputs:
                continue
            slots.append(slot)
            values.append(out)
        return slots, values

