"""Time launch-parameter variants of the gems kernels that miss their
bandwidth goal, against torch, in one GPU run.

    python scripts/tune_sweep.py [--only softmax,gelu,reduce] [--small]

Each experiment patches one launch heuristic of ``gemswatch.gems.ops._launch``
(the kernels read them at call time), times the gems op and the torch
baseline with the benchmark's own timer, and prints latency, speedup and the
share of the copy bandwidth measured in the same run. ``--small`` uses tiny
shapes (a smoke run under Triton's CPU interpreter).
"""

from __future__ import annotations

import argparse
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
    x = torch.randn((4, 256) if small else (4096, 32768), dtype=torch.float16, device=gems.device)
    call = (lambda: gems.softmax(x, -1)), (lambda: torch.softmax(x, -1)), 2 * x.numel() * x.element_size()
    for warps in (8, 16, 32):
        yield f"softmax fp16 {list(x.shape)} fused, {warps} warps", patched(
            num_warps_for=warps_at_least(256 if small else 32768, warps)), call
    yield f"softmax fp16 {list(x.shape)} looped", patched(MAX_FUSED_SIZE=16384 if not small else 128), call


def gelu_variants(small: bool):
    x = torch.randn((64, 64) if small else (16384, 16384), dtype=torch.bfloat16, device=gems.device)
    call = (lambda: gems.gelu(x)), (lambda: F.gelu(x)), 2 * x.numel() * x.element_size()
    for block, warps in itertools.product((1024, 2048, 4096, 8192), (4, 8, 16)):
        if block // (32 * warps) < 2:
            continue
        yield f"gelu bf16 {list(x.shape)} BLOCK {block}, {warps} warps", patched(
            pointwise_launch=lambda n, b=block, w=warps: (b, w)), call


def reduce_variants(small: bool):
    for shape, dim in (((8, 512), -1), ((512, 8), 0)) if small else (((1024, 65536), -1), ((65536, 1024), 0)):
        x = torch.randn(shape, dtype=torch.float32, device=gems.device)
        call = (lambda x=x, d=dim: gems.sum(x, d)), (lambda x=x, d=dim: torch.sum(x, d)), x.numel() * 4
        for block, tile, target in itertools.product((1024, 4096), (4096, 8192, 16384), (1056, 2112)):
            yield f"sum fp32 {list(shape)} dim {dim}: REDUCE_BLOCK {block}, TILE {tile}, TARGET {target}", patched(
                REDUCE_BLOCK_SIZE=block, TILE_SIZE=tile, TARGET_PROGRAMS=target), call


def column_variants(small: bool):
    """Reductions over the long middle axis of [65536, 1024] (dim 0), the
    misses left after the row-chunk change: columns per program, tile, split."""
    x = torch.randn((512, 8) if small else (65536, 1024), dtype=torch.float32, device=gems.device)
    ops = {"sum": (gems.sum, torch.sum), "amax": (gems.amax, torch.amax)}
    for name, (ours, theirs) in ops.items():
        call = (lambda f=ours: f(x, 0)), (lambda f=theirs: f(x, 0)), x.numel() * 4
        for columns, tile, target in itertools.product((64, 128, 256, 512), (4096, 8192), (528, 1056, 2112)):
            yield f"{name} fp32 {list(x.shape)} dim 0: COLUMN_BLOCK {columns}, TILE {tile}, TARGET {target}", patched(
                COLUMN_BLOCK=columns, TILE_SIZE=tile, TARGET_PROGRAMS=target), call


EXPERIMENTS = {
    "softmax": softmax_variants, "gelu": gelu_variants, "reduce": reduce_variants, "columns": column_variants,
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
                ours()  # compile outside the timed part
                base, mine = timer.pair(theirs, ours)
            pct = f"{100 * moved / (mine * 1e-3) / 1e9 / copy:5.1f} %" if copy else "-"
            print(f"{label:70s} torch {base * 1e3:9.1f} us  gems {mine * 1e3:9.1f} us  x{base / mine:5.2f}  {pct}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
