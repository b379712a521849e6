"""A benchmark case's result judged by the accuracy rule of the correctness stage.

The correctness suites draw their own shapes; the benchmark's are the ones
the speedup is claimed on, so a candidate right on the first and a little
wrong on the second (a cheaper path taken only for large inputs: 16-bit
accumulation, an approximation, a dropped tail) would be judged there by
nothing stricter than the timed-output distance. So where a benchmark
declares how its results are judged (:attr:`.base.Benchmark.accuracy`), the
candidate's result on each case (preflight's call) and on each timed
repetition the judge checks is judged against a float64 reference with
:func:`gemswatch.testing.accuracy.assert_close`, the correctness stage's
rule. A result outside the rule is still accepted where torch eager, on
the same inputs, is off by at least half as much (by its worst element and
over the whole result): a candidate as accurate as torch is never failed
for the rule's sake.

Imports torch and the accuracy rule; never pytest, the plugin or ``gemswatch.watch``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..accuracy import AccuracyError, assert_close
from .timing import clone_inputs

__all__ = ["Accuracy", "Judged", "baseline_on_copy", "check_case_accuracy", "float64_inputs", "product"]

EAGER_FACTOR = 2.0  # accepted outside the rule when no worse than this times eager's error


@dataclass(frozen=True)
class Judged:
    """How a case's result is judged: :func:`assert_close`'s ``reduce_len``
    (terms combined into each element), ``scale`` (their magnitude, where
    ``|result|`` understates it) and ``rounded_terms``."""

    reduce_len: int = 1
    scale: torch.Tensor | None = None
    rounded_terms: bool = False


# (the case's inputs in float64) -> how its result is judged.
Accuracy = Callable[[tuple, dict], Judged]


def product(a: torch.Tensor, b: torch.Tensor, alpha: float = 1.0) -> Judged:
    """How ``alpha * a @ b`` is judged (float64 ``a``, ``b``): K terms per
    element, against their root-sum-square magnitude (a product may cancel)."""
    return Judged(reduce_len=a.shape[1], scale=abs(alpha) * (a.square() @ b.square()).sqrt())


def float64_inputs(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A copy of the inputs with every floating-point tensor in float64 (same device)."""
    def up(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value.detach().to(torch.float64) if value.is_floating_point() else value.clone()
        if isinstance(value, (tuple, list)):
            return type(value)(up(v) for v in value)
        if isinstance(value, dict):
            return {k: up(v) for k, v in value.items()}
        return value

    return up(args), up(kwargs)


def check_case_accuracy(op: str, accuracy: Accuracy, baseline: Callable[..., Any], got: Any,
                        args: tuple, kwargs: dict, eager: Any = None) -> None:
    """AccuracyError unless ``got`` (the candidate's result for ``args``/
    ``kwargs``, left as they are) passes the accuracy rule against the
    float64 reference, or is no worse than torch eager's on the same inputs
    (``eager``, when the caller has it already; else computed on a copy)."""
    ref_args, ref_kwargs = float64_inputs(args, kwargs)
    judged = accuracy(ref_args, ref_kwargs)
    want = baseline(*ref_args, **ref_kwargs)
    if eager is None:
        eager = baseline_on_copy(baseline, args, kwargs)
    if not isinstance(got, torch.Tensor) or not isinstance(eager, torch.Tensor):
        return  # several results: the timed-output distance judges them
    if got.dtype != eager.dtype or got.shape != eager.shape:
        raise AccuracyError(f"{op} returned {got.dtype} {tuple(got.shape)}, torch returns {eager.dtype} {tuple(eager.shape)}")
    # On the inputs' device: float64 on a GPU judges a GPU-sized case in
    # milliseconds, where the CPU took seconds per case.
    want, got, eager = want.detach(), got.detach().to(want.device), eager.detach().to(want.device)
    scale = None if judged.scale is None else judged.scale.detach().to(want.device)
    try:
        assert_close(got, want, eager.dtype, reduce_len=judged.reduce_len, equal_nan=True, scale=scale,
                     rounded_terms=judged.rounded_terms)
    except AccuracyError as e:
        if not _no_worse_than_eager(got, eager, want):
            raise AccuracyError(f"{e} (torch eager on the same inputs: {_errors(eager, want)})", **e.fields) from None


def baseline_on_copy(baseline: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """The baseline's result for ``args``/``kwargs``, left as they are (an in-place one writes a copy)."""
    copy_args, copy_kwargs = clone_inputs(args, kwargs)
    return baseline(*copy_args, **copy_kwargs)


def _errors(result: torch.Tensor, want: torch.Tensor) -> str:
    worst, l2 = _worst_and_l2(result, want)
    return f"worst abs err {worst:.3g}, relative L2 {l2:.3g}"


def _worst_and_l2(result: torch.Tensor, want: torch.Tensor) -> tuple[float, float]:
    r, w = result.to(torch.float64), want.to(torch.float64)
    finite = w.isfinite()
    if not torch.equal(r.isfinite(), finite):
        return float("inf"), float("inf")
    d = (r - w)[finite]
    if d.numel() == 0:
        return 0.0, 0.0
    norm = float(w[finite].norm())
    return float(d.abs().max()), float(d.norm()) / norm if norm else float(d.norm())


def _no_worse_than_eager(got: torch.Tensor, eager: torch.Tensor, want: torch.Tensor) -> bool:
    g, e = _worst_and_l2(got, want), _worst_and_l2(eager, want)
    # Where eager itself is not finite (an overflow the reference has not), it vouches for nothing.
    return all(math.isfinite(ev) and gv <= EAGER_FACTOR * ev for gv, ev in zip(g, e))
