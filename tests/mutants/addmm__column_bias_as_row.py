"""addmm whose epilogue reads every vector-shaped bias as a row vector.

A bias of shape (N,), (1, N) or (M, 1) is flattened and element (m, n) of
the result gets ``bias[n]`` (zero past its end). Right for row vectors,
scalars and full (M, N) biases; wrong for a column bias (M, 1).
"""

from __future__ import annotations

import torch

from gemswatch.gems import device  # noqa: F401  (first: selects Triton's interpreter on a CPU-only machine)
import triton
import triton.language as tl


@triton.jit
def _addmm_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, a_row_stride, a_col_stride, b_row_stride, b_col_stride,
                  bias_row_stride, bias_col_stride, bias_len, alpha, beta,
                  HAS_BIAS: tl.constexpr, VECTOR_BIAS: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """c = alpha * a @ b + beta * bias, in fp32; c contiguous."""
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
    acc = acc * alpha
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    if HAS_BIAS:
        if VECTOR_BIAS:  # BUG: a column (M, 1) is read along the columns too
            vec = tl.load(bias_ptr + cols * bias_col_stride, mask=cols < bias_len, other=0.0)
            acc += beta * vec.to(tl.float32)[None, :]
        else:
            offs = rows[:, None] * bias_row_stride + cols[None, :] * bias_col_stride
            acc += beta * tl.load(bias_ptr + offs, mask=mask, other=0.0).to(tl.float32)
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
    vector = input.dim() < 2 or 1 in input.shape and input.numel() > 1
    if vector:
        bias = input.reshape(-1)
        bias_strides, bias_len = (0, bias.stride(0)), bias.numel()
    else:
        bias = input.expand(M, N)
        bias_strides, bias_len = bias.stride(), M * N
    bm, bn, bk = _block(M), _block(N), _block(K)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    _addmm_kernel[grid](mat1, mat2, out, bias, M, N, K, mat1.stride(0), mat1.stride(1), mat2.stride(0), mat2.stride(1),
                        *bias_strides, bias_len, float(alpha), float(beta),
                        HAS_BIAS=beta != 0, VECTOR_BIAS=vector, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return out


def witness():
    g = torch.Generator().manual_seed(0)
    bias = torch.randn(8, 1, generator=g)
    a = torch.randn(8, 5, generator=g)
    b = torch.randn(5, 6, generator=g)
    return (bias.to(device), a.to(device), b.to(device)), {}
