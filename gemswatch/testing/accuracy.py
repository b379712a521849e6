"""One tolerance table and one comparison helper for the accuracy tests.

The reference is computed in float64; the result is compared in float64 with
the torch default tolerances of the result dtype, widened for long reductions.

Imports torch; never pytest, the plugins or ``gemswatch.watch``.
"""

from __future__ import annotations

import math

import torch

__all__ = ["TOLERANCES", "tolerance", "assert_close", "to_reference"]

# dtype -> (rtol, atol): torch.testing's defaults for each dtype.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1.3e-6, 1e-5),
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float64: (1e-7, 1e-7),
}


def tolerance(dtype: torch.dtype, reduce_len: int = 1) -> tuple[float, float]:
    """(rtol, atol) for ``dtype``; a sum of ``reduce_len`` terms rounds
    about sqrt(reduce_len) times more, so both grow with it."""
    rtol, atol = TOLERANCES[dtype]
    scale = max(1.0, math.sqrt(reduce_len))
    return rtol * scale, atol * scale


def to_reference(t: torch.Tensor) -> torch.Tensor:
    """A float64 CPU copy of ``t`` for computing the reference."""
    return t.detach().to("cpu", torch.float64)


def assert_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    dtype: torch.dtype | None = None,
    *,
    reduce_len: int = 1,
    equal_nan: bool = False,
) -> None:
    """Assert ``actual`` matches the float64 ``expected`` within the
    tolerance of ``dtype`` (default: ``actual.dtype``).

    Raises AssertionError naming the mismatch count, the worst index and both
    values there.
    """
    dtype = dtype or actual.dtype
    if actual.shape != expected.shape:
        raise AssertionError(f"shape mismatch: got {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    if actual.dtype != dtype:
        raise AssertionError(f"dtype mismatch: got {actual.dtype}, expected {dtype}")
    rtol, atol = tolerance(dtype, reduce_len)
    got, want = to_reference(actual), to_reference(expected)
    close = torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if bool(close.all()):
        return
    bad = (~close).sum().item()
    err = (got - want).abs()
    # The worst element is the one furthest outside its own tolerance (not the
    # largest absolute error, which may be a large value still within rtol).
    excess = err / (atol + rtol * want.abs())
    excess = torch.where(close, torch.zeros_like(excess), torch.where(torch.isnan(excess), torch.full_like(excess, math.inf), excess))
    flat = int(excess.argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), got.shape)) if got.dim() else ()
    g, w = got.reshape(-1)[flat].item(), want.reshape(-1)[flat].item()
    rel = abs(g - w) / abs(w) if w else math.inf
    raise AssertionError(
        f"{bad} of {got.numel()} elements differ (dtype {dtype}, rtol {rtol:.3g}, atol {atol:.3g}); "
        f"worst at index {index}: got {g!r}, expected {w!r} (abs err {abs(g - w):.3g}, rel err {rel:.3g})"
    )
