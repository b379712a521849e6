"""Matrix products: ``mm``, ``addmm`` and the in-place ``addmm_``.

Two tiled Triton kernels compute ``out = alpha * (a @ b) + beta * bias`` with
an fp32 accumulator (``mm`` is the case without a bias):

* ``_addmm_kernel`` reads every operand through its strides, so transposed
  and sliced matrices need no copy; it runs everywhere, including Triton's
  interpreter. It can also split K (partial sums, then ``_sum_splits_kernel``).
* ``_addmm_tma_kernel`` loads the A and B tiles and stores C with Hopper's
  tensor-memory-accelerator (host-side tensor descriptors). It takes large
  products on GPUs of compute capability 9 and newer when A and C are
  16-byte aligned row-major and B row- or column-major (see ``_use_tma``).

On a GPU, fp32 tiles are multiplied as three TF32 products (``FP32_PRECISION``).
Problems under ``AUTOTUNE_MIN_FLOPS`` use one heuristic tile instead of the
autotuner: tuning costs far more than a small product. Larger ones are tuned
once per shape with ``_tune`` timing, and those with few output tiles also
choose between splitting K and not (``_split_plan``); both choices are kept
on disk (``_tune.Tuner``), so a later process launches at once.

The module is longer than most because the house rule is one kernel family
per module: both kernels, their tile and split-K heuristics and the tuning
lists share one calling convention and are changed together, so they are
kept in one file rather than split.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect
from dataclasses import dataclass, field

import torch
import triton
import triton.language as tl

from .._device import interpreted
from . import _tune
from ._launch import cdiv, device_index, multiprocessors, next_pow2

__all__ = ["mm", "addmm", "addmm_"]

_SUPPORTED = (torch.float32, torch.float16, torch.bfloat16)
# Below this many multiply-adds (M * N * K) a product is launched with one
# heuristic tile rather than autotuned.
AUTOTUNE_MIN_FLOPS = 1 << 24
# fp32 products on tensor-core GPUs: three TF32 products per tile (the big
# and small halves of each operand, the small x small term dropped), about
# 2^-21 relative error per product, where torch's fp32 GEMM (no TF32) runs on
# the far slower CUDA cores. "ieee" would match torch's arithmetic exactly.
FP32_PRECISION = "tf32x3"
# TF32 tensor-core products read both tiles K-major (A row-major, B column-
# major); other layouts run slower (H200, 4096^3: 55 against 80-88 TFLOP/s).
# So an fp32 product at least this wide in the other dimension first makes a
# K-major copy of the operand: n^2 bytes against n^3 work. Narrower (skinny,
# memory-bound) products keep their layout.
KMAJOR_COPY_MIN = 512
# Dtypes that go through the TMA kernel (see ``_use_tma``).
TMA_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


# Tuning list for Hopper-class GPUs, as (BLOCK_M, BLOCK_N, BLOCK_K, stages,
# warps); the tuner keys on the problem size, dtype and layout. Large square
# problems want 128x256 or 256x128 tiles with 8 warps and a 3-4 stage
# pipeline; the smaller tiles keep skinny or mid-size problems from leaving
# multiprocessors idle.
_TILES = [
    (128, 256, 64, 3, 8),
    (256, 128, 64, 3, 8),
    (128, 256, 64, 4, 8),
    (128, 128, 64, 4, 8),
    (128, 128, 64, 4, 4),
    (128, 128, 32, 4, 4),
    (64, 256, 32, 4, 4),
    (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4),
    (64, 64, 32, 5, 2),
    # float32 (ieee dot) keeps fewer operands in shared memory per stage.
    (128, 128, 32, 3, 8),
    (64, 128, 64, 3, 4),
]


@functools.cache
def _tile_meta(tile: tuple[int, int, int, int, int]) -> dict:
    """The launch keywords of a tile (shared: callers only unpack it)."""
    bm, bn, bk, stages, warps = tile
    return {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "num_stages": stages, "num_warps": warps}


@triton.jit
def _tile_coords(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of this program in grouped order: GROUP_M consecutive
    programs walk down a column of tiles, so the B tiles they share stay in
    L2 while A tiles stream."""
    pid = tl.program_id(0)
    n_tiles_m = tl.cdiv(M, BLOCK_M)
    n_tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * n_tiles_n
    first_m = (pid // tiles_per_group) * GROUP_M
    group_rows = min(n_tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % tiles_per_group) % group_rows
    pid_n = (pid % tiles_per_group) // group_rows
    return pid_m, pid_n


@triton.jit
def _epilogue(acc, rows, cols, M, N, bias_ptr, bias_row_stride, bias_col_stride, alpha, beta, HAS_BIAS: tl.constexpr):
    """alpha * acc (+ beta * bias[rows, cols]), in fp32."""
    acc = acc * alpha
    if HAS_BIAS:
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None].to(tl.int64) * bias_row_stride + cols[None, :].to(tl.int64) * bias_col_stride
        acc += beta * tl.load(bias_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    return acc


@triton.jit
def _addmm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    bias_ptr,
    partials_ptr,
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
    K_TILES_PER_SPLIT,
    HAS_BIAS: tl.constexpr,
    SPLIT_K: tl.constexpr,
    EVEN_K: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """c[m, n] = alpha * sum_k a[m, k] * b[k, n] + beta * bias[m, n]
    (bias term only when HAS_BIAS), accumulated in fp32; any strides.

    With SPLIT_K, program (tile, s) sums only the K tiles
    [s * K_TILES_PER_SPLIT, (s + 1) * K_TILES_PER_SPLIT) and stores that fp32
    partial sum, unscaled, at partials[s] (contiguous (splits, M, N));
    ``_sum_splits_kernel`` finishes the product."""
    pid_m, pid_n = _tile_coords(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    k_first = tl.program_id(1) * K_TILES_PER_SPLIT
    k_last = tl.minimum(k_first + K_TILES_PER_SPLIT, tl.cdiv(K, BLOCK_K))
    # Row/column indices wrap around (% M, % N): loads stay in bounds without
    # a mask, and the ragged edge is cut off by the masked store instead.
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    a_rows = rows % M
    b_cols = cols % N
    ks = tl.arange(0, BLOCK_K)
    first_ks = (k_first * BLOCK_K + ks).to(tl.int64)
    a_ptrs = a_ptr + a_rows[:, None].to(tl.int64) * a_row_stride + first_ks[None, :] * a_col_stride
    b_ptrs = b_ptr + first_ks[:, None] * b_row_stride + b_cols[None, :].to(tl.int64) * b_col_stride

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_first, k_last):
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

    mask = (rows[:, None] < M) & (cols[None, :] < N)
    if SPLIT_K:
        offs = (tl.program_id(1) * M + rows[:, None]).to(tl.int64) * N + cols[None, :]
        tl.store(partials_ptr + offs, acc, mask=mask)
    else:
        acc = _epilogue(acc, rows, cols, M, N, bias_ptr, bias_row_stride, bias_col_stride, alpha, beta, HAS_BIAS)
        offs = rows[:, None].to(tl.int64) * c_row_stride + cols[None, :].to(tl.int64) * c_col_stride
        tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _sum_splits_kernel(
    partials_ptr,
    c_ptr,
    bias_ptr,
    M,
    N,
    SPLITS,
    c_row_stride,
    c_col_stride,
    bias_row_stride,
    bias_col_stride,
    alpha,
    beta,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """c = alpha * (sum of the SPLITS partial products) + beta * bias, the
    partials added in split order, so the result does not vary run to run."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None].to(tl.int64) * N + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for s in range(SPLITS):
        acc += tl.load(partials_ptr + s * M * N + offs, mask=mask, other=0.0)
    acc = _epilogue(acc, rows, cols, M, N, bias_ptr, bias_row_stride, bias_col_stride, alpha, beta, HAS_BIAS)
    offs = rows[:, None].to(tl.int64) * c_row_stride + cols[None, :].to(tl.int64) * c_col_stride
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _addmm_tma_kernel(
    a_desc,
    b_desc,
    c_desc,
    bias_ptr,
    M,
    N,
    K,
    bias_row_stride,
    bias_col_stride,
    alpha,
    beta,
    HAS_BIAS: tl.constexpr,
    A_COL_MAJOR: tl.constexpr,
    B_COL_MAJOR: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """The same product with TMA tile loads and stores. A column-major
    operand is described as its (contiguous) transpose and its tiles are
    transposed in registers; out-of-range tile parts load as zeros and are
    clipped on store."""
    pid_m, pid_n = _tile_coords(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        off_k = k * BLOCK_K
        if A_COL_MAJOR:
            a = a_desc.load([off_k, off_m]).T
        else:
            a = a_desc.load([off_m, off_k])
        if B_COL_MAJOR:
            b = b_desc.load([off_n, off_k]).T
        else:
            b = b_desc.load([off_k, off_n])
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
    rows = off_m + tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    acc = _epilogue(acc, rows, cols, M, N, bias_ptr, bias_row_stride, bias_col_stride, alpha, beta, HAS_BIAS)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


# Tile choices of the tuned kernels, in memory: problem key -> tile. The
# tuner keeps them on disk too (see ``_tune.Tuner``).
_tiles: dict[tuple, tuple] = {}


@functools.cache
def _kernels_tag() -> str:
    """A digest of the kernels' source and the tile list: the tuning files
    are named after it, so an edited kernel is tuned afresh (an edited
    launcher is not)."""
    kernels = (_tile_coords, _epilogue, _addmm_kernel, _sum_splits_kernel, _addmm_tma_kernel)
    text = "".join(inspect.getsource(k.fn) for k in kernels) + repr(_TILES) + repr(_SPLIT_TILES) + repr(_SPLITS)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _tuning_name(kernel: str) -> str:
    return f"{kernel}-{_kernels_tag()}"


@functools.cache
def _device_name(index: int) -> str:
    return torch.cuda.get_device_name(index)


def _device_of(t: torch.Tensor) -> str:
    """The name the tuning cache files ``t``'s device under."""
    return _device_name(device_index(t.device)) if t.is_cuda else "cpu-interpreter"


# Split-K: a product with fewer output tiles than the GPU has multiprocessors
# (skinny, or short like 1024^3) leaves most of it idle at one program per
# tile. Splitting K over several programs per tile fills it; each stores an
# fp32 partial sum and ``_sum_splits_kernel`` adds them. Whether to split, how
# far and with which tile is timed per problem (``_split_plan``) against the
# unsplit kernel: the tiles below, by element size (an fp32 tile holds half
# the K per byte), and these split counts.
_SPLIT_TILES = {
    2: [(64, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 128, 64, 4, 8), (16, 128, 128, 4, 4), (128, 16, 128, 4, 4)],
    4: [(64, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 128, 32, 3, 8), (16, 128, 64, 4, 4), (128, 16, 64, 4, 4)],
}
_SPLITS = (2, 4, 8, 16)
_SUM_BLOCK_M, _SUM_BLOCK_N = 32, 64
# Problem key -> (tile, splits), or None for the unsplit kernel.
_split_plans: dict[tuple, tuple[tuple, int] | None] = {}
# Launch plans by everything the launch derives from the operands (sizes,
# strides, dtype, device, alignment) and the limits it reads: a repeated call
# is one lookup and the launch (host time per call, docs/performance.md).
_plans: dict[tuple, _Plan] = {}
_MAX_PLANS = 4096


def _heuristic_meta(M: int, N: int, K: int) -> dict:
    """One tile for problems not worth tuning: as large as the problem, capped
    at 64 (under the interpreter each program costs Python time). Shared
    between calls: callers only unpack it."""
    return _heuristic_meta_for(M, N, K, interpreted)


@functools.lru_cache(maxsize=1024)
def _heuristic_meta_for(M: int, N: int, K: int, interpreted: bool) -> dict:
    def fit(n: int, cap: int) -> int:
        return max(16, min(cap, next_pow2(n)))

    block_k = fit(K, 64 if interpreted else 32)
    meta = {"BLOCK_M": fit(M, 64), "BLOCK_N": fit(N, 64), "BLOCK_K": block_k, "GROUP_M": 8}
    if not interpreted:
        meta.update(num_warps=4, num_stages=3)
    return meta


def _check_operands(name: str, mat1: torch.Tensor, mat2: torch.Tensor) -> tuple[int, int]:
    """Validate the two matrices; returns the product's shape (M, N)."""
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
    return mat1.shape[0], mat2.shape[1]


def _check_input_dtype(name: str, input: torch.Tensor, mat1: torch.Tensor) -> None:
    if input.dtype != mat1.dtype:
        raise RuntimeError(f"{name}: input dtype {input.dtype} differs from the matrices' dtype {mat1.dtype}")


def _tma_view(t: torch.Tensor) -> tuple[torch.Tensor, bool] | None:
    """(contiguous 2-D view, is_column_major) for a TMA descriptor, or None
    when ``t``'s layout is not 16-byte aligned row- or column-major."""
    size = t.element_size()
    if t.data_ptr() % 16:
        return None
    if t.stride(1) == 1 and t.stride(0) >= max(t.shape[1], 1) and (t.stride(0) * size) % 16 == 0:
        return t, False
    if t.stride(0) == 1 and t.stride(1) >= max(t.shape[0], 1) and (t.stride(1) * size) % 16 == 0:
        return t.t(), True
    return None


@functools.cache
def _has_tma(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index)[0] >= 9


def _use_tma(mat1: torch.Tensor, mat2: torch.Tensor, out: torch.Tensor, tuned: bool) -> bool:
    """TMA for autotuned 16-bit products on Hopper and newer, when the layouts
    allow it (tests force it under the interpreter, which runs descriptors).

    Measured on an H200 at 4096^3 (torch 2.11, triton 3.6), speed relative
    to torch.mm: bf16 with A row-major, TMA 0.91-0.96 (B row-major) and 0.87-0.88
    (B column-major) against 0.83 / 0.76 for the pointer kernel; with A
    column-major the pointer kernel wins (0.96 against 0.86), so such A stays
    on it. fp32 (3xTF32): TMA 1.13 / 1.74 against 1.07 / 1.57.
    """
    if not tuned or mat1.dtype not in TMA_DTYPES or not mat1.is_cuda or mat1.shape[1] == 0:
        return False
    if not _has_tma(device_index(mat1.device)):
        return False
    views = [_tma_view(t) for t in (mat1, mat2, out)]
    return all(v is not None for v in views) and not views[0][1] and not views[2][1]


@functools.cache
def _has_tf32(device_index: int) -> bool:
    """TF32 tensor cores: NVIDIA compute capability 8.0 and newer."""
    return torch.version.hip is None and torch.cuda.get_device_capability(device_index)[0] >= 8


def _dot_precision(t: torch.Tensor, upcast: bool) -> str:
    """How tl.dot multiplies the fp32 tiles of ``t``'s product (16-bit ones
    ignore it): ``FP32_PRECISION`` where TF32 tensor cores exist, else exact."""
    if upcast:  # bf16 widened to fp32 under the interpreter: exact products
        return "ieee"
    if t.dtype != torch.float32:
        return "tf32"
    if interpreted or not t.is_cuda or not _has_tf32(device_index(t.device)):
        return "ieee"
    return FP32_PRECISION


def _tuned_tile(kernel: str, key: tuple, out: torch.Tensor, run, restore: bool) -> tuple:
    """The tile of ``_TILES`` that runs problem ``key`` fastest: remembered
    in memory and on disk, timed once (``run(meta)`` launches one tile)."""
    tile = _tiles.get(key)
    if tile is None:
        tile = _tune.tuner().choose(
            _tuning_name(kernel), _device_of(out), key, _TILES, lambda t: functools.partial(run, _tile_meta(t)),
            restore=out if restore else None,
        )  # fmt: skip
        _tiles[key] = tile
    return tile


def _problem_key(mat1, mat2, common: dict, *flags: bool) -> tuple:
    """What a tile choice depends on, as JSON values: sizes, dtype, the dot
    precision, bias, and the kernel's layout flags."""
    M, K = mat1.shape
    return (M, mat2.shape[1], K, str(mat1.dtype)[6:], common["DOT_PRECISION"], common["HAS_BIAS"], *flags)


@functools.cache
def _tensor_descriptor():
    """Triton's host-side TMA descriptor class, imported on the first TMA
    launch (an import statement in the launch costs host time every call)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    return TensorDescriptor


@dataclass(frozen=True)
class _Plan:
    """How one product launches, all but its tensors: worked out on the first
    call of a layout (tuning included), then reused by every call of it."""

    kind: str  # "tma", "pointer" or "split"
    grid: tuple[int, ...]
    meta: dict  # the kernel's keywords (shared: callers only unpack it)
    kmajor: tuple[bool, bool] = (False, False)  # K-major copies of mat1 / mat2 first (see _k_major)
    col_major: tuple[bool, bool] = (False, False)  # tma: A / B read through their transposed (row-major) views
    blocks: tuple = ()  # tma: the block shapes of the A, B and C descriptors
    splits: int = 1  # split: partial products over slices of K
    k_tiles_per_split: int = 0
    sum_grid: tuple[int, ...] = ()
    sum_meta: dict = field(default_factory=dict)

    def run(self, mat1, mat2, out, bias_arg, alpha, beta) -> None:
        """Launch this plan on operands of the layout it was made for."""
        if self.kmajor[1]:
            mat2 = mat2.t().contiguous().t()
        if self.kmajor[0]:
            mat1 = mat1.contiguous()
        M, K = mat1.shape
        N = mat2.shape[1]
        if self.kind == "tma":
            a_t, b_t = self.col_major
            views = (mat1.t() if a_t else mat1, mat2.t() if b_t else mat2, out)
            make = _tensor_descriptor()
            descs = [make(t, t.shape, t.stride(), list(block)) for t, block in zip(views, self.blocks)]
            _addmm_tma_kernel[self.grid](
                *descs, bias_arg, M, N, K, bias_arg.stride(0), bias_arg.stride(1), float(alpha), float(beta), **self.meta
            )
        elif self.kind == "pointer":
            # No partials (the output stands in for the unused pointer); one split of all K tiles.
            _addmm_kernel[self.grid](*_pointer_args(mat1, mat2, out, bias_arg, out, alpha, beta, K), **self.meta)
        else:
            partials = torch.empty((self.splits, M, N), dtype=torch.float32, device=out.device)
            _addmm_kernel[self.grid](
                *_pointer_args(mat1, mat2, out, bias_arg, partials, alpha, beta, self.k_tiles_per_split), **self.meta
            )
            _sum_splits_kernel[self.sum_grid](
                partials, out, bias_arg, M, N, self.splits, out.stride(0), out.stride(1),
                bias_arg.stride(0), bias_arg.stride(1), float(alpha), float(beta), **self.sum_meta,
            )  # fmt: skip


def _tma_blocks(meta: dict, a_t: bool, b_t: bool) -> tuple:
    """The block shapes of the A, B and C descriptors for a tile (A and B
    either way round, C row-major)."""
    bm, bn, bk = meta["BLOCK_M"], meta["BLOCK_N"], meta["BLOCK_K"]
    return ((bk, bm) if a_t else (bm, bk), (bn, bk) if b_t else (bk, bn), (bm, bn))


def _direct_plan(mat1, mat2, out, bias_arg, alpha, beta, common: dict, tuned: bool, restore: bool) -> _Plan:
    """One program per output tile: the TMA kernel where it pays, else the
    pointer kernel; the tile tuned when ``tuned`` (``restore``: ``out`` is
    also the bias and is put back after each timed trial)."""
    M, K = mat1.shape
    N = mat2.shape[1]

    def grid(meta: dict) -> tuple[int]:
        return (cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"]),)

    if _use_tma(mat1, mat2, out, tuned):
        a_t, b_t = _tma_view(mat1)[1], _tma_view(mat2)[1]
        flags = dict(A_COL_MAJOR=a_t, B_COL_MAJOR=b_t, **common)

        def tma(meta: dict) -> _Plan:
            return _Plan("tma", grid(meta), {**flags, **meta}, col_major=(a_t, b_t), blocks=_tma_blocks(meta, a_t, b_t))

        if not tuned:
            return tma(_heuristic_meta(M, N, K))
        key = _problem_key(mat1, mat2, common, a_t, b_t)
        run = lambda meta: tma(meta).run(mat1, mat2, out, bias_arg, alpha, beta)  # noqa: E731  (a tuning trial)
        return tma(_tile_meta(_tuned_tile("addmm_tma", key, out, run, restore)))

    def pointer(meta: dict) -> _Plan:
        return _Plan("pointer", grid(meta), {"SPLIT_K": False, "EVEN_K": K % meta["BLOCK_K"] == 0, **common, **meta})

    if not tuned:
        return pointer(_heuristic_meta(M, N, K))
    key = _problem_key(mat1, mat2, common, mat1.stride(1) == 1, mat2.stride(1) == 1)
    run = lambda meta: pointer(meta).run(mat1, mat2, out, bias_arg, alpha, beta)  # noqa: E731  (a tuning trial)
    return pointer(_tile_meta(_tuned_tile("addmm", key, out, run, restore)))


def _direct(mat1, mat2, out, bias_arg, alpha, beta, common: dict, tuned: bool, restore: bool) -> None:
    """Launch the product one program per output tile (see :func:`_direct_plan`)."""
    _direct_plan(mat1, mat2, out, bias_arg, alpha, beta, common, tuned, restore).run(mat1, mat2, out, bias_arg,
                                                                                   alpha, beta)


def _pointer_args(mat1, mat2, out, bias_arg, partials, alpha, beta, k_tiles_per_split: int) -> tuple:
    """The positional arguments of ``_addmm_kernel``, up to K_TILES_PER_SPLIT."""
    M, K = mat1.shape
    N = mat2.shape[1]
    return (
        mat1, mat2, out, bias_arg, partials, M, N, K,
        *mat1.stride(), *mat2.stride(), *out.stride(), *bias_arg.stride(),
        float(alpha), float(beta), k_tiles_per_split,
    )  # fmt: skip


def _split_launch(mat1, mat2, common: dict, tile: tuple, splits: int) -> _Plan:
    """The product as ``splits`` partial products over slices of K, then
    their sum (see ``_SPLIT_TILES``)."""
    M, K = mat1.shape
    N = mat2.shape[1]
    bm, bn, bk, stages, warps = tile
    meta = {"SPLIT_K": True, "EVEN_K": K % bk == 0, **common, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
            "GROUP_M": 8, "num_stages": stages, "num_warps": warps}
    return _Plan(
        "split", (cdiv(M, bm) * cdiv(N, bn), splits), meta, splits=splits, k_tiles_per_split=cdiv(cdiv(K, bk), splits),
        sum_grid=(cdiv(M, _SUM_BLOCK_M), cdiv(N, _SUM_BLOCK_N)),
        sum_meta={"HAS_BIAS": common["HAS_BIAS"], "BLOCK_M": _SUM_BLOCK_M, "BLOCK_N": _SUM_BLOCK_N},
    )  # fmt: skip


def _split(mat1, mat2, out, bias_arg, alpha, beta, common: dict, tile: tuple, splits: int) -> None:
    """Launch the product split over K (see :func:`_split_launch`)."""
    _split_launch(mat1, mat2, common, tile, splits).run(mat1, mat2, out, bias_arg, alpha, beta)


def _split_candidates(mat1: torch.Tensor, M: int, N: int, K: int) -> list[tuple[tuple, int]]:
    """(tile, splits) pairs worth timing: tiles no larger than the problem,
    at least two K tiles per split, at most 8 programs per multiprocessor."""
    sms = multiprocessors(mat1.device)
    plans = []
    for tile in _SPLIT_TILES[mat1.element_size()]:
        bm, bn, bk = tile[:3]
        if bm > max(16, next_pow2(M)) or bn > max(16, next_pow2(N)):
            continue
        tiles = cdiv(M, bm) * cdiv(N, bn)
        for splits in _SPLITS:
            if cdiv(K, bk) >= 2 * splits and tiles * splits <= 8 * sms and splits * M * N < 2**31:
                plans.append((tile, splits))
    return plans


def _split_key(mat1: torch.Tensor, mat2: torch.Tensor, has_bias: bool) -> tuple:
    """What a split plan depends on: shape, dtype, layouts, bias, device."""
    return (*mat1.shape, mat2.shape[1], mat1.dtype, mat1.stride(1) == 1, mat2.stride(1) == 1, has_bias, mat1.device)


def _split_plan(mat1, mat2, out, bias_arg, alpha, beta, common: dict, restore: bool) -> tuple[tuple, int] | None:
    """The fastest way to run a product with few output tiles: (tile, splits)
    or None for the unsplit kernel; timed once per problem and remembered in
    memory and on disk."""
    M, K = mat1.shape
    N = mat2.shape[1]
    key = _split_key(mat1, mat2, common["HAS_BIAS"])
    if key not in _split_plans:
        plans = _split_candidates(mat1, M, N, K)
        if not plans:
            _split_plans[key] = None
            return None

        def call(plan):
            if plan is None:
                return lambda: _direct(mat1, mat2, out, bias_arg, alpha, beta, common, True, restore)
            return functools.partial(_split, mat1, mat2, out, bias_arg, alpha, beta, common, *plan)

        disk_key = (M, N, K, str(mat1.dtype)[6:], *key[4:7])
        _split_plans[key] = _tune.tuner().choose(
            _tuning_name("addmm_split_k"), _device_of(out), disk_key, [None, *plans], call,
            restore=out if restore else None,
        )  # fmt: skip
    return _split_plans[key]


def _few_tiles(mat1: torch.Tensor, M: int, N: int) -> bool:
    """Fewer 128 x 128 output tiles than the GPU has multiprocessors."""
    return cdiv(M, 128) * cdiv(N, 128) < multiprocessors(mat1.device)


def _k_major(mat1: torch.Tensor, mat2: torch.Tensor, precision: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The operands as the fp32 product reads them: on TF32 tensor cores,
    K-major copies of large enough ones (see ``KMAJOR_COPY_MIN``)."""
    if not precision.startswith("tf32") or mat1.dtype != torch.float32:
        return mat1, mat2
    if mat1.shape[0] >= KMAJOR_COPY_MIN and mat2.stride(0) != 1:
        mat2 = mat2.t().contiguous().t()
    if mat2.shape[1] >= KMAJOR_COPY_MIN and mat1.stride(1) != 1:
        mat1 = mat1.contiguous()
    return mat1, mat2


def _on_device(t: torch.Tensor):
    """Make ``t``'s GPU current for the launches (a context switch costs host
    time, so only when another one is current)."""
    if t.is_cuda and t.device.index is not None and t.device.index != torch.cuda.current_device():
        return torch.cuda.device(t.device)
    return contextlib.nullcontext()


def _launch(
    mat1: torch.Tensor,
    mat2: torch.Tensor,
    out: torch.Tensor,
    bias: torch.Tensor | None,
    alpha: float,
    beta: float,
    restore: bool = False,
) -> torch.Tensor:
    """out = alpha * mat1 @ mat2 (+ beta * bias), bias already shaped (M, N).
    ``restore``: ``out`` is also the bias (addmm_), so tuning must put it back."""
    if alpha == 0 and mat1.dtype == torch.float32:
        # As torch's fp32 (BLAS) kernels, CPU and CUDA: alpha = 0 skips the
        # product, so inf and nan in the matrices do not reach the result
        # (0 * inf would be nan). torch's 16-bit CPU kernels multiply it out,
        # so 16-bit products keep it. An empty K gives the skip: a zero
        # accumulator, then beta * bias.
        mat1, mat2 = mat1[:, :0], mat2[:0, :]
    M, K = mat1.shape
    N = mat2.shape[1]
    if M == 0 or N == 0:
        return out
    has_bias = bias is not None
    bias_arg = bias if has_bias else out  # any pointer; never read without HAS_BIAS
    key = (
        mat1.shape, mat2.shape, mat1.stride(), mat2.stride(), out.stride(), mat1.dtype, mat1.device, has_bias, restore,
        mat1.data_ptr() % 16, mat2.data_ptr() % 16, out.data_ptr() % 16,
        interpreted, AUTOTUNE_MIN_FLOPS, KMAJOR_COPY_MIN, FP32_PRECISION, _use_tma,
    )  # fmt: skip
    with _on_device(mat1):
        plan = _plans.get(key)
        if plan is None:
            if len(_plans) >= _MAX_PLANS:  # a sweep over many shapes: start afresh rather than grow
                _plans.clear()
            plan = _plans[key] = _make_plan(mat1, mat2, out, bias_arg, alpha, beta, has_bias, restore)
        plan.run(mat1, mat2, out, bias_arg, alpha, beta)
    return out


def _make_plan(mat1, mat2, out, bias_arg, alpha, beta, has_bias: bool, restore: bool) -> _Plan:
    """The launch of a product layout, tuned where it is large enough."""
    M, K = mat1.shape
    N = mat2.shape[1]
    # Triton's interpreter multiplies bf16 tiles as their raw uint16 bits
    # (triton 3.9), so there the tiles are widened to fp32 first.
    upcast = interpreted and mat1.dtype == torch.bfloat16
    common = dict(HAS_BIAS=has_bias, DOT_PRECISION=_dot_precision(mat1, upcast), UPCAST=upcast)
    tuned = M * N * K >= AUTOTUNE_MIN_FLOPS and not interpreted
    major1, major2 = _k_major(mat1, mat2, common["DOT_PRECISION"])
    kmajor = (major1 is not mat1, major2 is not mat2)
    args = (major1, major2, out, bias_arg, alpha, beta, common)
    split = _split_plan(*args, restore) if tuned and _few_tiles(major1, M, N) else None
    plan = _direct_plan(*args, tuned, restore) if split is None else _split_launch(major1, major2, common, *split)
    return dataclasses.replace(plan, kmajor=kmajor)


def mm(input: torch.Tensor, mat2: torch.Tensor) -> torch.Tensor:
    """Matrix product ``input @ mat2`` of an (M, K) and a (K, N) matrix.

    Returns a new contiguous (M, N) tensor of the inputs' dtype (float32,
    float16 or bfloat16), accumulated in fp32. Raises RuntimeError naming both
    shapes when they cannot be multiplied.
    """
    out = torch.empty(_check_operands("mm", input, mat2), dtype=input.dtype, device=input.device)
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
    propagate), and for float32 ``alpha == 0`` ignores the matrices. Returns a new (M, N) tensor of the matrices' dtype. Raises
    RuntimeError naming the shapes on a mismatch.
    """
    M, N = _check_operands("addmm", mat1, mat2)
    _check_input_dtype("addmm", input, mat1)
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
    M, N = _check_operands("addmm_", mat1, mat2)
    if tuple(input.shape) != (M, N):
        raise RuntimeError(
            f"addmm_: input of shape {tuple(input.shape)} must have the product's shape ({M}, {N}) "
            f"of {tuple(mat1.shape)} @ {tuple(mat2.shape)}"
        )
    _check_input_dtype("addmm_", input, mat1)
    if any(s == 0 and n > 1 for s, n in zip(input.stride(), input.shape)):
        raise RuntimeError("addmm_: input has overlapping elements (a zero stride); it cannot be written in place")
    storage = input.untyped_storage().data_ptr()
    aliased = storage in (mat1.untyped_storage().data_ptr(), mat2.untyped_storage().data_ptr())
    if aliased:
        # Other programs would read mat1/mat2 tiles this launch overwrites:
        # compute out of place, then copy back.
        result = _launch(mat1, mat2, torch.empty_like(input), input if beta != 0 else None, alpha, beta)
        return input.copy_(result)
    return _launch(mat1, mat2, input, input if beta != 0 else None, alpha, beta, restore=True)
