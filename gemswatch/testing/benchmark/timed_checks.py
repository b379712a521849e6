"""What the benchmark checks of the calls it times, and their fresh inputs.

The timed calls are the calls whose speed goes on the leaderboard, so they
are judged too, not only the untimed first call:

- :class:`InputPool`: every timed repetition starts from values no other
  repetition of the case saw (:func:`fill_rep_`: a value set of a rotating
  pool, with a slab of each tensor taken from another set and each of its
  elements scaled by a factor of the repetition's own), copied into the
  call's tensors outside the timed window, so a result kept from an
  earlier call (keyed on a pointer, a tensor version, the shape or the
  values themselves) is never the right one for free;
- :func:`check_timed_output`: the result of a timed call matches the
  baseline's result for the same inputs, in-place operators included
  (relative L2 distance over the finite entries, at most
  :data:`TIMED_DISTANCE`: rounding of 16-bit outputs is a few
  thousandths, a candidate that answers differently when it is being
  timed is off by about its own size);
- :func:`check_speed_of_light`: a memory-bound case cannot move its bytes
  faster than the device copies memory (measured in the run), with a
  margin for kernels that read more than they write; and a compute-bound
  case cannot do its FLOPs faster than torch's own matrix product in the
  dtype (measured in the run), with the same margin.

Imports torch (as an argument) and the integrity error; never the plugin
or ``gemswatch.watch``.
"""

from __future__ import annotations

import math
import random
from types import ModuleType
from typing import Any, Callable

import torch

from ..accuracy import AccuracyError
from ..integrity import IntegrityError, compare_outputs, refill_
from ..integrity._values import strided_tensors
from .case_accuracy import Accuracy, check_case_accuracy
from .timing import clone_inputs

__all__ = ["TIMED_DISTANCE", "SPEED_OF_LIGHT_MARGIN", "Feeder", "InputPool", "fill_rep_", "check_timed_output", "check_speed_of_light"]

POOL_SIZE = 3
# The share of each tensor's largest dim a repetition takes from another value set.
STAMP_SHARE = 0.5
# The range of the factors that scale that slab's elements (floating tensors).
STAMP_FACTOR = (0.75, 1.25)


def _stamp_rng(seed: int, rep: int) -> random.Random:
    return random.Random((int(seed) & (2**63 - 1)) * 1_000_003 + int(rep))


def fill_rep_(targets: list[torch.Tensor], sources: list[list[torch.Tensor]], seed: int, rep: int) -> None:
    """Write repetition ``rep``'s values into ``targets``: value set ``rep %
    len(sources)``, with a slab of each tensor (half of its largest dim, at
    an offset of the repetition's own) taken from another set and stirred
    (:func:`_stir_`: each element scaled by a factor of its own). No two
    repetitions of a case see the same values, so a result kept for some
    values (keyed on their bytes, or on a sample of them) is never the
    right one for free; and the slab changes a large part of the result, so
    a stale one shows."""
    rng = _stamp_rng(seed, rep)
    k = len(sources)
    for j, dst in enumerate(targets):
        dst.copy_(sources[rep % k][j])
        if dst.numel() == 0:
            continue
        other = sources[(rep + 1 + rng.randrange(max(k - 1, 1))) % k][j]
        if dst.dim() == 0:
            slab, src = dst, other
        else:
            d = max(range(dst.dim()), key=lambda i: dst.shape[i])
            length = max(1, math.ceil(dst.shape[d] * STAMP_SHARE))
            start = rng.randrange(dst.shape[d] - length + 1)
            slab, src = dst.narrow(d, start, length), other.narrow(d, start, length)
        slab.copy_(src)
        _stir_(slab, rng.getrandbits(63))


def _stir_(slab: torch.Tensor, seed: int) -> None:
    """Scale each element of a floating ``slab`` by a factor of its own, drawn
    from ``seed`` on the slab's device. One factor per slab left each
    repetition's values a linear mix of the value sets: a candidate that
    read the feeder's seed (the feeder runs in the candidate's process)
    made a sum from sums of the sets it kept, never reading the input. Per
    element, making the result takes a pass over as many values as reading
    the input does. Integer slabs stay as copied (no benchmark case has
    integer inputs, and their values stay those of a value set)."""
    if not (slab.is_floating_point() or slab.is_complex()):
        return
    real = slab.real.dtype if slab.is_complex() else slab.dtype
    g = torch.Generator(device=slab.device).manual_seed(seed)
    slab.mul_(torch.empty(slab.shape, dtype=real, device=slab.device).uniform_(*STAMP_FACTOR, generator=g))


class Feeder:
    """The setup of a loop of timed repetitions: each run copies the next
    repetition's values into the call's inputs (:func:`fill_rep_`).
    :meth:`restart` starts a chunk of repetitions with a seed of its own."""

    def __init__(self, targets: list[torch.Tensor], sources: list[list[torch.Tensor]], seed: int = 0):
        self.targets = targets
        self.sources = sources
        self.seed = seed
        self.rep = 0  # the repetition the next run fills in

    def restart(self, seed: int) -> None:
        self.seed, self.rep = int(seed), 0

    def __call__(self) -> None:
        with torch.no_grad():
            fill_rep_(self.targets, self.sources, self.seed, self.rep)
        self.rep += 1


class InputPool:
    """Value sets for a case's timed repetitions (the case as built, then
    refilled copies: new values, same order, signs and zeros), and the
    values of any repetition of them (:func:`fill_rep_`)."""

    def __init__(self, sets: list[tuple[tuple, dict]]):
        if not sets:
            raise ValueError("a timed case needs at least one value set")
        self.sets = sets

    @classmethod
    def of_case(cls, args: tuple, kwargs: dict, seed: int, size: int = POOL_SIZE) -> "InputPool":
        sets = [clone_inputs(args, kwargs) for _ in range(size)]
        for i, values in enumerate(sets[1:], 1):
            refill_(torch, values, seed ^ (0x9E37 * i))
        return cls(sets)

    def _sources(self) -> list[list[torch.Tensor]]:
        return [[t for _, t in strided_tensors(torch, values, "inputs")] for values in self.sets]

    def feeder(self, args: tuple, kwargs: dict, seed: int = 0) -> Feeder:
        """A setup that fills ``args``/``kwargs`` with each repetition's values in turn."""
        return Feeder([t for _, t in strided_tensors(torch, (args, kwargs), "inputs")], self._sources(), seed)

    def values(self, seed: int, rep: int) -> tuple[tuple, dict]:
        """A fresh copy of the values repetition ``rep`` of a chunk seeded ``seed`` used."""
        args, kwargs = clone_inputs(*self.sets[0])
        feeder = self.feeder(args, kwargs, seed)
        feeder.rep = rep
        feeder()
        return args, kwargs


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


def check_timed_accuracy(op: str, accuracy: Accuracy | None, baseline: Callable[..., Any], got: Any,
                         args: tuple, kwargs: dict, eager: Any) -> None:
    """IntegrityError('timed-output') unless a timed repetition's result
    (for ``args``/``kwargs``, its values; ``eager``: the baseline's result
    for them) passes the accuracy rule as the case's first call must
    (:func:`.case_accuracy.check_case_accuracy`)."""
    if accuracy is None:
        return
    try:
        check_case_accuracy(op, accuracy, baseline, got, args, kwargs, eager)
    except AccuracyError as e:
        raise IntegrityError("timed-output", f"a timed repetition of {op} returned a result outside the accuracy "
                                             f"rule (timed calls are judged as the first one is): {e}") from None


def check_speed_of_light(op: str, latency_ms: float, moved_bytes: int, copy_gbps: float | None,
                         flops: float | None = None, peak_tflops: float | None = None) -> None:
    """IntegrityError('speed-of-light') when ``moved_bytes`` in
    ``latency_ms`` beats the device's copy bandwidth, or ``flops`` in it
    beat the measured matrix-product peak, by more than the margin."""
    if latency_ms <= 0:
        return
    if copy_gbps and moved_bytes > 0:
        floor_ms = moved_bytes / (copy_gbps * SPEED_OF_LIGHT_MARGIN * 1e9) * 1e3
        if latency_ms < floor_ms:
            raise IntegrityError(
                "speed-of-light",
                f"{op} timed {latency_ms:.4g} ms for {moved_bytes} bytes, below the case's floor of {floor_ms:.4g} ms "
                f"({SPEED_OF_LIGHT_MARGIN:g} x the measured copy bandwidth of {copy_gbps:.0f} GB/s): impossible, rejected",
            )
    if flops and peak_tflops:
        floor_ms = flops / (peak_tflops * SPEED_OF_LIGHT_MARGIN * 1e12) * 1e3
        if latency_ms < floor_ms:
            raise IntegrityError(
                "speed-of-light",
                f"{op} timed {latency_ms:.4g} ms for {flops:.4g} FLOPs, below the case's floor of {floor_ms:.4g} ms "
                f"({SPEED_OF_LIGHT_MARGIN:g} x the measured matrix-product peak of {peak_tflops:.0f} TFLOP/s): "
                "impossible, rejected",
            )
