"""softmax whose single-chunk path (rows up to 8192) exponentiates the logits
without subtracting the row maximum: exp overflows float32 for logits above
about 88 and the row becomes NaN.

Reached by narrow rows with large logits; ordinary logits (randn * 3) are
right, and so are wide rows (the two-pass path keeps its running max).
"""

from __future__ import annotations

import torch

from gemswatch.gems import device  # noqa: F401  (first: on a CPU-only machine it selects Triton's interpreter)
import triton
import triton.language as tl

# Widest row kept whole in registers; wider rows are walked in chunks of
# CHUNK elements.
MAX_SINGLE_CHUNK = 8192
CHUNK = 2048
# Elements per program tile: short rows are packed BLOCK_ROWS to a program.
TILE = 4096


@triton.jit
def _softmax_kernel(
    x_ptr,
    y_ptr,
    n_rows,  # outer * inner
    n_cols,  # n, the length of the softmax axis
    inner,  # distance between neighbouring elements of a row
    SINGLE_CHUNK: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    """y[r, j] = exp(x[r, j] - max_j x[r]) / sum_j exp(x[r, j] - max_j x[r])
    for BLOCK_ROWS rows r, with (r, j) -> (r // inner) * n_cols * inner + r % inner + j * inner."""
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    row_mask = rows < n_rows
    rows = rows.to(tl.int64)
    row_start = (rows // inner) * n_cols * inner + rows % inner  # offset of element 0
    cols = tl.arange(0, BLOCK_COLS)

    if SINGLE_CHUNK:
        # Whole rows in registers: max, exponentials, sum, store.
        mask = row_mask[:, None] & (cols < n_cols)[None, :]
        offs = row_start[:, None] + cols[None, :] * inner
        x = tl.load(x_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
        e = tl.exp(x)  # BUG: no max subtraction
        y = e / tl.sum(e, 1)[:, None]
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        # Walk 1: per lane, running max m and running sum d of exp(x - m).
        m = tl.full((BLOCK_ROWS, BLOCK_COLS), float("-inf"), tl.float32)
        d = tl.zeros((BLOCK_ROWS, BLOCK_COLS), tl.float32)
        for start in range(0, n_cols, BLOCK_COLS):
            mask = row_mask[:, None] & ((start + cols) < n_cols)[None, :]
            offs = row_start[:, None] + (start + cols)[None, :] * inner
            x = tl.load(x_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, x)
            # While a lane has seen only -inf, keep d at 0 instead of
            # computing exp(-inf - -inf) = NaN.
            m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
            d = d * tl.exp(m - m_ref) + tl.exp(x - m_ref)
            m = m_new
        # Combine the lanes of each row.
        row_max = tl.max(m, 1)
        row_sum = tl.sum(d * tl.exp(m - row_max[:, None]), 1)
        # Walk 2: write the normalised exponentials.
        for start in range(0, n_cols, BLOCK_COLS):
            mask = row_mask[:, None] & ((start + cols) < n_cols)[None, :]
            offs = row_start[:, None] + (start + cols)[None, :] * inner
            x = tl.load(x_ptr + offs, mask=mask, other=float("-inf")).to(tl.float32)
            y = tl.exp(x - row_max[:, None]) / row_sum[:, None]
            tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch_config(n_rows: int, n_cols: int) -> dict:
    """Tile shape and warps for an (n_rows, n_cols) softmax."""
    width = triton.next_power_of_2(max(n_cols, 1))
    single = width <= MAX_SINGLE_CHUNK
    block_cols = width if single else CHUNK
    block_rows = max(1, min(TILE // block_cols, triton.next_power_of_2(max(n_rows, 1))))
    tile = block_rows * block_cols
    num_warps = 16 if tile >= 16384 else 8 if tile >= 4096 else 4 if tile >= 1024 else 2
    return {"SINGLE_CHUNK": single, "BLOCK_ROWS": block_rows, "BLOCK_COLS": block_cols, "num_warps": num_warps}


def softmax(input: torch.Tensor, dim: int = -1, dtype: torch.dtype | None = None) -> torch.Tensor:
    """softmax(input, dim, dtype) with torch's semantics: ``input`` is cast
    to ``dtype`` first when given; the result has ``dtype or input.dtype``
    and, like torch's, the memory layout of a dense input.
    Float32, float16 and bfloat16; math in fp32."""
    if dtype is not None:
        input = input.to(dtype)
    if input.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"softmax: unsupported dtype {input.dtype} (float32, float16, bfloat16)")
    ndim = max(input.dim(), 1)
    if not -ndim <= dim < ndim:
        raise IndexError(f"softmax: dim {dim} is out of range for a tensor of {input.dim()} dims")
    if input.dim() == 0:
        return softmax(input.reshape(1), 0).reshape(())
    dim %= ndim

    # Work in memory order: permute the dims from outermost to innermost
    # stride. A dense input (contiguous, transposed, permuted) then needs no
    # copy, and torch.empty_like gives the output the same layout.
    x, y = input, torch.empty_like(input)
    order = sorted(range(ndim), key=lambda d: -x.stride(d))
    x, y = x.permute(order), y.permute(order)
    if not (x.is_contiguous() and y.is_contiguous()):  # slices, broadcasts: copy
        order = list(range(ndim))
        x = input.contiguous()
        y = torch.empty_like(x)
    dim = order.index(dim)
    if x.numel() == 0:
        return y.permute(_inverse(order))

    n_cols = x.shape[dim]
    inner = x.shape[dim + 1 :].numel()
    n_rows = x.numel() // n_cols
    config = _launch_config(n_rows, n_cols)
    grid = (triton.cdiv(n_rows, config["BLOCK_ROWS"]),)
    _softmax_kernel[grid](x, y, n_rows, n_cols, inner, **config)
    return y.permute(_inverse(order))


def _inverse(order: list[int]) -> list[int]:
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return inverse


def witness():
    g = torch.Generator().manual_seed(0)
    return ((torch.randn(3, 300, generator=g) * 1e3).to(device), -1), {}
