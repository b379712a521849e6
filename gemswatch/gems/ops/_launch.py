"""Launch heuristics and layout helpers shared by the gems kernels.

Block sizes, warp counts and the widest row one program holds in registers
live here, so every kernel family tunes from one place. The module-level
limits are read at call time: tests shrink them to reach the looped paths
with small shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _device  # noqa: F401  (sets TRITON_INTERPRET before triton loads)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

__all__ = [
    "MAX_FUSED_SIZE",
    "LOOP_BLOCK_SIZE",
    "TILE_SIZE",
    "TARGET_PROGRAMS",
    "RowLaunch",
    "row_launch",
    "column_launch",
    "pointwise_launch",
    "num_warps_for",
    "dense_permutation",
    "tl_dtype",
    "needs_int64",
]

# Widest row (elements) that one program keeps in registers for a single-pass
# softmax / norm; wider rows take the looped kernels.
MAX_FUSED_SIZE = 16384
# Chunk width of the looped kernels (never above MAX_FUSED_SIZE).
LOOP_BLOCK_SIZE = 4096
# Elements per program tile when several short rows share one program.
TILE_SIZE = 4096
# About how many programs keep an H200 (132 SMs) busy; reductions with fewer
# output tiles than this split the reduced axis into partial sums.
TARGET_PROGRAMS = 528


def num_warps_for(tile: int) -> int:
    """Warps for a program touching ``tile`` elements: ~8-16 per thread."""
    if tile >= 16384:
        return 16
    if tile >= 4096:
        return 8
    if tile >= 1024:
        return 4
    return 2


@dataclass(frozen=True)
class RowLaunch:
    """How to cover an (n_rows, n_cols) problem reduced along the columns."""

    block_rows: int  # BLOCK_M: rows per program
    block_cols: int  # BLOCK_N: the whole row when fused, else one chunk
    fused: bool  # the whole row fits one block (single pass)
    num_warps: int

    def grid(self, n_rows: int) -> tuple[int]:
        return (triton.cdiv(n_rows, self.block_rows),)


def row_launch(n_rows: int, n_cols: int) -> RowLaunch:
    """Tile for a row-wise kernel: short rows are packed several per program;
    rows wider than MAX_FUSED_SIZE are walked in LOOP_BLOCK_SIZE chunks."""
    width = triton.next_power_of_2(max(n_cols, 1))
    if width <= MAX_FUSED_SIZE:
        block_rows = min(triton.next_power_of_2(max(n_rows, 1)), max(1, TILE_SIZE // width))
        return RowLaunch(block_rows, width, True, num_warps_for(block_rows * width))
    block = min(LOOP_BLOCK_SIZE, MAX_FUSED_SIZE)
    return RowLaunch(1, block, False, num_warps_for(block))


def column_launch(n_reduce: int, n_inner: int) -> tuple[int, int, bool, int]:
    """Tile for an (outer, n_reduce, n_inner) problem reduced along the middle
    axis with the inner axis contiguous: returns (BLOCK_N, BLOCK_K, fused,
    num_warps); fused means the whole reduced axis fits one tile."""
    block_k = min(triton.next_power_of_2(max(n_inner, 1)), 128)
    width = triton.next_power_of_2(max(n_reduce, 1))
    if width * block_k <= MAX_FUSED_SIZE:
        return width, block_k, True, num_warps_for(width * block_k)
    block_n = max(1, min(LOOP_BLOCK_SIZE, MAX_FUSED_SIZE) // block_k)
    return block_n, block_k, False, num_warps_for(block_n * block_k)


def pointwise_launch(n_elements: int) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps) for an elementwise kernel: 8-16 elements per
    thread, so fp32/fp16 loads vectorise to 128 bits."""
    if n_elements >= 1 << 22:
        return 4096, 8
    return 1024, 4


def dense_permutation(t: torch.Tensor) -> list[int] | None:
    """The dim order that makes a non-overlapping, dense ``t`` contiguous
    (``t.permute(order).is_contiguous()``), or None if ``t`` has gaps or
    overlaps (slices, expands)."""
    order = sorted(range(t.dim()), key=lambda d: (-t.stride(d), -t.size(d)))
    expected = 1
    for d in reversed(order):
        if t.size(d) == 1:
            continue
        if t.stride(d) != expected:
            return None
        expected *= t.size(d)
    return order


_TL_DTYPES = {
    torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16,
    torch.float32: tl.float32,
    torch.float64: tl.float64,
    torch.int8: tl.int8,
    torch.uint8: tl.uint8,
    torch.int16: tl.int16,
    torch.int32: tl.int32,
    torch.int64: tl.int64,
    torch.bool: tl.int1,
}


def tl_dtype(dtype: torch.dtype):
    """The Triton dtype for a torch dtype; TypeError if Triton has none."""
    try:
        return _TL_DTYPES[dtype]
    except KeyError as e:
        raise TypeError(f"gems kernels do not support dtype {dtype}") from e


def needs_int64(t: torch.Tensor) -> bool:
    """True if some element offset of ``t`` may not fit in int32."""
    extent = sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if s > 0)
    return max(extent, t.numel()) >= 2**31 - 2 * TILE_SIZE
