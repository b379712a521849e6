"""rms_norm that passes the row width as the input's row stride, as if every
input with unit column stride were contiguous.

Wrong for padded-row views ``x[:, :k]`` of a wider tensor; contiguous,
transposed and stepped inputs are copied first and are right.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import torch

from gemswatch.gems import device  # noqa: F401  (first: on a CPU-only machine it selects Triton's interpreter)
import triton
import triton.language as tl

# Widest row normalised in one pass from registers; wider rows are walked in
# chunks of CHUNK columns (a sum-of-squares walk, then a write walk).
MAX_FUSED = 8192
CHUNK = 2048
# Elements per row tile: short rows are packed BLOCK_ROWS to a tile.
TILE = 4096
PROGRAMS_PER_SM = 4


@triton.jit
def _rms_norm_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    n_rows,
    n_cols,
    x_row_stride,
    y_row_stride,
    eps,
    HAS_WEIGHT: tl.constexpr,
    FUSED: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    """y[r, :] = x[r, :] * rsqrt(sum(x[r, :]^2) / n_cols + eps) * w
    for every row tile pid, pid + num_programs, ... of an (n_rows, n_cols) x."""
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    n_tiles = tl.cdiv(n_rows, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_COLS)

    if FUSED:
        col_mask = cols < n_cols
        # Loaded once, reused for every tile this program handles.
        if HAS_WEIGHT:
            w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        for tile in range(pid, n_tiles, n_programs):
            rows = tile * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
            mask = (rows < n_rows)[:, None] & col_mask[None, :]
            rows = rows.to(tl.int64)
            x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            rstd = tl.rsqrt(tl.sum(x * x, 1) / n_cols + eps)
            y = x * rstd[:, None]
            if HAS_WEIGHT:
                y = y * w[None, :]
            tl.store(y_ptr + rows[:, None] * y_row_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        for tile in range(pid, n_tiles, n_programs):
            rows = tile * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
            row_mask = rows < n_rows
            rows = rows.to(tl.int64)
            # Walk 1: sum of squares per row, in fp32 lanes.
            squares = tl.zeros((BLOCK_ROWS, BLOCK_COLS), tl.float32)
            for start in range(0, n_cols, BLOCK_COLS):
                mask = row_mask[:, None] & ((start + cols) < n_cols)[None, :]
                x = tl.load(x_ptr + rows[:, None] * x_row_stride + (start + cols)[None, :], mask=mask, other=0.0)
                x = x.to(tl.float32)
                squares += x * x
            rstd = tl.rsqrt(tl.sum(squares, 1) / n_cols + eps)
            # Walk 2: scale and store.
            for start in range(0, n_cols, BLOCK_COLS):
                col_mask = (start + cols) < n_cols
                mask = row_mask[:, None] & col_mask[None, :]
                x = tl.load(x_ptr + rows[:, None] * x_row_stride + (start + cols)[None, :], mask=mask, other=0.0)
                y = x.to(tl.float32) * rstd[:, None]
                if HAS_WEIGHT:
                    y = y * tl.load(w_ptr + start + cols, mask=col_mask, other=0.0).to(tl.float32)[None, :]
                y_offs = rows[:, None] * y_row_stride + (start + cols)[None, :]
                tl.store(y_ptr + y_offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@functools.cache
def _sm_count(on: torch.device) -> int:
    """Multiprocessors of a GPU (queried once, not on every call)."""
    return torch.cuda.get_device_properties(on).multi_processor_count


def _num_programs(n_tiles: int, on: torch.device) -> int:
    """Enough programs to fill the GPU, never more than there are tiles."""
    if on.type == "cuda":
        return max(1, min(n_tiles, PROGRAMS_PER_SM * _sm_count(on)))
    return max(1, min(n_tiles, 4))  # the interpreter runs programs one by one


def _launch_config(n_rows: int, n_cols: int) -> dict:
    width = triton.next_power_of_2(max(n_cols, 1))
    fused = width <= MAX_FUSED
    block_cols = width if fused else CHUNK
    block_rows = max(1, min(TILE // block_cols, triton.next_power_of_2(max(n_rows, 1))))
    tile = block_rows * block_cols
    num_warps = 16 if tile >= 16384 else 8 if tile >= 4096 else 4 if tile >= 1024 else 2
    return {"FUSED": fused, "BLOCK_ROWS": block_rows, "BLOCK_COLS": block_cols, "num_warps": num_warps}


def rms_norm(
    input: torch.Tensor,
    normalized_shape: int | Sequence[int],
    weight: torch.Tensor | None = None,
    eps: float | None = None,
) -> torch.Tensor:
    """``torch.nn.functional.rms_norm``: normalise over the trailing
    ``normalized_shape`` dims; ``eps=None`` means float32's epsilon, as in torch.
    Returns a contiguous tensor of ``input``'s shape and dtype."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.dim() - len(shape) :]) != shape or input.dim() < len(shape):
        raise RuntimeError(
            f"rms_norm: normalized_shape {list(shape)} does not match the last dims of input shape {list(input.shape)}"
        )
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"rms_norm: weight shape {list(weight.shape)} must be normalized_shape {list(shape)}")
    if input.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"rms_norm: unsupported dtype {input.dtype} (float32, float16, bfloat16)")
    if eps is None:
        eps = torch.finfo(torch.float32).eps  # torch uses its float32 compute type's eps

    n_cols = math.prod(shape)
    y = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    if y.numel() == 0:
        return y
    x = input.reshape(-1, n_cols)  # a view when the rows allow it
    if n_cols > 1 and x.stride(1) != 1:
        x = x.contiguous()
    y2 = y.view(-1, n_cols)
    w = weight.contiguous() if weight is not None else None

    n_rows = x.shape[0]
    config = _launch_config(n_rows, n_cols)
    grid = (_num_programs(triton.cdiv(n_rows, config["BLOCK_ROWS"]), input.device),)
    _rms_norm_kernel[grid](
        x,
        w if w is not None else x,  # any pointer: never read without HAS_WEIGHT
        y2,
        n_rows,
        n_cols,
        n_cols,  # BUG: the row stride of a padded view is not its width
        y2.stride(0),
        eps,
        HAS_WEIGHT=w is not None,
        **config,
    )
    return y


def witness():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 300, generator=g)[:, :200]
    return (x.to(device), [200]), {}
