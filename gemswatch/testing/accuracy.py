"""One tolerance table and one comparison helper for the accuracy tests.

The reference is computed in float64. A result is judged against the
magnitude of the values it affects, in two checks:

1. Per element: ``|got - want| <= rtol * |want| + slack * mag + atol``
   where ``rtol`` is the dtype's rounding slack, ``slack = acc * sqrt(n)``
   the float32 compute slack of an ``n``-term reduction, ``mag`` is
   ``|want|`` (or the larger of it and a test's ``scale=``, the magnitude of
   the terms the result is made of), and ``atol`` is that compute slack times the
   largest ``mag`` compared (times each element's own ``scale`` where a test
   gives one), plus the dtype's floor (its smallest subnormal
   step, or float32's flush-to-zero limit). ``atol`` is never an absolute
   number that could exceed the outputs, so a 0.2 % error on outputs of
   1e-5 still fails in float32.
2. Bias: rounding to float16 or bfloat16 hides a 0.2 % error per element,
   but not on average. The weighted least-squares scale of the error,
   ``s = sum(a * (got - round(want))) / sum(a * want)`` with
   ``a = want / sigma**2`` and ``sigma`` one ulp of the dtype at ``want``
   plus the compute slack the element is allowed (``acc * sqrt(n) * mag``
   and ``atol``), must lie within ``sigmas`` standard deviations of what random one-ulp
   flips would give, plus the compute slack. A correctly rounded result
   has ``s = 0``; a systematic scale error shows once enough elements are
   compared (about 200 for bfloat16, a handful for float16). With
   ``rounded_terms=True`` (terms an honest kernel rounds to the dtype
   first), ``rtol`` applies to ``mag`` and half an ulp of the terms is
   allowed on average too (a rounded term may be shared by a whole row).

Imports torch; never pytest, the plugins or ``gemswatch.watch``.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

import torch

__all__ = ["Rule", "TOLERANCES", "AccuracyError", "tolerance", "describe_rule", "assert_close", "to_reference"]


class AccuracyError(AssertionError):
    """A result judged wrong, with what the message says as data.

    ``fields``: the result's ``dtype`` and ``shape``, and for an element-wise
    failure the ``index`` of the worst element, its ``abs_err`` and
    ``rel_err``, and how many of the ``elements`` were ``mismatched``; for a
    systematic error its ``bias``. The correctness report keeps them per
    failed case, so failures can be grouped without parsing messages.
    """

    def __init__(self, message: str, **fields: object):
        super().__init__(message)
        self.fields = fields


class Rule(NamedTuple):
    """The accuracy rule of one result dtype."""

    rtol: float  # the result's own rounding slack (torch.testing's default rtol)
    acc: float  # compute slack of float32 math, relative, times sqrt(reduction length)
    floor: float  # absolute floor: smallest subnormal step, or float32's flush-to-zero limit
    sigmas: float  # bias bound, in standard deviations of random one-ulp rounding flips
    mantissa: int  # explicit mantissa bits (for the ulp of a value)
    min_exp: int  # exponent of the smallest normal value


_FP32_TINY = torch.finfo(torch.float32).tiny  # a GPU may flush float32 results below this to zero

# dtype -> rule. Every float dtype below float64 is computed in float32 by an
# honest kernel (torch's opmath), hence the same compute slack.
TOLERANCES: dict[torch.dtype, Rule] = {
    torch.float32: Rule(1.3e-6, 1.3e-6, _FP32_TINY, 4.0, 23, -126),
    torch.float16: Rule(1e-3, 1.3e-6, 2.0**-24, 4.0, 10, -14),
    torch.bfloat16: Rule(1.6e-2, 1.3e-6, _FP32_TINY, 4.0, 7, -126),
    # float64 is computed in float64 (1e-7 would pass float32 arithmetic, about 6e-8 off).
    torch.float64: Rule(1e-10, 1e-14, _FP32_TINY, 4.0, 52, -1022),
}


def _rule(dtype: torch.dtype) -> Rule:
    try:
        return TOLERANCES[dtype]
    except KeyError:
        raise TypeError(f"assert_close: no accuracy rule for {dtype} (float dtypes: {', '.join(map(str, TOLERANCES))})") from None


def tolerance(dtype: torch.dtype, reduce_len: int = 1) -> tuple[float, float]:
    """(rtol, atol fraction) for ``dtype`` and an ``reduce_len``-term reduction:
    an element may be off by ``rtol * mag + atol_fraction * max(mag)`` (plus the
    dtype's floor)."""
    rule = _rule(dtype)
    slack = rule.acc * math.sqrt(max(1, reduce_len))
    return rule.rtol + slack, slack


def describe_rule(dtype: torch.dtype, reduce_len: int = 1) -> str:
    """The rule for ``dtype`` in one line, as failure messages show it."""
    rule = _rule(dtype)
    rtol, frac = tolerance(dtype, reduce_len)
    return (
        f"rule for {dtype}, n={reduce_len}: |got - want| <= {rule.rtol:g}*|want| + {frac:.3g}*mag + {frac:.3g}*max(mag) "
        f"(or *scale) + {rule.floor:.3g} (slack {rule.acc:g}*sqrt(n)); bias within {rule.sigmas:g} sigma of one-ulp rounding "
        f"+ {frac:.3g}"
    )


def to_reference(t: torch.Tensor) -> torch.Tensor:
    """A float64 CPU copy of ``t`` for computing the reference."""
    return t.detach().to("cpu", torch.float64)


def _ulp(values: torch.Tensor, rule: Rule) -> torch.Tensor:
    """One unit in the last place of the dtype at each float64 value."""
    _, exponent = torch.frexp(values)
    exponent = torch.clamp(exponent.to(torch.float64) - 1, min=rule.min_exp)
    return torch.pow(2.0, exponent - rule.mantissa)


def _truncated(values: torch.Tensor) -> torch.Tensor:
    """``values`` rounded toward zero to bfloat16 (through float32)."""
    bits = values.to(torch.float32).view(torch.int32) & -65536  # keep sign, exponent, 7 mantissa bits
    return bits.view(torch.float32).to(torch.float64)


def _correctly_rounded(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, str]:
    """``want`` rounded to ``dtype`` as an exact kernel would round it.

    Triton's CPU interpreter casts float32 to bfloat16 by truncation (a GPU
    rounds to nearest), which biases every result by about -0.3 %; under the
    interpreter a bfloat16 result may follow either mode, whichever it
    agrees with on more elements. A scale error in a truncating kernel
    still fails; one of -0.2 % in a kernel that rounds to nearest looks
    like truncation and shows only in float32 and float16 there (or on a
    GPU).
    """
    nearest = want.to(dtype).to(torch.float64)
    if dtype != torch.bfloat16 or os.environ.get("TRITON_INTERPRET") != "1":
        return nearest, "to nearest"
    toward_zero = _truncated(want)
    if int((got == toward_zero).sum()) > int((got == nearest).sum()):
        return toward_zero, "toward zero"
    return nearest, "to nearest"


def _index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape)) if len(shape) else ()


def assert_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    dtype: torch.dtype | None = None,
    *,
    reduce_len: int = 1,
    equal_nan: bool = False,
    scale: torch.Tensor | float | None = None,
    rounded_terms: bool = False,
) -> None:
    """Assert ``actual`` matches the float64 ``expected`` under the rule of
    ``dtype`` (default: ``actual.dtype``).

    Args:
        reduce_len: terms summed into each element (widens the compute slack).
        equal_nan: NaN in both places counts as equal.
        scale: the magnitude each element's error is judged against, when
            ``|expected|`` understates it (e.g. the per-row sum of ``|x|`` for
            a sum that cancels); broadcast to the result.
        rounded_terms: an honest kernel may round those terms to the result
            dtype before combining them (torch's half log_softmax rounds its
            log-sum-exp): the rounding slack, per element and on average, is
            then relative to ``scale`` too.

    Non-float results must be equal. Infinities must match exactly.

    Raises:
        AssertionError: naming the mismatch count, the worst index, both
            values and the rule; or the systematic error and its bound.
    """
    dtype = dtype or actual.dtype
    if actual.shape != expected.shape:
        raise AssertionError(f"shape mismatch: got {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    if actual.dtype != dtype:
        raise AssertionError(f"dtype mismatch: got {actual.dtype}, expected {dtype}")
    if dtype.is_complex:
        real = torch.float64 if dtype == torch.complex128 else torch.float32
        sc = None if scale is None else torch.as_tensor(scale).unsqueeze(-1)
        return assert_close(
            torch.view_as_real(actual.detach().cpu().resolve_conj()).to(real), torch.view_as_real(expected.detach().cpu().to(torch.complex128)),
            real, reduce_len=reduce_len, equal_nan=equal_nan, scale=sc,
        )
    # Judged in float64 where the reference lives: a GPU judges a GPU-sized
    # result in milliseconds where the CPU takes seconds.
    want = expected.detach().to(torch.float64)
    got = actual.detach().to(want.device, torch.float64)
    if not dtype.is_floating_point:
        _assert_equal(got, want, dtype)
        return
    rule = _rule(dtype)
    if got.numel() == 0:
        return
    _, frac = tolerance(dtype, reduce_len)
    mag = want.abs()
    if scale is not None:
        mag = torch.maximum(mag, torch.as_tensor(scale).detach().to(want.device, torch.float64).abs().expand_as(want))
    finite = want.isfinite()
    mag = torch.where(finite & mag.isfinite(), mag, torch.zeros_like(mag))
    # Without a scale, an element's error may derive from the largest value
    # compared (cancellation); a given scale says per element.
    atol = frac * (float(mag.max()) if scale is None else mag) + rule.floor
    # The result's own rounding is relative to itself (to its terms when they
    # may be rounded first); the compute slack to the terms' magnitude.
    rounding = mag if rounded_terms else want.abs().nan_to_num(0.0, 0.0, 0.0)
    allowed = rule.rtol * rounding + frac * mag + atol
    err = (got - want).abs()
    close = err <= allowed
    # Non-finite references must be matched exactly (inf by inf of its sign).
    same = (got == want) | (equal_nan & got.isnan() & want.isnan())
    close = torch.where(finite, close & got.isfinite(), same)
    if not bool(close.all()):
        _raise_elementwise(got, want, close, allowed, dtype, reduce_len)
    atol = atol[finite] if isinstance(atol, torch.Tensor) else atol
    _check_bias(got[finite], want[finite], mag[finite], atol, rule, frac, dtype, reduce_len, rounded_terms, got.shape)


def _assert_equal(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    equal = (got == want) | (got.isnan() & want.isnan())
    if bool(equal.all()):
        return
    flat = int((~equal).reshape(-1).nonzero()[0])
    index, mismatched = _index(flat, got.shape), int((~equal).sum())
    raise AccuracyError(
        f"{mismatched} of {got.numel()} elements differ (dtype {dtype}: must be equal); "
        f"first at index {index}: got {got.reshape(-1)[flat].item()!r}, "
        f"expected {want.reshape(-1)[flat].item()!r}",
        **_where(dtype, got.shape), index=list(index), mismatched=mismatched, elements=got.numel(),
    )


def _where(dtype: torch.dtype, shape: torch.Size) -> dict[str, object]:
    return {"dtype": str(dtype).removeprefix("torch."), "shape": list(shape)}


def _raise_elementwise(got, want, close, allowed, dtype, reduce_len) -> None:
    err = (got - want).abs()
    # The worst element is the one furthest outside its own tolerance (not the
    # largest absolute error, which may be a large value still within rtol).
    excess = err / allowed
    excess = torch.where(close, torch.zeros_like(excess), torch.where(excess.isnan(), torch.full_like(excess, math.inf), excess))
    flat = int(excess.reshape(-1).argmax())
    g, w = got.reshape(-1)[flat].item(), want.reshape(-1)[flat].item()
    rel = abs(g - w) / abs(w) if w else math.inf
    index, mismatched = _index(flat, got.shape), int((~close).sum())
    raise AccuracyError(
        f"{mismatched} of {got.numel()} elements differ; worst at index {index}: "
        f"got {g!r}, expected {w!r} (abs err {abs(g - w):.3g}, rel err {rel:.3g}, allowed {allowed.reshape(-1)[flat].item():.3g}); "
        f"{describe_rule(dtype, reduce_len)}",
        **_where(dtype, got.shape), index=list(index), abs_err=_finite(abs(g - w)), rel_err=_finite(rel),
        mismatched=mismatched, elements=got.numel(),
    )


def _finite(x: float) -> float | None:
    """``x``, or None where JSON has no number for it (inf, NaN)."""
    return x if math.isfinite(x) else None


def _check_bias(got, want, mag, atol, rule: Rule, frac: float, dtype, reduce_len, rounded_terms: bool,
                shape: torch.Size) -> None:
    """Fail on a systematic scale error that per-element checks let through."""
    if want.numel() == 0:
        return
    rounded, mode = _correctly_rounded(got, want, dtype)
    # An element's noise: one ulp of rounding plus the compute slack the
    # per-element check grants it (so that outputs that are small because
    # they cancel, whose error atol allows, do not outweigh the rest).
    sigma = _ulp(rounded, rule) + frac * mag + atol
    a = want / sigma.square()
    weight = float((a * want).sum())  # sum(want^2 / sigma^2): the inverse variance of s
    if weight <= 0 or not math.isfinite(weight):
        return
    s = float((a * (got - rounded)).sum()) / weight
    noise = rule.sigmas / math.sqrt(weight)
    # Compute slack and, where terms may be rounded first, their rounding:
    # one term, e.g. a row's log-sum-exp, may be shared by many elements, so
    # its rounding error need not average out.
    terms = 2.0 ** -(rule.mantissa + 1) if rounded_terms else 0.0
    slack = float((a.abs() * (frac + terms) * mag).sum()) / weight
    if abs(s) <= noise + slack:
        return
    raise AccuracyError(
        f"systematic error: the result is off by {s:+.3g} of the reference on average (weighted least-squares scale "
        f"over {want.numel()} elements, against the reference rounded {mode}); allowed {noise + slack:.3g} ({noise:.3g} of rounding noise + {slack:.3g} of "
        f"compute slack); every element is within its own tolerance; {describe_rule(dtype, reduce_len)}",
        **_where(dtype, shape), bias=s, elements=want.numel(),
    )
