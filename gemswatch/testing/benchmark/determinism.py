"""Whether repeated calls of a candidate on the same inputs agree.

The judge calls the candidate :data:`RUNS` times, each on a fresh copy of
the case's inputs as built, and compares the results it received itself
(the worker only hands back bytes), so the verdict is the judge's:

- ``PASS``: every result is bitwise equal to the first;
- ``NON_DETERMINISTIC``: some differ, but within the accuracy rule of
  :mod:`gemswatch.testing.accuracy` (atomics, split reductions);
- ``FAIL``: some differ beyond it, or in structure, shape or dtype.

Imports torch and the accuracy rule; never pytest, the runner or
``gemswatch.watch``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from ..accuracy import TOLERANCES, assert_close

__all__ = ["RUNS", "PASS", "NON_DETERMINISTIC", "FAIL", "Verdict", "compare_runs", "repeated_calls"]

RUNS = 3
PASS, NON_DETERMINISTIC, FAIL = "PASS", "NON_DETERMINISTIC", "FAIL"
Verdict = tuple[str, "str | None"]  # (verdict, one line saying what differed; None on PASS)


def _leaves(value: Any) -> list[Any] | None:
    """The tensors and plain values of a result, in order (None: unsupported structure)."""
    if isinstance(value, (tuple, list)):
        out: list[Any] = []
        for v in value:
            leaves = _leaves(v)
            if leaves is None:
                return None
            out += leaves
        return out
    if isinstance(value, torch.Tensor) or value is None or isinstance(value, (bool, int, float)):
        return [value]
    return None


def _bits(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().reshape(-1).contiguous()
    return flat.view(torch.uint8) if flat.dtype != torch.bool else flat


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(_bits(a).cpu(), _bits(b).cpu())


def _within_rule(got: torch.Tensor, first: torch.Tensor) -> str | None:
    """None when ``got`` matches ``first`` under the accuracy rule, else why not."""
    if got.shape != first.shape or got.dtype != first.dtype:
        return f"shape/dtype {tuple(got.shape)} {got.dtype} against {tuple(first.shape)} {first.dtype}"
    if got.dtype not in TOLERANCES and not got.dtype.is_complex:
        return "differs, and integer and boolean results must be equal"
    # Each element may be a reduction over everything the call saw: the
    # widest compute slack the rule gives, so a reordered honest sum passes.
    try:
        assert_close(got, first, reduce_len=max(1, first.numel()), equal_nan=True)
    except AssertionError as e:
        return str(e).splitlines()[0][:300]
    return None


def compare_runs(results: Sequence[Any]) -> Verdict:
    """The verdict of ``results`` (the same call repeated), against the first."""
    first = _leaves(results[0])
    if first is None:
        return FAIL, f"the result is of an unsupported structure ({type(results[0]).__name__})"
    verdict, detail = PASS, None
    for run, result in enumerate(results[1:], 2):
        leaves = _leaves(result)
        if leaves is None or len(leaves) != len(first):
            return FAIL, f"call {run} returned a result of another structure than call 1"
        for i, (a, b) in enumerate(zip(first, leaves)):
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                if _same_bits(a, b):
                    continue
                why = _within_rule(b, a)
                if why is not None:
                    return FAIL, f"call {run}, output {i}: {why}"
                verdict = NON_DETERMINISTIC
                detail = detail or f"call {run}, output {i} differs from call 1 within the accuracy rule"
            elif type(a) is not type(b) or a != b:
                return FAIL, f"call {run}, output {i}: {b!r} against {a!r}"
    return verdict, detail


def repeated_calls(call: Callable[..., Any], fresh_inputs: Callable[[], tuple[tuple, dict]],
                   sync: Callable[[], None], runs: int = RUNS) -> list[Any]:
    """``runs`` results of ``call``, each on inputs from ``fresh_inputs()``."""
    results = []
    for _ in range(runs):
        args, kwargs = fresh_inputs()
        results.append(call(*args, **kwargs))
        sync()
    return results
