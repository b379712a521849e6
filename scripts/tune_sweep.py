"""Time launch-parameter variants of the gems kernels that miss their
bandwidth goal, against torch, in one GPU run.

    python scripts/tune_sweep.py [--only softmax,gelu,reduce,columns,colsoftmax,pointwise] [--small]

Each experiment patches one launch heuristic of ``gemswatch.gems.ops._launch``
(the kernels read them at call time), times the gems op and the torch
baseline with the benchmark's own timer, and prints latency, speedup and the
share of the copy bandwidth measured in the same run. ``--small`` uses tiny
shapes (a smoke run under Triton's CPU interpreter).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
from unittest import mock

import torch
import torch.nn.functional as F

from gemswatch import gems
from gemswatch.gems.ops import _launch
from gemswatch.testing.benchmark.timing import copy_bandwidth_gbps, make_timer


def patched(**values):
    """Set module attributes of _launch for the duration (functions or limits)."""
    return mock.patch.multiple(_launch, **values)


def warps_at_least(limit: int, warps: int):
    base = _launch.num_warps_for

    def num_warps_for(tile: int) -> int:
        return warps if tile >= limit else base(tile)

    return num_warps_for


def softmax_variants(small: bool):
    """Wide 16-bit rows: one program per row against a persistent grid that
    prefetches 2 or 3 rows, at 16 and 32 warps."""
    shapes = [(4, 256)] if small else [(4096, 32768), (1024, 32768), (16384, 16384), (4096, 4096)]
    for shape, dtype in itertools.product(shapes, (torch.float16, torch.bfloat16, torch.float32)):
        x = torch.randn(shape, dtype=dtype, device=gems.device)
        call = (lambda x=x: gems.softmax(x, -1)), (lambda x=x: torch.softmax(x, -1)), 2 * x.numel() * x.element_size()
        name = f"softmax {str(dtype)[6:]} {list(shape)}"
        yield f"{name} one program per row", patched(PIPELINE_MIN_BYTES=1 << 40), call
        for stages, warps in itertools.product((2, 3), (16, 32)):
            if shape[1] < 32768 and warps != 16:
                continue
            yield f"{name} persistent, {stages} stages, {warps} warps", patched(
                PIPELINE_MIN_BYTES=0, PIPELINE_STAGES=stages, PIPELINE_SMEM_RESERVE=0,
                num_warps_for=warps_at_least(256 if small else 16384, warps)), call


def gelu_variants(small: bool):
    for shape, dtype in itertools.product(
        [(64, 64)] if small else [(64, 1024, 1024), (16384, 16384)], (torch.bfloat16, torch.float16)
    ):
        x = torch.randn(shape, dtype=dtype, device=gems.device)
        call = (lambda x=x: gems.gelu(x)), (lambda x=x: F.gelu(x)), 2 * x.numel() * x.element_size()
        for block, warps in ((2048, 4), (4096, 4), (4096, 8), (8192, 8)):
            yield f"gelu {str(dtype)[6:]} {list(shape)} BLOCK {block}, {warps} warps", patched(
                pointwise_launch=lambda n, size, b=block, w=warps: (b, w)), call


def reduce_variants(small: bool):
    """Row reductions: tile and the programs a split aims for (1024 rows
    below TARGET_PROGRAMS split in two)."""
    x = torch.randn((8, 512) if small else (1024, 65536), dtype=torch.float32, device=gems.device)
    call = (lambda: gems.sum(x, -1)), (lambda: torch.sum(x, -1)), x.numel() * 4
    for tile, target in itertools.product((4096, 8192), (512, 1056, 2112)):
        yield f"sum fp32 {list(x.shape)} dim -1: TILE {tile}, TARGET {target}", patched(
            TILE_SIZE=tile, TARGET_PROGRAMS=target), call


def column_variants(small: bool):
    """Reductions over the long middle axis of [65536, 1024] (dim 0): columns
    per program, chunks prefetched, and the programs a split aims for."""
    x = torch.randn((512, 8) if small else (65536, 1024), dtype=torch.float32, device=gems.device)
    ops = {"sum": (gems.sum, torch.sum), "amax": (gems.amax, torch.amax)}
    for name, (ours, theirs) in ops.items():
        call = (lambda f=ours: f(x, 0)), (lambda f=theirs: f(x, 0)), x.numel() * 4
        for columns, stages, target in itertools.product((128, 256), (1, 2, 3), (264, 528, 1056)):
            yield (
                f"{name} fp32 {list(x.shape)} dim 0: COLUMNS {columns}, STAGES {stages}, TARGET {target}",
                patched(COLUMN_BLOCK=columns, COLUMN_STAGES=stages, COLUMN_TARGET_PROGRAMS=target),
                call,
            )


def column_softmax_variants(small: bool):
    """softmax and log_softmax over dim 0 (few column blocks, a split reduced
    axis): columns per program, chunk size, programs per multiprocessor a
    split aims for, warps. torch.compile of the same call is timed once per
    case (label "compile")."""
    shapes = [(512, 8)] if small else [(4096, 4096), (8192, 8192), (1024, 1024)]
    dtypes = (torch.float32,) if small else (torch.float16, torch.float32)
    for shape, dtype in itertools.product(shapes, dtypes):
        x = torch.randn(shape, dtype=dtype, device=gems.device)
        moved = 2 * x.numel() * x.element_size()
        for op in ("softmax", "log_softmax") if shape == (4096, 4096) else ("softmax",):
            ours, theirs = getattr(gems, op), getattr(torch, op)
            call = (lambda f=ours, x=x: f(x, 0)), (lambda f=theirs, x=x: f(x, 0)), moved
            name = f"{op} {str(dtype)[6:]} {list(shape)} dim 0"
            compiled = torch.compile(lambda x, f=theirs: f(x, 0))
            yield f"{name}: compile", contextlib.nullcontext(), ((lambda c=compiled, x=x: c(x)), call[1], moved)
            for block_k, tile, per_sm, warps in itertools.product((32, 64, 128), (2048, 4096, 8192), (2, 4, 8), (4, 8)):
                if warps == 8 and tile < 8192:
                    continue
                yield (
                    f"{name}: K {block_k}, TILE {tile}, {per_sm}/SM, {warps} warps",
                    patched(
                        COLUMN_SOFTMAX_BLOCK_K=block_k, COLUMN_SOFTMAX_TILE=tile, COLUMN_SOFTMAX_PROGRAMS_PER_SM=per_sm,
                        COLUMN_SOFTMAX_WARPS=warps,
                    ),
                    call,
                )


def pointwise_variants(small: bool):
    """Block and warps of the elementwise kernels at 128 MiB per operand."""
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.randn((64, 64) if small else (64, 1024, 1024), dtype=dtype, device=gems.device)
        n = x.numel() * x.element_size()
        calls = {
            "gelu": ((lambda x=x: gems.gelu(x)), (lambda x=x: F.gelu(x)), 2 * n),
            "silu": ((lambda x=x: gems.silu(x)), (lambda x=x: F.silu(x)), 2 * n),
            "add": ((lambda x=x: gems.add(x, x)), (lambda x=x: torch.add(x, x)), 3 * n),
        }
        for (name, call), (block, warps) in itertools.product(calls.items(), ((4096, 8), (2048, 4), (1024, 4))):
            yield f"{name} {str(dtype)[6:]} {list(x.shape)} BLOCK {block}, {warps} warps", patched(
                pointwise_launch=lambda n, size, b=block, w=warps: (b, w)), call


EXPERIMENTS = {
    "softmax": softmax_variants, "gelu": gelu_variants, "reduce": reduce_variants, "columns": column_variants,
    "colsoftmax": column_softmax_variants, "pointwise": pointwise_variants,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(EXPERIMENTS))
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--iter", type=float, default=30)
    args = ap.parse_args()
    timer = make_timer(gems.device, args.warmup, args.iter)
    copy = copy_bandwidth_gbps(timer) if gems.device == "cuda" else None
    print(f"device {gems.device}; copy bandwidth {copy and round(copy)} GB/s")
    for name in args.only.split(","):
        for label, patch, (ours, theirs, moved) in EXPERIMENTS[name](args.small):
            with patch:
                # Compiles outside the timed part; a variant must agree with torch.
                diff = (ours().double() - theirs().double()).abs().max().item()
                base, mine = timer.pair(theirs, ours)
            pct = f"{100 * moved / (mine * 1e-3) / 1e9 / copy:5.1f} %" if copy else "-"
            print(f"{label:70s} torch {base * 1e3:9.1f} us  gems {mine * 1e3:9.1f} us  x{base / mine:5.2f}  {pct}  max|diff| {diff:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
