"""``rms_norm``, ``layer_norm`` and ``native_layer_norm`` (forward only).

The input is viewed as (n_rows, n_cols) rows, n_cols being the product of
``normalized_shape``. Rows up to ``_launch.MAX_FUSED_SIZE`` wide are
normalised in one pass from registers, several short rows per program; wider
rows take a statistics pass and a write pass. Statistics in fp32, or in fp64
for float64 inputs (``COMPUTE``). A Python float reaches a kernel as an fp32
argument, so the kernels also take ``eps`` as an fp64-typed copy, which only
the float64 branch reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from . import _launch

__all__ = ["rms_norm", "layer_norm", "native_layer_norm"]


@triton.jit
def _rstd(mean_square, eps, eps_fp64, COMPUTE: tl.constexpr):
    """1 / sqrt(mean_square + eps), in COMPUTE (fp64: a correctly rounded
    square root and division, not the approximate rsqrt)."""
    if COMPUTE == tl.float64:
        rstd = 1.0 / tl.sqrt(mean_square + eps_fp64)
    else:
        rstd = tl.rsqrt(mean_square + eps)
    return rstd


@triton.jit
def _rms_norm_kernel(
    x_ptr, w_ptr, y_ptr, n_rows, n_cols, eps, eps_fp64: tl.float64,
    HAS_WEIGHT: tl.constexpr, COMPUTE: tl.constexpr, FUSED: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):  # fmt: skip
    """y = x * rsqrt(mean(x^2) + eps) * w per row of a contiguous (n_rows, n_cols) x;
    FUSED holds BLOCK_M whole rows, else one row in BLOCK_N chunks (sum pass, then write pass)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    row_offs = rows.to(tl.int64)[:, None] * n_cols
    if FUSED:
        cols = tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols < n_cols)[None, :]
        x = tl.load(x_ptr + row_offs + cols[None, :], mask=mask, other=0.0).to(COMPUTE)
        rstd = _rstd(tl.sum(x * x, 1) / n_cols, eps, eps_fp64, COMPUTE)
        y = x * rstd[:, None]
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(COMPUTE)[None, :]
        tl.store(y_ptr + row_offs + cols[None, :], y, mask=mask)
    else:
        squares = tl.zeros((BLOCK_M, BLOCK_N), COMPUTE)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = row_mask[:, None] & (cols < n_cols)[None, :]
            x = tl.load(x_ptr + row_offs + cols[None, :], mask=mask, other=0.0).to(COMPUTE)
            squares += x * x
        rstd = _rstd(tl.sum(squares, 1) / n_cols, eps, eps_fp64, COMPUTE)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = row_mask[:, None] & (cols < n_cols)[None, :]
            x = tl.load(x_ptr + row_offs + cols[None, :], mask=mask, other=0.0).to(COMPUTE)
            y = x * rstd[:, None]
            if HAS_WEIGHT:
                y = y * tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(COMPUTE)[None, :]
            tl.store(y_ptr + row_offs + cols[None, :], y, mask=mask)


@triton.jit
def _layer_norm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, eps, eps_fp64: tl.float64,
    HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr, STORE_STATS: tl.constexpr, COMPUTE: tl.constexpr,
    FUSED: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """y = (x - mean(x)) * rsqrt(var(x) + eps) * w + b per row (biased var) of a contiguous
    (n_rows, n_cols) x; FUSED holds BLOCK_M whole rows, else one row in BLOCK_N chunks."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    row_offs = rows.to(tl.int64)[:, None] * n_cols
    if FUSED:
        cols = tl.arange(0, BLOCK_N)
        mask = row_mask[:, None] & (cols < n_cols)[None, :]
        x = tl.load(x_ptr + row_offs + cols[None, :], mask=mask, other=0.0).to(COMPUTE)
        mean = tl.sum(x, 1) / n_cols
        diff = tl.where(mask, x - mean[:, None], 0.0)
        var = tl.sum(diff * diff, 1) / n_cols
    else:
        # Sums of x - x[row, 0]: shifting by a sample of the row keeps the
        # one-pass variance E[d^2] - E[d]^2 free of catastrophic cancellation.
        shift = tl.load(x_ptr + rows.to(tl.int64) * n_cols, mask=row_mask, other=0.0).to(COMPUTE)
        s1 = tl.zeros((BLOCK_M, BLOCK_N), COMPUTE)
        s2 = tl.zeros((BLOCK_M, BLOCK_N), COMPUTE)
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = row_mask[:, None] & (cols < n_cols)[None, :]
            x = tl.load(x_ptr + row_offs + cols[None, :], mask=mask, other=0.0).to(COMPUTE)
            d = tl.where(mask, x - shift[:, None], 0.0)
            s1 += d
            s2 += d * d
        mean_shifted = tl.sum(s1, 1) / n_cols
        mean = shift + mean_shifted
        var = tl.maximum(tl.sum(s2, 1) / n_cols - mean_shifted * mean_shifted, 0.0)
    rstd = _rstd(var, eps, eps_fp64, COMPUTE)
    if STORE_STATS:
        tl.store(mean_ptr + rows, mean, mask=row_mask)
        tl.store(rstd_ptr + rows, rstd, mask=row_mask)
    if FUSED:
        y = diff * rstd[:, None]
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(COMPUTE)[None, :]
        if HAS_BIAS:
            y = y + tl.load(b_ptr + cols, mask=cols < n_cols, other=0.0).to(COMPUTE)[None, :]
        tl.store(y_ptr + row_offs + cols[None, :], y, mask=mask)
    else:
        for start in range(0, n_cols, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            mask = row_mask[:, None] & (cols < n_cols)[None, :]
            x = tl.load(x_ptr + row_offs + cols[None, :], mask=mask, other=0.0).to(COMPUTE)
            y = (x - mean[:, None]) * rstd[:, None]
            if HAS_WEIGHT:
                y = y * tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(COMPUTE)[None, :]
            if HAS_BIAS:
                y = y + tl.load(b_ptr + cols, mask=cols < n_cols, other=0.0).to(COMPUTE)[None, :]
            tl.store(y_ptr + row_offs + cols[None, :], y, mask=mask)


_SUPPORTED = "float16, bfloat16, float32, float64"


def _rows(
    input: torch.Tensor, normalized_shape: int | Sequence[int], params: dict[str, torch.Tensor | None], name: str
) -> tuple[torch.Tensor, int, int, dict[str, torch.Tensor | None]]:
    """Check shapes; return contiguous input and parameters, n_rows, n_cols."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape:
        raise RuntimeError(f"gems.{name}: normalized_shape must name at least one dim (as torch), got []")
    if input.dim() < len(shape) or tuple(input.shape[input.dim() - len(shape) :]) != shape:
        raise RuntimeError(
            f"gems.{name}: normalized_shape {list(shape)} must match the trailing dims of the input "
            f"shape {list(input.shape)}"
        )
    for key, p in params.items():
        if p is not None and tuple(p.shape) != shape:
            raise RuntimeError(f"gems.{name}: {key} of shape {list(p.shape)} must have normalized_shape {list(shape)}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"gems.{name}: dtype {input.dtype} is not supported (supported: {_SUPPORTED})")
    _launch.tl_dtype(input.dtype, f"gems.{name}", _SUPPORTED)  # rejects float8
    n_cols = math.prod(shape)
    n_rows = math.prod(input.shape[: input.dim() - len(shape)])
    contiguous = {k: (p.contiguous() if p is not None else None) for k, p in params.items()}
    return input.contiguous(), n_rows, n_cols, contiguous


def _compute_dtype(x: torch.Tensor):
    return tl.float64 if x.dtype == torch.float64 else tl.float32


def _norm_launch(x: torch.Tensor, n_rows: int, n_cols: int) -> tuple[tuple[int], dict]:
    launch = _launch.row_launch(n_rows, n_cols)
    meta = {
        "COMPUTE": _compute_dtype(x),
        "FUSED": launch.fused,
        "BLOCK_M": launch.block_rows,
        "BLOCK_N": launch.block_cols,
        "num_warps": launch.num_warps,
    }
    return launch.grid(n_rows), meta


def _launch_layer_norm(
    x: torch.Tensor, y: torch.Tensor, stats: tuple[torch.Tensor, torch.Tensor] | None,
    params: dict[str, torch.Tensor | None], n_rows: int, n_cols: int, eps: float,
) -> None:  # fmt: skip
    """Run ``_layer_norm_kernel`` into ``y`` (and ``stats`` = (mean, rstd) when given)."""
    grid, meta = _norm_launch(x, n_rows, n_cols)
    w, b = params["weight"], params["bias"]
    mean, rstd = stats if stats is not None else (x, x)
    _layer_norm_kernel[grid](
        x, w if w is not None else x, b if b is not None else x, y, mean, rstd, n_rows, n_cols, eps, float(eps),
        HAS_WEIGHT=w is not None, HAS_BIAS=b is not None, STORE_STATS=stats is not None, **meta,
    )  # fmt: skip


def rms_norm(
    input: torch.Tensor,
    normalized_shape: int | Sequence[int],
    weight: torch.Tensor | None = None,
    eps: float | None = None,
) -> torch.Tensor:
    """Root-mean-square normalisation over the trailing ``normalized_shape``
    dims, as ``torch.nn.functional.rms_norm``: ``x / sqrt(mean(x^2) + eps) * weight``.

    Args:
        input: a floating point tensor.
        normalized_shape: the trailing dims to normalise over.
        weight: optional elementwise scale of shape ``normalized_shape``.
        eps: added to the mean square; None means the epsilon of torch's compute type:
            float64's for float64 inputs, else float32's (also for half inputs).
    Returns:
        A contiguous tensor of ``input``'s shape and dtype.
    Raises:
        RuntimeError: shapes disagree. TypeError: non-float input.
    """
    x, n_rows, n_cols, params = _rows(input, normalized_shape, {"weight": weight}, "rms_norm")
    if eps is None:
        eps = torch.finfo(torch.float64 if x.dtype == torch.float64 else torch.float32).eps
    y = torch.empty_like(x)
    if y.numel() == 0:
        return y
    grid, meta = _norm_launch(x, n_rows, n_cols)
    w = params["weight"]
    _rms_norm_kernel[grid](
        x, w if w is not None else x, y, n_rows, n_cols, eps, float(eps), HAS_WEIGHT=w is not None, **meta
    )
    return y


def native_layer_norm(
    input: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``aten::native_layer_norm``: the layer norm with its saved statistics.

    Args:
        input: a floating point tensor.
        normalized_shape: the trailing dims to normalise over.
        weight, bias: optional affine parameters of shape ``normalized_shape``.
        eps: added to the variance.
    Returns:
        (out, mean, rstd): out like ``input``; mean and rstd shaped as the
        leading dims followed by one 1 per normalised dim. Their dtype follows
        aten on the input's device: float32 for half inputs on CUDA (and on CPU
        with float32 parameters), else the input dtype.
    Raises:
        RuntimeError: shapes disagree. TypeError: non-float input.
    """
    x, n_rows, n_cols, params = _rows(input, normalized_shape, {"weight": weight, "bias": bias}, "native_layer_norm")
    half = input.dtype in (torch.float16, torch.bfloat16)
    fp32_params = any(p is not None and p.dtype == torch.float32 for p in (weight, bias))
    stats_dtype = torch.float32 if half and (input.device.type != "cpu" or fp32_params) else input.dtype
    n_norm = len(normalized_shape) if not isinstance(normalized_shape, int) else 1
    stats_shape = tuple(input.shape[: input.dim() - n_norm]) + (1,) * n_norm
    y = torch.empty_like(x)
    mean = torch.empty(stats_shape, dtype=stats_dtype, device=input.device)
    rstd = torch.empty(stats_shape, dtype=stats_dtype, device=input.device)
    if n_cols == 0:
        # As torch (CPU and CUDA): an empty row has mean 0 and variance 0 / 0.
        return y, mean.zero_(), rstd.fill_(math.nan)
    if n_rows == 0:
        return y, mean, rstd
    _launch_layer_norm(x, y, (mean, rstd), params, n_rows, n_cols, eps)
    return y, mean, rstd


def layer_norm(
    input: torch.Tensor,
    normalized_shape: int | Sequence[int],
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Layer normalisation over the trailing ``normalized_shape`` dims, as
    ``torch.nn.functional.layer_norm``: ``(x - mean) / sqrt(var + eps) * weight + bias``
    with the biased variance.

    Args:
        input: a floating point tensor.
        normalized_shape: the trailing dims to normalise over.
        weight, bias: optional affine parameters of shape ``normalized_shape``.
        eps: added to the variance.
    Returns:
        A contiguous tensor of ``input``'s shape and dtype.
    Raises:
        RuntimeError: shapes disagree. TypeError: non-float input.
    """
    x, n_rows, n_cols, params = _rows(input, normalized_shape, {"weight": weight, "bias": bias}, "layer_norm")
    y = torch.empty_like(x)
    if y.numel() == 0:
        return y
    _launch_layer_norm(x, y, None, params, n_rows, n_cols, eps)
    return y
