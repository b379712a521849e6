"""mm with a leading-dimension shortcut for transposed operands: a matrix
whose rows are contiguous in memory (unit row stride, a transposed view) is
taken to be a dense transpose, so its column stride is read as its height.

Wrong for a transposed view of a padded matrix, such as ``x[:, :k].t()``
(column stride larger than the height): columns after the first are read
from the wrong place. Row-major operands (padded or not) and dense
transposes are right.
"""

from __future__ import annotations

import torch

from gemswatch.gems import device  # noqa: F401  (first: selects Triton's interpreter on a CPU-only machine)
import triton
import triton.language as tl


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, a_row_stride, a_col_stride, b_row_stride, b_col_stride,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """c[m, n] = sum_k a[m, k] * b[k, n] in fp32; c contiguous."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * a_row_stride + kk[None, :] * a_col_stride,
                    mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * b_row_stride + cols[None, :] * b_col_stride,
                    mask=(kk[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def _strides(t: torch.Tensor) -> tuple[int, int]:
    if t.stride(0) == 1 and t.shape[1] > 1:  # "column-major": BUG, assumes no padding between columns
        return 1, t.shape[0]
    return t.stride(0), t.stride(1)


def _block(n: int) -> int:
    return max(16, min(64, triton.next_power_of_2(n)))


def mm(input: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
    if input.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"mm: dtype {input.dtype} is not supported")
    if input.dtype != mat2.dtype:
        raise RuntimeError("mm: expected both matrices to have the same dtype")
    M, K = input.shape
    N = mat2.shape[1]
    out = torch.empty((M, N), dtype=input.dtype, device=input.device)
    if M == 0 or N == 0:
        return out
    bm, bn, bk = _block(M), _block(N), _block(K)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    _mm_kernel[grid](input, mat2, out, M, N, K, *_strides(input), *_strides(mat2),
                     BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return out


def witness():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(9, 13, generator=g)
    b = torch.randn(7, 20, generator=g)[:, :13].t()  # (13, 7), strides (1, 20)
    return (a.to(device), b.to(device)), {}
