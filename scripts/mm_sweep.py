"""gems.mm against torch.mm on the benchmark's shapes, with the plan each
problem got, variants of the fp32 path, and the fp32 error of each, in one
GPU run.

    python scripts/mm_sweep.py [--dtypes bfloat16,float16,float32] [--no-variants] [--no-error]

For every mm shape of the benchmark (core and comprehensive, each also with a
column-major mat2 where the benchmark has one) it prints torch and gems
latency (the benchmark's timer, alternating repetitions), the speedup, gems'
TFLOP/s and how gems ran it: split-K (tile, splits) or the unsplit kernel.
The variants time fp32 through the TMA kernel and with exact ("ieee") dot
products; the error table compares torch's and gems' fp32 products with a
float64 one. A measurement that prints what it saw, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import tempfile
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmark.test_mm_perf import COMPREHENSIVE, CORE  # noqa: E402
from gemswatch import gems  # noqa: E402
from gemswatch.gems.ops import _tune  # noqa: E402
from gemswatch.gems.ops import mm as mm_module  # noqa: E402
from gemswatch.testing.benchmark.timing import make_timer  # noqa: E402

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
TRANSPOSED = [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192)]


def forget_choices() -> None:
    mm_module._split_plans.clear()
    mm_module._tiles.clear()


@contextlib.contextmanager
def patched(**values):
    """Set mm module constants for the duration; plans are re-chosen, by a
    tuner on a temporary folder (the choices on disk stay the defaults')."""
    forget_choices()
    try:
        with tempfile.TemporaryDirectory() as folder, mock.patch.multiple(mm_module, **values), \
                mock.patch.object(_tune, "_tuner", _tune.Tuner(Path(folder))):
            yield
    finally:
        forget_choices()


def operands(m: int, n: int, k: int, dtype: torch.dtype, mat2_t: bool):
    a = torch.randn(m, k, dtype=dtype, device="cuda") / math.sqrt(k)
    b = torch.randn(n, k, dtype=dtype, device="cuda").t() if mat2_t else torch.randn(k, n, dtype=dtype, device="cuda")
    return a, b


def plan_of(a: torch.Tensor, b: torch.Tensor) -> str:
    a, b = mm_module._k_major(a, b, mm_module._dot_precision(a, upcast=False))
    key = mm_module._split_key(a, b, has_bias=False)
    if key not in mm_module._split_plans:
        return "unsplit"
    plan = mm_module._split_plans[key]
    return "unsplit (timed)" if plan is None else f"split {plan[1]} x tile {plan[0][:3]}"


def time_case(timer, m, n, k, dtype, mat2_t) -> str:
    a, b = operands(m, n, k, dtype, mat2_t)
    gems.mm(a, b)  # tunes outside the timed part
    base, mine = timer.pair(lambda: torch.mm(a, b), lambda: gems.mm(a, b))
    tflops = 2 * m * n * k / (mine * 1e-3) / 1e12
    shape = f"{m}x{n}x{k}{' mat2_t' if mat2_t else ''}"
    return (f"{shape:24s} {str(dtype)[6:]:9s} torch {base * 1e3:9.1f} us  gems {mine * 1e3:9.1f} us  "
            f"x{base / mine:5.2f}  {tflops:6.1f} TFLOP/s  {plan_of(a, b)}")


def cases():
    sizes = list(dict.fromkeys(CORE + COMPREHENSIVE))
    return [(s, False) for s in sizes] + [(s, True) for s in TRANSPOSED]


def error_table() -> None:
    print("fp32 error against a float64 product: max |err| / max |ref|, and rms(err) / rms(ref)")
    for m, n, k in [(1024, 1024, 1024), (4096, 4096, 4096), (16, 4096, 4096)]:
        a, b = operands(m, n, k, torch.float32, False)
        ref = a.double() @ b.double()
        rows = {"torch.mm": torch.mm(a, b)}
        for precision in ("tf32x3", "ieee"):
            with patched(FP32_PRECISION=precision):
                rows[f"gems {precision}"] = gems.mm(a, b)
        for name, got in rows.items():
            err = got.double() - ref
            worst = (err.abs().max() / ref.abs().max()).item()
            rms = (err.norm() / ref.norm()).item()
            print(f"  {m}x{n}x{k:<6d} {name:12s} max {worst:.2e}  rms {rms:.2e}", flush=True)
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--no-variants", action="store_true")
    ap.add_argument("--no-error", action="store_true")
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--iter", type=float, default=30)
    args = ap.parse_args()
    if gems.device != "cuda":
        print("mm_sweep needs a CUDA GPU")
        return 2
    timer = make_timer("cuda", args.warmup, args.iter)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    if not args.no_error:
        error_table()
    dtypes = args.dtypes.split(",")
    for name in [d for d in dtypes if d != "float16"]:
        for (m, n, k), mat2_t in cases():
            print(time_case(timer, m, n, k, DTYPES[name], mat2_t), flush=True)
    if not args.no_variants:
        variants = {
            "fp32 through TMA": dict(TMA_DTYPES=(torch.float16, torch.bfloat16, torch.float32)),
            "fp32 exact (ieee)": dict(FP32_PRECISION="ieee"),
        }
        for label, values in variants.items():
            print(f"\nvariant: {label}")
            with patched(**values):
                for (m, n, k), mat2_t in cases():
                    if m * n * k <= 4096**3:
                        print(time_case(timer, m, n, k, torch.float32, mat2_t), flush=True)
    if "float16" in dtypes:  # last: it runs much like bfloat16
        print()
        for (m, n, k), mat2_t in cases():
            print(time_case(timer, m, n, k, torch.float16, mat2_t), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
