"""addmm_ whose kernel stores the result as if the input were row-major.

The bias is read through the input's strides, but the result is written at
``row * N + col``. Right for a contiguous input; a column-major (transposed)
or padded-row input gets its values scattered.
"""

from __future__ import annotations

import torch

from gemswatch.gems import device  # noqa: F401  (first: selects Triton's interpreter on a CPU-only machine)
import triton
import triton.language as tl


@triton.jit
def _addmm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, a_row_stride, a_col_stride, b_row_stride, b_col_stride,
                  c_row_stride, c_col_stride, alpha, beta, HAS_BIAS: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """c = alpha * a @ b + beta * c, in fp32."""
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
    acc = acc * alpha
    if HAS_BIAS:
        c = tl.load(c_ptr + rows[:, None] * c_row_stride + cols[None, :] * c_col_stride, mask=mask, other=0.0)
        acc += beta * c.to(tl.float32)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)  # BUG: strides ignored


def _block(n: int) -> int:
    return max(16, min(64, triton.next_power_of_2(n)))


def addmm_(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1, alpha: float = 1) -> torch.Tensor:
    if mat1.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"addmm_: dtype {mat1.dtype} is not supported")
    M, K = mat1.shape
    N = mat2.shape[1]
    if M == 0 or N == 0:
        return input
    if alpha == 0:  # as torch: no product, so inf and NaN in the matrices stay out
        mat1, mat2, K = mat1[:, :0], mat2[:0], 0
    bm, bn, bk = _block(M), _block(N), _block(K)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    # Every program reads its own tile of the input before writing it, so in
    # place is safe while the input does not alias the matrices.
    _addmm_kernel[grid](mat1, mat2, input, M, N, K, mat1.stride(0), mat1.stride(1), mat2.stride(0), mat2.stride(1),
                        input.stride(0), input.stride(1), float(alpha), float(beta),
                        HAS_BIAS=beta != 0, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return input


def witness():
    g = torch.Generator().manual_seed(0)
    inp = torch.randn(5, 6, generator=g).t()  # (6, 5), column-major
    a = torch.randn(6, 3, generator=g)
    b = torch.randn(3, 5, generator=g)
    return (inp.to(device), a.to(device), b.to(device)), {}
