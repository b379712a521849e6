"""Reductions: ``sum``, ``mean`` and ``amax`` over any set of dims.

The input is viewed in its memory order (a transpose costs no copy) and each
run of adjacent reduced dims becomes one (outer, reduce, inner) problem: a
row kernel when the reduced dims are innermost, a column kernel otherwise.
Sums accumulate in fp32 (fp64 for float64, int64 for integers). A short grid
over a long reduced axis is split into partial results and reduced again.
A complex sum or mean is that of its real and imaginary parts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from . import _launch

__all__ = ["sum", "mean", "amax"]


@triton.jit
def _max_propagate_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _accumulate(acc, x, IS_MAX: tl.constexpr):
    """acc + x, or the NaN-propagating max for IS_MAX."""
    if IS_MAX:
        acc = _max_propagate_nan(acc, x)
    else:
        acc += x
    return acc


@triton.jit
def _finish(
    acc, scale, scale_fp64, AXIS: tl.constexpr, IS_MAX: tl.constexpr, APPLY_SCALE: tl.constexpr, ACC: tl.constexpr
):
    """Reduce the accumulator tile along AXIS (sum, or max for IS_MAX), times
    scale when APPLY_SCALE (an fp64 accumulator takes the fp64-typed copy:
    a Python float reaches a kernel as an fp32 argument)."""
    if IS_MAX:
        result = tl.reduce(acc, AXIS, _max_propagate_nan)
    else:
        result = tl.sum(acc, AXIS)
    if APPLY_SCALE:
        if ACC == tl.float64:
            result = result * scale_fp64
        else:
            result = result * scale
    return result


@triton.jit
def _reduce_rows_kernel(
    x_ptr, out_ptr, scale, scale_fp64: tl.float64, n_rows, n_cols, cols_per_split,
    IS_MAX: tl.constexpr, APPLY_SCALE: tl.constexpr, IDENTITY: tl.constexpr, ACC: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """out[r, s] = scale * sum(x[r, c] for c in split s), or max(...) for IS_MAX;
    x is (n_rows, n_cols) row-major, out is (n_rows, n_splits)."""
    pid_m = tl.program_id(0)
    split = tl.program_id(1)
    n_splits = tl.num_programs(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    x_rows = x_ptr + rows.to(tl.int64)[:, None] * n_cols
    col_start = split * cols_per_split
    col_end = tl.minimum(col_start + cols_per_split, n_cols)
    acc = tl.full((BLOCK_M, BLOCK_N), IDENTITY, ACC)
    for start in range(col_start, col_end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols < col_end)[None, :]
        x = tl.load(x_rows + cols[None, :], mask=mask, other=IDENTITY).to(ACC)
        acc = _accumulate(acc, x, IS_MAX)
    result = _finish(acc, scale, scale_fp64, 1, IS_MAX, APPLY_SCALE, ACC)
    tl.store(out_ptr + rows * n_splits + split, result, mask=row_mask)


@triton.jit
def _reduce_columns_kernel(
    x_ptr, out_ptr, scale, scale_fp64: tl.float64, n_reduce, n_inner, rows_per_split,
    IS_MAX: tl.constexpr, APPLY_SCALE: tl.constexpr, IDENTITY: tl.constexpr, ACC: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr,
):  # fmt: skip
    """out[a, s, k] = scale * sum(x[a, n, k] for n in split s), or max(...) for IS_MAX;
    x is (n_outer, n_reduce, n_inner) row-major, out is (n_outer, n_splits, n_inner)."""
    pid = tl.program_id(0)
    split = tl.program_id(1)
    n_splits = tl.num_programs(1)
    k_blocks = tl.cdiv(n_inner, BLOCK_K)
    outer = pid // k_blocks
    inner = (pid % k_blocks) * BLOCK_K + tl.arange(0, BLOCK_K)
    inner_mask = inner < n_inner
    x_slab = x_ptr + outer.to(tl.int64) * n_reduce * n_inner
    n_start = split * rows_per_split
    n_end = tl.minimum(n_start + rows_per_split, n_reduce)
    acc = tl.full((BLOCK_N, BLOCK_K), IDENTITY, ACC)
    for start in tl.range(n_start, n_end, BLOCK_N, num_stages=STAGES):
        n = start + tl.arange(0, BLOCK_N)
        mask = (n < n_end)[:, None] & inner_mask[None, :]
        x = tl.load(x_slab + n.to(tl.int64)[:, None] * n_inner + inner[None, :], mask=mask, other=IDENTITY).to(ACC)
        acc = _accumulate(acc, x, IS_MAX)
    result = _finish(acc, scale, scale_fp64, 0, IS_MAX, APPLY_SCALE, ACC)
    tl.store(out_ptr + (outer * n_splits + split) * n_inner + inner, result, mask=inner_mask)


_INTEGERS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_COMPLEX = (torch.complex64, torch.complex128)
_SUPPORTED = {
    "sum": "float16, bfloat16, float32, float64, complex64, complex128, integers and bool",
    "mean": "float16, bfloat16, float32, float64, complex64, complex128 (and integer or bool input with a float dtype)",
    "amax": "float16, bfloat16, float32, float64, integers and bool",
}


def _check_dtype(dtype: torch.dtype, name: str, complex_ok: bool) -> None:
    if dtype in _INTEGERS or dtype in _FLOATS or (complex_ok and dtype in _COMPLEX):
        return
    raise TypeError(f"gems.{name}: dtype {dtype} is not supported (supported: {_SUPPORTED[name]})")


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulator: fp32 for half and single floats, fp64 for double, int64
    for integers and bool (max is exact in any of them)."""
    if dtype == torch.float64:
        return torch.float64
    if dtype.is_floating_point:
        return torch.float32
    return torch.int64


def _identity(dtype: torch.dtype, is_max: bool):
    if not is_max:
        return 0
    if dtype.is_floating_point:
        return float("-inf")
    return 0 if dtype == torch.bool else torch.iinfo(dtype).min


@dataclass(frozen=True)
class _Pass:
    """One launch of a reduction: the previous result (the input, first)
    seen as (outer, reduce, inner) is reduced into a new ``dst``."""

    kernel: Any
    grid: tuple[int, int]
    dst_shape: tuple[int, int, int]
    dst_dtype: torch.dtype
    sizes: tuple[int, int, int]  # the kernel's three size arguments
    scale: float
    meta: dict


def _passes(
    n_outer: int, n_reduce: int, n_inner: int, is_max: bool, x_dtype: torch.dtype,
    out_dtype: torch.dtype, acc_dtype: torch.dtype, scale: float,
) -> tuple[_Pass, ...]:  # fmt: skip
    """The launches that reduce the middle axis of a contiguous (outer,
    reduce, inner) tensor of ``x_dtype`` into (outer, inner) of ``out_dtype``:
    one, or two when the reduced axis is split into partial results."""
    launch = _launch.reduce_launch(n_outer, n_reduce, n_inner)
    split = launch.n_splits > 1
    meta = {
        "IS_MAX": is_max,
        # Partial results stay in the accumulator dtype; the scale waits for the final pass.
        "APPLY_SCALE": scale != 1 and not split,
        "IDENTITY": _identity(x_dtype, is_max),
        "ACC": _launch.tl_dtype(acc_dtype),
        "num_warps": launch.num_warps,
    }
    dst_shape = (n_outer, launch.n_splits, n_inner)
    dst_dtype = acc_dtype if split else out_dtype
    if n_inner == 1:
        grid = (_launch.cdiv(n_outer, launch.block_outer), launch.n_splits)
        meta.update(BLOCK_M=launch.block_outer, BLOCK_N=launch.block_reduce)
        sizes = (n_outer, n_reduce, launch.per_split)
        first = _Pass(_reduce_rows_kernel, grid, dst_shape, dst_dtype, sizes, scale, meta)
    else:
        grid = (n_outer * _launch.cdiv(n_inner, launch.block_inner), launch.n_splits)
        meta.update(BLOCK_N=launch.block_reduce, BLOCK_K=launch.block_inner, STAGES=launch.stages)
        sizes = (n_reduce, n_inner, launch.per_split)
        first = _Pass(_reduce_columns_kernel, grid, dst_shape, dst_dtype, sizes, scale, meta)
    if not split:
        return (first,)
    return (first, *_passes(n_outer, launch.n_splits, n_inner, is_max, acc_dtype, out_dtype, acc_dtype, scale))


def _run(x: torch.Tensor, passes: tuple[_Pass, ...]) -> torch.Tensor:
    """Launch ``passes`` on ``x``; the last pass's (outer, splits=1, inner) result."""
    for p in passes:
        dst = torch.empty(p.dst_shape, dtype=p.dst_dtype, device=x.device)
        p.kernel[p.grid](x, dst, p.scale, p.scale, *p.sizes, **p.meta)
        x = dst
    return x


def _reduce_3d(
    x: torch.Tensor, n_outer: int, n_reduce: int, n_inner: int, is_max: bool,
    out_dtype: torch.dtype, acc_dtype: torch.dtype, scale: float,
) -> torch.Tensor:  # fmt: skip
    """Reduce the middle axis of contiguous ``x`` seen as (outer, reduce,
    inner); returns a contiguous (outer, inner) tensor of ``out_dtype``."""
    passes = _passes(n_outer, n_reduce, n_inner, is_max, x.dtype, out_dtype, acc_dtype, scale)
    return _run(x, passes).view(n_outer, n_inner)


@functools.lru_cache(maxsize=1024)
def _contiguous_plan(
    shape: tuple[int, ...], dim: int | tuple[int, ...] | None, keepdim: bool, is_max: bool,
    in_dtype: torch.dtype, out_dtype: torch.dtype, mean: bool, name: str, limits: tuple,
) -> tuple[tuple[int, ...], tuple[_Pass, ...]] | None:  # fmt: skip
    """(output shape, passes) of a reduction of a contiguous tensor over one
    run of adjacent dims, or None where the general path must decide (an
    empty result or reduced extent, reduced dims apart). ``limits``: the
    launch limits it was planned under (tests change them)."""
    ndim = len(shape)
    dims = _normalize_dims(dim, ndim, name)
    if dims and dims[-1] - dims[0] != len(dims) - 1:
        return None
    out_shape = _out_shape(shape, dims, keepdim)
    n_reduced = math.prod(shape[d] for d in dims)
    if math.prod(out_shape) == 0 or n_reduced == 0:
        return None
    start, end = (dims[0], dims[-1] + 1) if dims else (ndim, ndim)
    acc_dtype = _acc_dtype(in_dtype if is_max else out_dtype)
    scale = 1.0 / n_reduced if mean else 1.0
    passes = _passes(
        math.prod(shape[:start]), n_reduced, math.prod(shape[end:]), is_max, in_dtype, out_dtype, acc_dtype, scale
    )
    return tuple(out_shape), passes


def _out_shape(shape, dims: list[int], keepdim: bool) -> list[int]:
    if keepdim:
        return [1 if d in dims else s for d, s in enumerate(shape)]
    return [s for d, s in enumerate(shape) if d not in dims]


def _normalize_dims(dim, ndim: int, name: str) -> list[int]:
    """Sorted non-negative dims; None or an empty sequence means all dims."""
    if dim is None:
        return list(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return list(range(ndim))
    rank = max(ndim, 1)
    result = []
    for d in dims:
        if not -rank <= d < rank:
            raise IndexError(f"gems.{name}: dim {d} is out of range for a tensor of {ndim} dims")
        d %= rank
        if d in result:
            raise RuntimeError(f"gems.{name}: dim {d} appears multiple times in the list of dims")
        result.append(d)
    return sorted(d for d in result if d < ndim)


def _reduce(
    input: torch.Tensor, dim, keepdim: bool, is_max: bool, out_dtype: torch.dtype, name: str, mean: bool = False
) -> torch.Tensor:
    if input.is_contiguous():
        # Fast path, planned once per problem: one run of adjacent reduced
        # dims of a contiguous tensor.
        dim_key = tuple(dim) if isinstance(dim, (list, tuple)) else dim
        plan = _contiguous_plan(
            input.shape, dim_key, keepdim, is_max, input.dtype, out_dtype, mean, name, _launch.reduce_limits()
        )
        if plan is not None:
            out_shape, passes = plan
            return _run(input, passes).view(out_shape)
    ndim = input.dim()
    dims = _normalize_dims(dim, ndim, name)
    out_shape = _out_shape(input.shape, dims, keepdim)
    n_reduced = math.prod(input.shape[d] for d in dims)
    acc_dtype = _acc_dtype(input.dtype if is_max else out_dtype)
    if math.prod(out_shape) == 0:
        return torch.empty(out_shape, dtype=out_dtype, device=input.device)
    if n_reduced == 0:
        if is_max and (dim is None or (not isinstance(dim, int) and len(dim) == 0)):
            # torch's wording and type when no dim was named
            raise RuntimeError(
                f"gems.{name}: Expected reduction dim to be specified for input.numel() == 0 "
                f"(shape {tuple(input.shape)})"
            )
        if is_max:
            raise IndexError(f"gems.{name}: cannot reduce over a dim of size 0 (shape {tuple(input.shape)})")
        return torch.full(out_shape, math.nan if mean else 0, dtype=out_dtype, device=input.device)

    scale = 1.0 / n_reduced if mean else 1.0

    # View the input in memory order: a transposed tensor is a permuted
    # contiguous one. Anything with gaps (slices) is copied once.
    x = input
    order = list(range(ndim))
    if not x.is_contiguous():
        perm = _launch.dense_permutation(x)
        if perm is None:
            x = x.contiguous()
        else:
            order = perm
            x = x.permute(order)
    # Size-1 dims change nothing: drop them so reduced dims group into runs.
    kept: list[int] = []  # the caller's dim of each kept dim, in memory order
    runs: list[list[int]] = []  # [start, end) positions in the squeezed shape
    shape: list[int] = []
    previous_reduced = False
    for i in range(ndim):
        if x.shape[i] == 1:
            continue
        reduced = order[i] in dims
        if reduced and previous_reduced:
            runs[-1][1] += 1
        elif reduced:
            runs.append([len(shape), len(shape) + 1])
        else:
            kept.append(order[i])
        shape.append(x.shape[i])
        previous_reduced = reduced
    if not runs:  # only size-1 dims reduced: one pass with a reduce length of 1
        runs = [[len(shape), len(shape)]]

    result = x
    for index, (start, end) in enumerate(reversed(runs)):
        last = index == len(runs) - 1
        result = _reduce_3d(
            result,
            math.prod(shape[:start]),
            math.prod(shape[start:end]),
            math.prod(shape[end:]),
            is_max,
            out_dtype if last else acc_dtype,
            acc_dtype,
            scale if last else 1.0,
        )
        shape = shape[:start] + shape[end:]

    # ``result`` holds the kept dims (now ``shape``) in memory order; put
    # them back in the caller's order.
    result = result.view(shape)
    back = sorted(range(len(kept)), key=kept.__getitem__)
    if back != list(range(len(kept))):
        result = result.permute(back).contiguous()
    return result.reshape(out_shape)


def _check_float(dtype: torch.dtype, name: str) -> None:
    if not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(
            f"gems.{name}: could not infer output dtype; input dtype must be floating point, got {dtype}"
        )


def _cast_for(input: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """torch casts the input to ``dtype`` before reducing; an exact cast
    happens in the kernel's load, one that rounds (or truncates) up front."""
    if dtype is None or _launch.exact_cast(input.dtype, dtype):
        return input
    return input.to(dtype)  # of a complex input, torch keeps the real part


def _reduce_complex(
    input: torch.Tensor, dim, keepdim: bool, out_dtype: torch.dtype, name: str, mean: bool
) -> torch.Tensor:
    """A complex sum (or mean) as the sums of the real and imaginary parts:
    the same reduction of ``view_as_real(input)``, which adds a last dim of 2."""
    if input.dtype != out_dtype:
        input = input.to(out_dtype)  # torch casts first (complex128 -> complex64 rounds)
    dims = _normalize_dims(dim, input.dim(), name)
    if not dims:  # a 0-dim input: nothing to reduce
        return input.clone()
    parts = torch.view_as_real(input.resolve_conj())
    result = _reduce(parts, dims, keepdim, False, parts.dtype, name, mean=mean)
    return torch.view_as_complex(result)


def sum(
    input: torch.Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Sum over ``dim`` (an int, a sequence of ints, or None/() for all).

    Args:
        input: the tensor to reduce.
        dim: dims to reduce; negative dims count from the end.
        keepdim: keep the reduced dims with size 1.
        dtype: the result dtype (default: the input's, int64 for integers);
            the input is cast to it first, as in torch.
    Returns:
        The sum, accumulated in fp32 (fp64 for float64, int64 for integers;
        a complex sum is the sums of its real and imaginary parts).
    Raises:
        IndexError: a dim is out of range. RuntimeError: a dim repeats.
        TypeError: a dtype the kernels do not support (float8, complex32...).
    """
    _check_dtype(input.dtype, "sum", complex_ok=True)
    if dtype is None:
        dtype = input.dtype if input.dtype.is_floating_point or input.is_complex() else torch.int64
    _check_dtype(dtype, "sum", complex_ok=True)
    if dtype.is_complex:
        return _reduce_complex(input, dim, keepdim, dtype, "sum", mean=False)
    return _reduce(_cast_for(input, dtype), dim, keepdim, False, dtype, "sum")


def mean(
    input: torch.Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Arithmetic mean over ``dim`` (an int, a sequence of ints, or None/() for all).

    Args:
        input: a floating point tensor (or any tensor with a float ``dtype``).
        dim: dims to reduce; negative dims count from the end.
        keepdim: keep the reduced dims with size 1.
        dtype: the result dtype (default: the input's); the input is cast to
            it first, as in torch.
    Returns:
        The mean, accumulated in fp32 (fp64 for float64; complex: per part).
    Raises:
        RuntimeError: the result dtype is not floating point or complex, or a
            dim repeats.
        IndexError: a dim is out of range.
        TypeError: a dtype the kernels do not support (float8, complex32...).
    """
    _check_dtype(input.dtype, "mean", complex_ok=True)
    dtype = dtype or input.dtype
    _check_float(dtype, "mean")
    _check_dtype(dtype, "mean", complex_ok=True)
    if dtype.is_complex:
        return _reduce_complex(input, dim, keepdim, dtype, "mean", mean=True)
    return _reduce(_cast_for(input, dtype), dim, keepdim, False, dtype, "mean", mean=True)


def amax(input: torch.Tensor, dim: int | Sequence[int] = (), keepdim: bool = False) -> torch.Tensor:
    """Maximum over ``dim`` (an int, a sequence of ints, or ()/None for all);
    NaN propagates as in torch.

    Args:
        input: the tensor to reduce.
        dim: dims to reduce; negative dims count from the end.
        keepdim: keep the reduced dims with size 1.
    Returns:
        The maxima, in the input dtype.
    Raises:
        IndexError: a dim is out of range or a reduced dim has size 0.
        RuntimeError: an empty input and no dim (torch's error).
        TypeError: a complex or other unsupported dtype.
    """
    _check_dtype(input.dtype, "amax", complex_ok=False)
    return _reduce(input, dim, keepdim, True, input.dtype, "amax")
