"""Our Python per call on the matrix products' GPU path, on any machine.

    python scripts/mm_host_path.py [--calls 3000] [--repeat 5]

mm, addmm and addmm_ as a GPU runs them (a tuned tile, the TMA kernel where
the layout allows) with Triton's launches and the tuner's timing stubbed
and the interpreter flag off in ``gems.ops.mm``: what is left is the host
work of our own code up to the launch (argument checks, the launch plan,
``torch.empty``, descriptors). Prints per op the least of ``--repeat`` means
over ``--calls`` calls (us) and the function calls one call makes (Python
and builtin, the same on any machine). Triton's own launcher is not in it:
``scripts/host_overhead.py`` on a GPU measures the whole call.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from triton.runtime.jit import KernelInterface

from gemswatch import gems
from gemswatch.gems.ops import _tune
from gemswatch.gems.ops import mm as mm_module


class _FirstTile:
    """A tuner that picks the first option without timing anything."""

    def choose(self, name, device, key, options, run, restore=None):
        return options[0]


def _function_calls(call) -> int:
    count = 0

    def counter(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(counter)
    try:
        call()
    finally:
        sys.setprofile(None)
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    KernelInterface.__getitem__ = lambda kernel, grid: (lambda *a, **k: None)
    mm_module.interpreted = False
    _tune.tuner = lambda: _FirstTile()
    # On a CPU the layout check alone decides (a GPU also asks for Hopper).
    mm_module._use_tma = lambda a, b, out, tuned: tuned and all(mm_module._tma_view(t) for t in (a, b, out))
    print(f"gems.mm host path, launches stubbed, {gems.device}, torch {torch.__version__}")
    for dtype in (torch.float16, torch.float32):
        a = torch.randn(256, 256, dtype=dtype)
        b = torch.randn(256, 256, dtype=dtype)
        bias = torch.randn(256, dtype=dtype)
        acc = torch.randn(256, 256, dtype=dtype)
        ops = {
            "mm": lambda: gems.mm(a, b),
            "addmm": lambda: gems.addmm(bias, a, b),
            "addmm_": lambda: gems.addmm_(acc, a, b),
        }
        for name, call in ops.items():
            for _ in range(200):
                call()
            means = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    call()
                means.append((time.perf_counter() - t0) / args.calls * 1e6)
            print(f"{name:7s} {str(dtype)[6:]:8s} 256x256x256  {min(means):6.1f} us per call  "
                  f"{_function_calls(call):4d} function calls")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
