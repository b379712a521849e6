"""Launch heuristics and layout helpers shared by the gems kernels.

Block sizes, warp counts and the widest row one program holds in registers
live here, so every kernel family tunes from one place. The module-level
limits are read at call time: tests shrink them to reach the looped paths
with small shapes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton.language as tl

__all__ = [
    "MAX_FUSED_SIZE",
    "LOOP_BLOCK_SIZE",
    "TILE_SIZE",
    "REDUCE_BLOCK_SIZE",
    "COLUMN_BLOCK",
    "COLUMN_WARPS",
    "COLUMN_STAGES",
    "COLUMN_TARGET_PROGRAMS",
    "COLUMN_SOFTMAX_TILE",
    "COLUMN_SOFTMAX_BLOCK_K",
    "COLUMN_SOFTMAX_PROGRAMS_PER_SM",
    "COLUMN_SOFTMAX_WARPS",
    "TARGET_PROGRAMS",
    "PIPELINE_MIN_BYTES",
    "PIPELINE_STAGES",
    "PIPELINE_SMEM_RESERVE",
    "RowLaunch",
    "row_launch",
    "pipelined_grid",
    "multiprocessors",
    "shared_memory",
    "device_index",
    "ColumnLaunch",
    "column_launch",
    "pointwise_launch",
    "ReduceLaunch",
    "reduce_launch",
    "reduce_limits",
    "num_warps_for",
    "cdiv",
    "next_pow2",
    "dense_permutation",
    "dense_order",
    "is_contiguous",
    "inverse_permutation",
    "tl_dtype",
    "exact_cast",
    "needs_int64",
    "offsets_need_int64",
]

# Widest row (elements) that one program keeps in registers for a single-pass
# softmax / norm; wider rows take the looped kernels, which read the row
# twice. 32768 (a vocabulary-sized row) still fits: 32 fp32 values per
# thread at 32 warps.
MAX_FUSED_SIZE = 32768
# Chunk width of the looped kernels (never above MAX_FUSED_SIZE).
LOOP_BLOCK_SIZE = 4096
# Chunk width of the reduction kernels along the reduced axis when many rows
# share a tile (few rows get longer chunks, up to TILE_SIZE). H200, fp32 sum
# of [1024, 65536] over dim -1: 4096 reaches 84 % of copy bandwidth, 1024 77 %.
REDUCE_BLOCK_SIZE = 4096
# Elements per program tile when several short rows share one program.
TILE_SIZE = 4096
# Columns per program when a reduction runs over a middle axis (n_inner > 1).
COLUMN_BLOCK = 256
# Most warps of a column program: 4 beat 8 on an H200 (fp32 8192x8192 over dim 0).
COLUMN_WARPS = 4
# Chunks a column program prefetches into shared memory, and the programs a
# split column reduction aims for: with prefetch, 4 programs per H200
# multiprocessor rather than 8. H200, fp32 sum and amax of [65536, 1024] over
# dim 0: 84-85 % of copy bandwidth, against 72-81 % with 8 programs and no
# prefetch. (Row programs read whole contiguous chunks and gain nothing.)
COLUMN_STAGES = 2
COLUMN_TARGET_PROGRAMS = 528
# Softmax along a middle axis (dim 0 of a matrix, say): elements per chunk,
# columns per program, the programs per multiprocessor a split aims for, and
# the most warps. H200, softmax and log_softmax over dim 0 of [1024, 1024],
# [4096, 4096] and [8192, 8192] in fp16 and fp32 (scripts/tune_sweep.py
# --only colsoftmax, 36 variants): these are within 9 % of each case's best
# variant (geomean 4 %); 128 columns per program with chunks of 4096 were up
# to 70 % slower (log_softmax fp32 [4096, 4096]).
COLUMN_SOFTMAX_TILE = 8192
COLUMN_SOFTMAX_BLOCK_K = 32
COLUMN_SOFTMAX_PROGRAMS_PER_SM = 4
COLUMN_SOFTMAX_WARPS = 8
# About how many programs keep an H200 (132 SMs) busy with enough loads in
# flight; reductions with fewer output tiles than this split the reduced axis
# into partial results.
TARGET_PROGRAMS = 1056
# A fused row tile of at least this many bytes is too big for two programs
# to share a multiprocessor, so one program would wait on its loads with
# nothing to overlap: such rows run on a persistent grid of one program per
# multiprocessor that prefetches its next PIPELINE_STAGES tiles into shared
# memory, where they fit beside PIPELINE_SMEM_RESERVE bytes of scratch. On an
# H200 two stages were slower than none, hence no fallback to fewer.
PIPELINE_MIN_BYTES = 64 << 10
PIPELINE_STAGES = 3
PIPELINE_SMEM_RESERVE = 16 << 10


# Plain-Python ceil-div and power of two: triton.cdiv / next_power_of_2 go
# through Triton's constexpr machinery and cost microseconds per host call.
def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << (n - 1).bit_length() if n > 1 else 1


def num_warps_for(tile: int) -> int:
    """Warps for a program touching ``tile`` elements: ~8-32 per thread."""
    if tile >= 32768:
        return 32
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
        return (cdiv(n_rows, self.block_rows),)


# The launch helpers are pure functions of their sizes and of the limits above;
# each public one passes the current limits (tests patch them) to a cached core,
# which keeps host time per call low.


def row_launch(n_rows: int, n_cols: int) -> RowLaunch:
    """Tile for a row-wise kernel: short rows are packed several per program;
    rows wider than MAX_FUSED_SIZE are walked in LOOP_BLOCK_SIZE chunks."""
    return _row_launch(n_rows, n_cols, MAX_FUSED_SIZE, LOOP_BLOCK_SIZE, TILE_SIZE)


@functools.lru_cache(maxsize=4096)
def _row_launch(n_rows: int, n_cols: int, max_fused: int, loop_block: int, tile: int) -> RowLaunch:
    width = next_pow2(max(n_cols, 1))
    if width <= max_fused:
        block_rows = min(next_pow2(max(n_rows, 1)), max(1, tile // width))
        return RowLaunch(block_rows, width, True, num_warps_for(block_rows * width))
    block = min(loop_block, max_fused)
    return RowLaunch(1, block, False, num_warps_for(block))


def pipelined_grid(n_tiles: int, tile_bytes: int, device: torch.device) -> tuple[tuple[int], int]:
    """(grid, stages) for a kernel that walks ``n_tiles`` tiles of
    ``tile_bytes`` with ``tl.range(pid, n_tiles, programs, num_stages=stages)``:
    one program per tile and no prefetch for small tiles, or where the
    prefetched tiles would not fit in shared memory; else a persistent grid."""
    if tile_bytes < PIPELINE_MIN_BYTES or PIPELINE_STAGES * tile_bytes + PIPELINE_SMEM_RESERVE > shared_memory(device):
        return (n_tiles,), 1
    return (min(n_tiles, multiprocessors(device)),), PIPELINE_STAGES


def multiprocessors(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device; 4 elsewhere (Triton's CPU
    interpreter), so persistent kernels still walk several tiles per program."""
    if device.type != "cuda":
        return 4
    return _multiprocessors(device_index(device))


def shared_memory(device: torch.device) -> int:
    """Bytes of shared memory one program may use (227 KiB on an H200,
    163 KiB on an A100); no limit under Triton's CPU interpreter."""
    if device.type != "cuda":
        return 1 << 40
    return _shared_memory(device_index(device))


def device_index(device: torch.device) -> int:
    """The CUDA device ``device`` names ("cuda" alone: the current one)."""
    return device.index if device.index is not None else torch.cuda.current_device()


@functools.cache
def _multiprocessors(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


@functools.cache
def _shared_memory(index: int) -> int:
    # The opt-in limit is the one Triton compiles against; a torch without
    # the field gets no prefetch rather than an out-of-resources error.
    return getattr(torch.cuda.get_device_properties(index), "shared_memory_per_block_optin", 0)


@dataclass(frozen=True)
class ColumnLaunch:
    """How softmax covers an (n_outer, n_reduce, n_inner) tensor along its
    middle axis, the inner axis contiguous: programs own ``block_k`` columns;
    ``fused`` holds a whole column in one (block_n, block_k) tile, else a
    program walks (block_n, block_k) chunks. ``n_splits`` > 1 cuts the
    reduced axis into pieces of ``per_split`` rows: one kernel writes each
    piece's running max and sum per column, a second combines them and writes
    its piece, so a few long columns still fill the machine."""

    block_n: int
    block_k: int
    fused: bool
    n_splits: int
    per_split: int
    num_warps: int


def column_launch(n_outer: int, n_reduce: int, n_inner: int, device: torch.device) -> ColumnLaunch:
    """:class:`ColumnLaunch` for softmax along a middle axis on ``device``."""
    target = COLUMN_SOFTMAX_PROGRAMS_PER_SM * multiprocessors(device)
    return _column_launch(
        n_outer, n_reduce, n_inner, MAX_FUSED_SIZE, COLUMN_SOFTMAX_TILE, COLUMN_SOFTMAX_BLOCK_K, target,
        COLUMN_SOFTMAX_WARPS,
    )  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _column_launch(
    n_outer: int, n_reduce: int, n_inner: int, max_fused: int, tile: int, max_block_k: int, target_programs: int,
    max_warps: int,
) -> ColumnLaunch:  # fmt: skip
    block_k = min(next_pow2(max(n_inner, 1)), max_block_k)
    width = next_pow2(max(n_reduce, 1))
    programs = n_outer * cdiv(n_inner, block_k)
    if width * block_k <= max_fused and (width * block_k <= tile or programs >= target_programs):
        return ColumnLaunch(width, block_k, True, 1, n_reduce, num_warps_for(width * block_k))
    block_n = max(1, tile // block_k)
    chunks = cdiv(n_reduce, block_n)
    n_splits = 1
    # Too few column blocks to fill the machine: split the reduced axis, each
    # piece at least 4 chunks long so the extra partial results stay cheap.
    if programs < target_programs and chunks >= 8:
        n_splits = min(chunks // 4, cdiv(target_programs, programs))
    per_split = cdiv(chunks, n_splits) * block_n
    n_splits = cdiv(n_reduce, per_split)
    return ColumnLaunch(block_n, block_k, False, n_splits, per_split, min(max_warps, num_warps_for(block_n * block_k)))


def pointwise_launch(n_elements: int, element_size: int) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps) for an elementwise kernel writing elements of
    ``element_size`` bytes: 4 warps; on large tensors each thread owns 32
    bytes (two 128-bit vectors). H200, 128 MiB per operand: fp32 silu and gelu
    reach 98 % of copy bandwidth and bf16 gelu 93 %, against 94-96 % and 91 %
    with the earlier blocks of 4096 elements over 8 warps."""
    if n_elements < 1 << 22:
        return 1024, 4
    return 128 * max(1, 32 // element_size), 4


@dataclass(frozen=True)
class ReduceLaunch:
    """How to cover an (n_outer, n_reduce, n_inner) reduction.

    With n_inner == 1 a program owns ``block_outer`` rows and walks them in
    (block_outer, block_reduce) chunks; otherwise it owns ``block_inner``
    columns of one outer slab and walks (block_reduce, block_inner) chunks.
    ``n_splits`` > 1 cuts the reduced axis into pieces of ``per_split``
    elements whose partial results are reduced again.
    """

    block_outer: int
    block_reduce: int
    block_inner: int
    n_splits: int
    per_split: int
    num_warps: int
    stages: int  # column kernel: chunks prefetched into shared memory (1: none)


def reduce_limits() -> tuple:
    """The limits :func:`reduce_launch` reads now: a key for plans built on it."""
    return (
        REDUCE_BLOCK_SIZE, TILE_SIZE, TARGET_PROGRAMS, COLUMN_TARGET_PROGRAMS, COLUMN_BLOCK, COLUMN_WARPS, COLUMN_STAGES,
    )  # fmt: skip


def reduce_launch(n_outer: int, n_reduce: int, n_inner: int) -> ReduceLaunch:
    """Tile and split for a reduction over the middle axis of a row-major
    (n_outer, n_reduce, n_inner) tensor."""
    target = TARGET_PROGRAMS if n_inner == 1 else COLUMN_TARGET_PROGRAMS
    return _reduce_launch(
        n_outer, n_reduce, n_inner, REDUCE_BLOCK_SIZE, TILE_SIZE, target, COLUMN_BLOCK, COLUMN_WARPS, COLUMN_STAGES
    )


@functools.lru_cache(maxsize=4096)
def _reduce_launch(
    n_outer: int, n_reduce: int, n_inner: int, reduce_block: int, tile_size: int, target_programs: int,
    column_block: int, column_warps: int, stages: int,
) -> ReduceLaunch:
    width = next_pow2(max(n_reduce, 1))
    if n_inner == 1:
        # Pack rows up to a tile; with few rows, spend the tile on longer chunks.
        block_outer = min(next_pow2(max(n_outer, 1)), max(1, tile_size // min(width, reduce_block)))
        block_reduce = min(width, max(1, tile_size // block_outer))
        block_inner = 1
        programs = cdiv(n_outer, block_outer)
    else:
        block_inner = min(next_pow2(n_inner), column_block)
        # A short reduced axis (the partial results of a split, say) fits one
        # tile of narrower column blocks: one load per program, not a chain of
        # dependent ones. 16 fp32 columns are one 64-byte segment per row.
        if width * block_inner > tile_size and width * 16 <= tile_size:
            block_inner = tile_size // width
        block_reduce = min(width, max(1, tile_size // block_inner))
        block_outer = 1
        programs = n_outer * cdiv(n_inner, block_inner)
    chunks = cdiv(max(n_reduce, 1), block_reduce)
    n_splits = 1
    # Too few programs to fill the machine and a long reduced axis: give each
    # split at least 4 chunks so the extra pass stays cheap.
    if programs < target_programs and chunks >= 8:
        n_splits = min(chunks // 4, cdiv(target_programs, programs))
    per_split = cdiv(chunks, n_splits) * block_reduce
    n_splits = cdiv(max(n_reduce, 1), per_split)
    tile = block_outer * block_reduce * block_inner
    num_warps = num_warps_for(tile) if n_inner == 1 else min(column_warps, num_warps_for(tile))
    return ReduceLaunch(block_outer, block_reduce, block_inner, n_splits, per_split, num_warps, stages)


def dense_permutation(t: torch.Tensor) -> list[int] | None:
    """The dim order that makes a non-overlapping, dense ``t`` contiguous
    (``t.permute(order).is_contiguous()``), or None if ``t`` has gaps or
    overlaps (slices, expands)."""
    return dense_order(tuple(t.shape), t.stride())


def dense_order(shape: tuple[int, ...], strides: tuple[int, ...]) -> list[int] | None:
    """:func:`dense_permutation` of a tensor of this shape and these strides."""
    order = sorted(range(len(shape)), key=lambda d: (-strides[d], -shape[d]))
    expected = 1
    for d in reversed(order):
        if shape[d] == 1:
            continue
        if strides[d] != expected:
            return None
        expected *= shape[d]
    return order


def is_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """``Tensor.is_contiguous()`` of a tensor of this shape and these strides
    (size-1 dims may have any stride; an empty tensor is contiguous)."""
    if 0 in shape:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def inverse_permutation(order: list[int]) -> list[int]:
    """The permutation that undoes ``t.permute(order)``."""
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return inverse


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


def tl_dtype(dtype: torch.dtype, op: str = "gems kernels", supported: str | None = None):
    """The Triton dtype for a torch dtype; TypeError naming ``op``, the dtype
    and the ``supported`` ones if Triton has none."""
    try:
        return _TL_DTYPES[dtype]
    except KeyError as e:
        accepted = f" (supported: {supported})" if supported else ""
        raise TypeError(f"{op}: dtype {dtype} is not supported{accepted}") from e


# Bits of an integer's magnitude, and of a float's significand: an integer
# converts to a float exactly when its bits fit the significand.
_INT_BITS = {torch.bool: 1, torch.uint8: 8, torch.int8: 7, torch.int16: 15, torch.int32: 31, torch.int64: 63}
_SIGNIFICAND_BITS = {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24, torch.float64: 53}


def exact_cast(src: torch.dtype, dst: torch.dtype) -> bool:
    """True if every ``src`` value converts to ``dst`` exactly: a kernel may
    then load ``src`` and convert in registers where torch would cast the
    tensor to ``dst`` first (a cast that rounds must happen up front)."""
    if src == dst:
        return True
    if src in _SIGNIFICAND_BITS and dst in _SIGNIFICAND_BITS:
        return dst.itemsize > src.itemsize  # fp16 and bf16 do not hold each other
    if src in _INT_BITS and dst in _SIGNIFICAND_BITS:
        return _INT_BITS[src] <= _SIGNIFICAND_BITS[dst]
    if src in _INT_BITS and dst in _INT_BITS and dst != torch.bool:
        if src == torch.bool:
            return True
        low, high = torch.iinfo(src), torch.iinfo(dst)
        return high.min <= low.min and low.max <= high.max
    return False


def needs_int64(t: torch.Tensor) -> bool:
    """True if some element offset of ``t`` may not fit in int32."""
    extent = sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if s > 0)
    return offsets_need_int64(max(extent, t.numel()))


def offsets_need_int64(extent: int) -> bool:
    """True if offsets up to ``extent`` (plus a tile of slack) may not fit in int32."""
    return extent >= 2**31 - 2 * TILE_SIZE
