"""The worker's side of a timed benchmark case: the repetitions run where the
candidate runs, step by step, as the judge asks.

A timed case is four requests, so that the judge's own clock can be put
around the timed repetitions alone (:mod:`.judge`, ``RemoteTiming``):

- ``time-start`` (the case's value sets, the timer's settings): build the
  call's working inputs from the first set, then the timer's warm-up
  (:meth:`Timer.prepare`); answers the spin and the round time;
- ``time-reps`` (n): n timed repetitions, each starting from the next value
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

__all__ = ["KEPT_RESULTS", "TimedCase"]

# Results of the last repetitions the judge checks (one per value set, at most).
KEPT_RESULTS = 3


class TimedCase:
    """One case being timed: the working inputs, the value sets, the timer."""

    def __init__(self, func: Callable, sets: list[tuple[tuple, dict]], timer: dict[str, Any]):
        if not sets:
            raise ValueError("a timed case needs at least one value set")
        self.func = func
        self.sets = sets
        self.args, self.kwargs = clone_inputs(*sets[0])
        self.timer = make_timer(str(timer["device"]), float(timer["warmup_ms"]), float(timer["iter_ms"]))
        self._targets = [t for _, t in strided_tensors(torch, (self.args, self.kwargs), "inputs")]
        self._sources = [[t for _, t in strided_tensors(torch, values, "inputs")] for values in sets]
        self._next = 0  # the value set the next setup copies in
        self._kept: deque[tuple[int, Any]] = deque(maxlen=KEPT_RESULTS)
        self._prepared: Prepared | None = None

    def _setup(self) -> None:
        with torch.no_grad():
            for dst, src in zip(self._targets, self._sources[self._next % len(self._sources)]):
                dst.copy_(src)
        self._next += 1

    def _call(self) -> Any:
        out = self.func(*self.args, **self.kwargs)
        self._kept.append(((self._next - 1) % len(self.sets), out))
        return out

    def start(self) -> dict[str, Any]:
        self._prepared = self.timer.prepare(self._call, self._setup)
        p = self._prepared
        return {"spin_ms": p.spin_ms, "round_ms": p.round_ms}

    def reps(self, n: int) -> dict[str, Any]:
        if self._prepared is None:
            raise RuntimeError("time-reps before time-start")
        self._next = 0  # the judge knows which set repetition i used: i % len(sets)
        self._kept.clear()
        return {"windows": self.timer.windows(self._call, self._prepared, self._setup, int(n))}

    def settle(self, n: int) -> dict[str, Any]:
        return {"settled": self.timer.settled(self._call, self._setup, int(n))}

    def outputs(self) -> tuple[list[int], list[Any]]:
        """(value set of each kept result, the results), the results that live
        in the working inputs' memory dropped except the last one's."""
        inputs = {t.untyped_storage().data_ptr() for t in self._targets if t.untyped_storage().nbytes()}
        kept = list(self._kept)
        slots, values = [], []
        for i, (slot, out) in enumerate(kept):
            if i < len(kept) - 1 and _touches(out, inputs):
                continue
            slots.append(slot)
            values.append(out)
        return slots, values


def _touches(value: Any, storages: set[int]) -> bool:
    return any(t.untyped_storage().data_ptr() in storages for _, t in strided_tensors(torch, value, "out"))
