"""Benchmark of the in-place addmm_ (its own file, the name upstream command
lines use: ``benchmark/test_addmm_.py``)."""

from __future__ import annotations

import math

import torch

from gemswatch.testing.benchmark import Benchmark, CasePlan, product

# GPU-sized; the interpreter's core plan is tiny.
CASES = {
    "core": [CasePlan({"M": m, "N": n, "K": k}) for m, n, k in [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096)]],
    "comprehensive": [
        CasePlan({"M": m, "N": n, "K": k})
        for m, n, k in [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 1024), (16, 4096, 4096)]
    ],
}
INTERPRETER_CASES = {"core": [CasePlan({"M": m, "N": n, "K": k}) for m, n, k in [(16, 16, 16), (33, 17, 20), (1, 64, 32)]]}


def build(case, device):
    s = case.shape
    # Scaled so repeated in-place accumulation in half precision stays finite.
    a = torch.randn(s["M"], s["K"], dtype=case.dtype, device=device) / math.sqrt(s["K"])
    b = torch.randn(s["K"], s["N"], dtype=case.dtype, device=device)
    c = torch.randn(s["M"], s["N"], dtype=case.dtype, device=device)
    return (c, a, b), {"beta": 1, "alpha": 1}


ADDMM_ = Benchmark(
    op="addmm_",
    baseline=torch.Tensor.addmm_,
    cases=CASES,
    build=build,
    flops=lambda case: 2.0 * case.shape["M"] * case.shape["N"] * case.shape["K"],
    interpreter_cases=INTERPRETER_CASES,
    accuracy=lambda args, kwargs: product(args[1], args[2], kwargs["alpha"]),
)


def test_addmm_(bench):
    bench.run(ADDMM_)
