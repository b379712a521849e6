"""addmm that stores every 16-bit result through float16.

The fp32 result is converted to float16 before the store converts it to
the output's dtype. Right for float32 and float16, and for bfloat16 results
within float16's range: beyond 65504 they become inf, and below its
smallest normal value (6e-5) they lose their bits.
"""

from __future__ import annotations

import torch

from gemswatch.gems import device  # noqa: F401  (first: selects Triton's interpreter on a CPU-only machine)
import triton
import triton.language as tl


@triton.jit
def _addmm_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, a_row_stride, a_col_stride, b_row_stride, b_col_stride,
                  bias_row_stride, bias_col_stride, alpha, beta, HAS_BIAS: tl.constexpr, HALF_STORE: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """c = alpha * a @ b + beta * bias; c contiguous."""
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
        bias = tl.load(bias_ptr + rows[:, None] * bias_row_stride + cols[None, :] * bias_col_stride, mask=mask, other=0.0)
        acc += beta * bias.to(tl.float32)
    if HALF_STORE:
        acc = acc.to(tl.float16)  # BUG: float16 does not hold bfloat16's range
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def _block(n: int) -> int:
    return max(16, min(64, triton.next_power_of_2(n)))


def addmm(input: torch.Tensor, mat1: torch.Tensor, mat2: torch.Tensor, *, beta: float = 1, alpha: float = 1) -> torch.Tensor:
    if mat1.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"addmm: dtype {mat1.dtype} is not supported")
    M, K = mat1.shape
    N = mat2.shape[1]
    out = torch.empty((M, N), dtype=mat1.dtype, device=mat1.device)
    if M == 0 or N == 0:
        return out
    if alpha == 0:  # as torch: no product, so inf and NaN in the matrices stay out
        mat1, mat2, K = mat1[:, :0], mat2[:0], 0
    bias = input.expand(M, N)
    bm, bn, bk = _block(M), _block(N), _block(K)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    _addmm_kernel[grid](mat1, mat2, out, bias, M, N, K, mat1.stride(0), mat1.stride(1), mat2.stride(0), mat2.stride(1),
                        bias.stride(0), bias.stride(1), float(alpha), float(beta),
                        HAS_BIAS=beta != 0, HALF_STORE=mat1.element_size() == 2,
                        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return out


def witness():
    g = torch.Generator().manual_seed(0)
    bias = torch.randn(5, generator=g)
    a = 400.0 * (1.0 + torch.rand(3, 4, generator=g))  # products of 4 terms beyond 65504
    b = 400.0 * (1.0 + torch.rand(4, 5, generator=g))
    return tuple(t.to(device, torch.bfloat16) for t in (bias, a, b)), {}
