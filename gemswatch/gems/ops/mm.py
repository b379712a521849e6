"""Matrix products: ``mm``, ``addmm`` and the in-place ``addmm_``.

One tiled Triton kernel computes ``out = alpha * (a @ b) + beta * bias`` with
an fp32 accumulator; ``mm`` is the case without a bias. Operands are read
through their strides, so transposed and sliced matrices need no copy.
"""

from __future__ import annotations

import contextlib

import torch

from .._device import interpreted  # noqa: I001  (must precede triton)
import triton
import triton.language as tl

__all__ = ["mm", "addmm", "addmm_"]

_SUPPORTED = (torch.float32, torch.float16, torch.bfloat16)


# Tuning list for Hopper-class GPUs (keyed on the problem size and dtype).
# Large square problems want 128x256 or 256x128 tiles with 8 warps and a
# 3-4 stage pipeline; the smaller tiles keep skinny or small problems from
# leaving most multiprocessors idle.
def _config(bm: int, bn: int, bk: int, stages: int, warps: int, group: int = 8) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group},
        num_stages=stages,
        num_warps=warps,
    )


MM_CONFIGS = [
    _config(128, 256, 64, 3, 8),
    _config(256, 128, 64, 3, 8),
    _config(128, 256, 64, 4, 8),
    _config(128, 128, 64, 4, 8),
    _config(128, 128, 64, 4, 4),
    _config(128, 128, 32, 4, 4),
    _config(64, 256, 32, 4, 4),
    _config(128, 64, 32, 4, 4),
    _config(64, 128, 32, 4, 4),
    _config(64, 64, 32, 5, 2),
    _config(32, 64, 32, 5, 2),
    # float32 (ieee dot) keeps fewer operands in shared memory per stage.
    _config(128, 128, 32, 3, 8),
    _config(64, 128, 64, 3, 4),
]


@triton.jit
def _addmm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    bias_ptr,
    M,
    N,
    K,
    a_row_stride,
    a_col_stride,
    b_row_stride,
    b_col_stride,
    c_row_stride,
    c_col_stride,
    bias_row_stride,
    bias_col_stride,
    alpha,
    beta,
    HAS_BIAS: tl.constexpr,
    EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """c[m, n] = alpha * sum_k a[m, k] * b[k, n] + beta * bias[m, n]
    (bias term only when HAS_BIAS), accumulated in fp32."""
    # Grouped ordering: GROUP_M consecutive programs walk down a column of
    # tiles, so the B tiles they share stay in L2 while A tiles stream.
    pid = tl.program_id(0)
    n_tiles_m = tl.cdiv(M, BLOCK_M)
    n_tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * n_tiles_n
    group = pid // tiles_per_group
    first_m = group * GROUP_M
    group_rows = min(n_tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % tiles_per_group) % group_rows
    pid_n = (pid % tiles_per_group) // group_rows

    # Row/column indices wrap around (% M, % N): loads stay in bounds without
    # a mask, and the ragged edge is cut off by the masked store instead.
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    a_rows = rows % M
    b_cols = cols % N
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + a_rows[:, None].to(tl.int64) * a_row_stride + ks[None, :] * a_col_stride
    b_ptrs = b_ptr + ks[:, None] * b_row_stride + b_cols[None, :].to(tl.int64) * b_col_stride

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=ks[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=ks[:, None] < k_left, other=0.0)
        if UPCAST:
            # bf16 -> fp32 is exact, and so are the fp32 products of two bf16
            # values: same result as a bf16 tensor-core dot into fp32.
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * a_col_stride
        b_ptrs += BLOCK_K * b_row_stride

    acc = acc * alpha
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    rows64 = rows[:, None].to(tl.int64)
    cols64 = cols[None, :].to(tl.int64)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + rows64 * bias_row_stride + cols64 * bias_col_stride, mask=mask, other=0.0)
        acc += beta * bias.to(tl.float32)
    tl.store(c_ptr + rows64 * c_row_stride + cols64 * c_col_stride, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _interpreter_meta(M: int, N: int, K: int) -> dict:
    """One config under the interpreter: tiles as large as the problem
    (capped at 64), because each program costs Python time there."""

    def fit(n: int, cap: int) -> int:
        return max(16, min(cap, triton.next_power_of_2(max(n, 1))))

    return {"BLOCK_M": fit(M, 64), "BLOCK_N": fit(N, 64), "BLOCK_K": fit(K, 64), "GROUP_M": 8}


def _even_k(args: dict) -> bool:
    return args["K"] % args["BLOCK_K"] == 0


_kernel = triton.heuristics({"EVEN_K": _even_k})(_addmm_kernel)
if not interpreted:
    # The autotuner sits outside the heuristic so EVEN_K sees the tuned BLOCK_K.
    # DOT_PRECISION is in the key: fp32 ("ieee") and 16-bit inputs tune apart.
    _kernel = triton.autotune(configs=MM_CONFIGS, key=["M", "N", "K", "DOT_PRECISION"])(_kernel)


def _check_operands(name: str, mat1: torch.Tensor, mat2: torch.Tensor) -> None:
    if mat1.dim() != 2 or mat2.dim() != 2:
        raise RuntimeError(
            f"{name}: expected 2-D matrices, got shapes {tuple(mat1.shape)} and {tuple(mat2.shape)}"
        )
    if mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(
            f"{name}: shapes {tuple(mat1.shape)} and {tuple(mat2.shape)} cannot be multiplied "
            f"({mat1.shape[1]} != {mat2.shape[0]})"
        )
    if mat1.dtype != mat2.dtype:
        raise RuntimeError(f"{name}: expected both matrices to have the same dtype, got {mat1.dtype} and {mat2.dtype}")
    if mat1.dtype not in _SUPPORTED:
        raise TypeError(f"{name}: dtype {mat1.dtype} is not supported (supported: float32, float16, bfloat16)")
    if mat1.device != mat2.device:
        raise RuntimeError(f"{name}: matrices are on different devices ({mat1.device} and {mat2.device})")


def _launch(
    mat1: torch.Tensor,
    mat2: torch.Tensor,
    out: torch.Tensor,
    bias: torch.Tensor | None,
    alpha: float,
    beta: float,
) -> torch.Tensor:
    """out = alpha * mat1 @ mat2 (+ beta * bias), bias already shaped (M, N)."""
    M, K = mat1.shape
    N = mat2.shape[1]
    if M == 0 or N == 0:
        return out
    has_bias = bias is not None
    bias_arg = bias if has_bias else out  # any pointer; never read without HAS_BIAS
    # Triton's interpreter multiplies bf16 tiles as their raw uint16 bits
    # (triton 3.9), so there the tiles are widened to fp32 first.
    upcast = interpreted and mat1.dtype == torch.bfloat16
    # fp32 inputs: full-precision products, like torch's default (no TF32).
    precision = "ieee" if mat1.dtype == torch.float32 or upcast else "tf32"

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    meta = _interpreter_meta(M, N, K) if interpreted else {}
    with torch.cuda.device(mat1.device) if mat1.is_cuda else contextlib.nullcontext():
        _kernel[grid](
            mat1,
            mat2,
            out,
            bias_arg,
            M,
            N,
            K,
            mat1.stride(0),
            mat1.stride(1),
            mat2.stride(0),
            mat2.stride(1),
            out.stride(0),
            out.stride(1),
            bias_arg.stride(0),
            bias_arg.stride(1),
            float(alpha),
            float(beta),
            HAS_BIAS=has_bias,
            DOT_PRECISION=precision,
            UPCAST=upcast,
            **meta,
        )
    return out


def mm(input: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
    """Matrix product ``input @ mat2`` of an (M, K) and a (K, N) matrix.

    Returns a new contiguous (M, N) tensor of the inputs' dtype (float32,
    float16 or bfloat16), accumulated in fp32. Raises RuntimeError naming both
    shapes when they cannot be multiplied.
    """
    _check_operands("mm", input, mat2)
    out = torch.empty((input.shape[0], mat2.shape[1]), dtype=input.dtype, device=input.device)
    return _launch(input, mat2, out, None, 1.0, 0.0)


def _broadcast_bias(name: str, input: torch.Tensor, M: int, N: int) -> torch.Tensor:
    try:
        return input.expand(M, N)
    except RuntimeError as e:
        raise RuntimeError(
            f"{name}: input of shape {tuple(input.shape)} cannot be broadcast to the product's shape ({M}, {N})"
        ) from e


def addmm(
    input: torch.Tensor,
    mat1: torch.Tensor,
    mat2: torch.Tensor,
    *,
    beta: float = 1,
    alpha: float = 1,
) -> torch.Tensor:
    """``beta * input + alpha * (mat1 @ mat2)``, with ``input`` broadcast to (M, N)
    (e.g. a bias vector of length N).

    As in torch, ``beta == 0`` ignores ``input`` entirely (NaNs in it do not
    propagate). Returns a new (M, N) tensor of the matrices' dtype. Raises
    RuntimeError naming the shapes on a mismatch.
    """
    _check_operands("addmm", mat1, mat2)
    M, N = mat1.shape[0], mat2.shape[1]
    if input.dtype != mat1.dtype:
        raise RuntimeError(f"addmm: input dtype {input.dtype} differs from the matrices' dtype {mat1.dtype}")
    bias = _broadcast_bias("addmm", input, M, N)
    out = torch.empty((M, N), dtype=mat1.dtype, device=mat1.device)
    return _launch(mat1, mat2, out, bias if beta != 0 else None, alpha, beta)


def addmm_(
    input: torch.Tensor,
    mat1: torch.Tensor,
    mat2: torch.Tensor,
    *,
    beta: float = 1,
    alpha: float = 1,
) -> torch.Tensor:
    """In-place ``input = beta * input + alpha * (mat1 @ mat2)``; returns ``input``.

    ``input`` must already have the product's shape (M, N) and the matrices'
    dtype. Raises RuntimeError naming the shapes otherwise.
    """
    _check_operands("addmm_", mat1, mat2)
    M, N = mat1.shape[0], mat2.shape[1]
    if tuple(input.shape) != (M, N):
        raise RuntimeError(
            f"addmm_: input of shape {tuple(input.shape)} must have the product's shape ({M}, {N}) "
            f"of {tuple(mat1.shape)} @ {tuple(mat2.shape)}"
        )
    if input.dtype != mat1.dtype:
        raise RuntimeError(f"addmm_: input dtype {input.dtype} differs from the matrices' dtype {mat1.dtype}")
    if any(s == 0 and n > 1 for s, n in zip(input.stride(), input.shape)):
        raise RuntimeError("addmm_: input has overlapping elements (a zero stride); it cannot be written in place")
    storage = input.untyped_storage().data_ptr()
    aliased = storage in (mat1.untyped_storage().data_ptr(), mat2.untyped_storage().data_ptr())
    if aliased:
        # Other programs would read mat1/mat2 tiles this launch overwrites:
        # compute out of place, then copy back.
        result = _launch(mat1, mat2, torch.empty_like(input), input if beta != 0 else None, alpha, beta)
        return input.copy_(result)
    return _launch(mat1, mat2, input, input if beta != 0 else None, alpha, beta)
