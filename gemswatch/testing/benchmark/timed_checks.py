"""What the benchmark checks of the calls it times, and their fresh inputs.

The timed calls are the calls whose speed goes on the leaderboard, so they
are judged too, not only the untimed first call:

- :class:`InputPool`: every timed repetition starts from fresh inputs,
  copied into the call's tensors outside the timed window from a rotating
  pool of value sets (the case as built and refilled variants of it), so a
  result kept from an earlier call (keyed on a pointer, a tensor version or
  the shape) is never the right one for free;
- :func:`check_timed_output`: the result of the last timed call matches the
  baseline's result for the same inputs, in-place operators included
  (relative L2 distance over the
  finite entries, at most :data:`TIMED_DISTANCE`: rounding of 16-bit
  outputs is a few thousandths, a candidate that answers differently when
  it is being timed is off by about its own size);
- :func:`check_speed_of_light`: a memory-bound case cannot move its bytes
  faster than the device copies memory (measured in the run), with a
  margin for kernels that read more than they write.

Imports torch (as an argument) and the integrity error; never the plugin
or ``gemswatch.watch``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import torch

from ..integrity import IntegrityError, compare_outputs, refill_
from ..integrity._values import strided_tensors
from .timing import clone_inputs

__all__ = ["TIMED_DISTANCE", "SPEED_OF_LIGHT_MARGIN", "InputPool", "check_timed_output", "check_speed_of_light"]

POOL_SIZE = 3


class InputPool:
    """Value sets for a case's timed repetitions: the case as built, then
    refilled copies (new values, same order, signs and zeros)."""

    def __init__(self, args: tuple, kwargs: dict, seed: int, size: int = POOL_SIZE):
        self.sets = [clone_inputs(args, kwargs) for _ in range(size)]
        for i, values in enumerate(self.sets[1:], 1):
            refill_(torch, values, seed ^ (0x9E37 * i))
        self._next: dict[int, int] = {}  # refresher -> how many times it ran

    def refresher(self, args: tuple, kwargs: dict) -> Callable[[], None]:
        """A setup that copies the next value set into ``args``/``kwargs``."""
        targets = [t for _, t in strided_tensors(torch, (args, kwargs), "inputs")]
        sources = [[t for _, t in strided_tensors(torch, values, "inputs")] for values in self.sets]

        def refresh() -> None:
            n = self._next.get(id(refresh), 0)
            self._next[id(refresh)] = n + 1
            with torch.no_grad():
                for dst, src in zip(targets, sources[n % len(sources)]):
                    dst.copy_(src)

        return refresh

    def last(self, refresher: Callable[[], None]) -> tuple[tuple, dict]:
        """The value set the last run of ``refresher`` copied in."""
        n = self._next.get(id(refresher), 0)
        return self.sets[(n - 1) % len(self.sets)]

TIMED_DISTANCE = 0.02
# Honest kernels reached up to 108 % of the measured copy bandwidth on an
# H200 (pure reads beat a copy's read+write mix); 150 % is impossible.
SPEED_OF_LIGHT_MARGIN = 1.5


def check_timed_output(torch: ModuleType, op: str, got: Any, want: Any) -> None:
    """IntegrityError('timed-output') unless ``got`` (the last timed call's
    result) matches ``want`` (the baseline's, same inputs)."""
    measured = compare_outputs(torch, got, want)
    if measured is None:
        raise IntegrityError(
            "timed-output",
            f"the timed calls of {op} returned a result of another structure, shape or dtype than the baseline's; "
            "timed calls are checked like the first one",
        )
    diff, norm = measured
    distance = diff / norm if norm else (0.0 if diff == 0 else float("inf"))
    if distance > TIMED_DISTANCE:
        raise IntegrityError(
            "timed-output",
            f"the timed calls of {op} returned results {distance:.3g} away from the baseline's (relative L2 "
            f"distance; at most {TIMED_DISTANCE} allowed): a candidate must be right when it is timed too",
        )


def check_speed_of_light(op: str, latency_ms: float, moved_bytes: int, copy_gbps: float | None) -> None:
    """IntegrityError('speed-of-light') when ``moved_bytes`` in
    ``latency_ms`` beats the device's copy bandwidth by more than the margin."""
    if not copy_gbps or latency_ms <= 0 or moved_bytes <= 0:
        return
    floor_ms = moved_bytes / (copy_gbps * SPEED_OF_LIGHT_MARGIN * 1e9) * 1e3
    if latency_ms < floor_ms:
        raise IntegrityError(
            "speed-of-light",
            f"{op} timed {latency_ms:.4g} ms for {moved_bytes} bytes, below the case's floor of {floor_ms:.4g} ms "
            f"({SPEED_OF_LIGHT_MARGIN:g} x the measured copy bandwidth of {copy_gbps:.0f} GB/s): impossible, rejected",
        )
