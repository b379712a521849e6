"""Benchmarks of the matmul family: mm and addmm (addmm_ is in test_addmm_.py)."""

from __future__ import annotations

import math

import torch

from gemswatch.testing.benchmark import Benchmark, CasePlan, product

# (M, N, K), GPU-sized, with a transposed mat2 ("mat2_t") for the
# column-major layout; under Triton's interpreter the core level uses the
# tiny INTERPRETER_CORE sizes.
CORE = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096)]
INTERPRETER_CORE = [(16, 16, 16), (33, 17, 20), (1, 64, 32)]
COMPREHENSIVE = [
    (1024, 1024, 1024),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (4096, 4096, 1024),
    (16, 4096, 4096),
    (4096, 16, 4096),
    (8192, 1024, 8192),
]


def _plans(sizes, transposed):
    plans = [CasePlan({"M": m, "N": n, "K": k}) for m, n, k in sizes]
    return plans + [CasePlan({"M": m, "N": n, "K": k}, {"mat2_t": True}) for m, n, k in transposed]


CASES = {
    "core": _plans(CORE, CORE[-1:]),
    "comprehensive": _plans(COMPREHENSIVE, COMPREHENSIVE[:3]),
}
INTERPRETER_CASES = {"core": _plans(INTERPRETER_CORE, [])}


def matrices(case, device):
    s = case.shape
    # Scaled so long in-place accumulations in half precision stay finite.
    a = torch.randn(s["M"], s["K"], dtype=case.dtype, device=device) / math.sqrt(s["K"])
    if case.params.get("mat2_t"):
        b = torch.randn(s["N"], s["K"], dtype=case.dtype, device=device).t()
    else:
        b = torch.randn(s["K"], s["N"], dtype=case.dtype, device=device)
    return a, b


def build_mm(case, device):
    return matrices(case, device), {}


def build_addmm(case, device):
    a, b = matrices(case, device)
    bias = torch.randn(case.shape["N"], dtype=case.dtype, device=device)
    return (bias, a, b), {"beta": 1, "alpha": 1}


def flops(case):
    return 2.0 * case.shape["M"] * case.shape["N"] * case.shape["K"]


def product_accuracy(args, kwargs):
    # The bias, where there is one, adds one exact term.
    return product(*args[-2:], kwargs.get("alpha", 1))


MM = Benchmark(
    op="mm", baseline=torch.mm, cases=CASES, build=build_mm, flops=flops, interpreter_cases=INTERPRETER_CASES,
    accuracy=product_accuracy,
)
ADDMM = Benchmark(
    op="addmm", baseline=torch.addmm, cases=CASES, build=build_addmm, flops=flops, interpreter_cases=INTERPRETER_CASES,
    accuracy=product_accuracy,
)


def test_mm(bench):
    bench.run(MM)


def test_addmm(bench):
    bench.run(ADDMM)
