"""Benchmarks of the pointwise family: add, mul, gelu and silu."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gemswatch.testing.benchmark import Benchmark, CasePlan, grid

UNARY_SHAPES = {
    "core": [{"x": [1, 5]}, {"x": [4, 123]}, {"x": [2, 3, 40]}],
    "comprehensive": [
        {"x": [1024, 1024]},
        {"x": [4096, 4096]},
        {"x": [16384, 16384]},
        {"x": [64, 1024, 1024]},
        {"x": [1 << 28]},
    ],
}

# "other" is broadcast against "x" where the shapes differ.
BINARY_CASES = {
    "core": [
        CasePlan({"x": [1, 5], "other": [1, 5]}),
        CasePlan({"x": [4, 123], "other": [4, 123]}),
        CasePlan({"x": [4, 123], "other": [123]}),
        CasePlan({"x": [4, 123], "other": [4, 123]}, {"alpha": 0.5}),
    ],
    "comprehensive": [
        CasePlan({"x": [1024, 1024], "other": [1024, 1024]}),
        CasePlan({"x": [4096, 4096], "other": [4096, 4096]}),
        CasePlan({"x": [16384, 16384], "other": [16384, 16384]}),
        CasePlan({"x": [16384, 16384], "other": [16384]}),
        CasePlan({"x": [64, 1024, 1024], "other": [64, 1024, 1024]}),
        CasePlan({"x": [1 << 28], "other": [1 << 28]}),
    ],
}


def build_binary(case, device):
    x = torch.randn(case.shape["x"], dtype=case.dtype, device=device)
    other = torch.randn(case.shape["other"], dtype=case.dtype, device=device)
    return (x, other), dict(case.params)


def build_unary(case, device):
    x = torch.randn(case.shape["x"], dtype=case.dtype, device=device)
    return (x,), dict(case.params)


def _mul_cases(level, dtype):
    # mul takes no alpha.
    return [c for c in BINARY_CASES[level] if "alpha" not in c.params]


ADD = Benchmark(op="add", baseline=torch.add, cases=BINARY_CASES, build=build_binary)
MUL = Benchmark(op="mul", baseline=torch.mul, cases=_mul_cases, build=build_binary)
GELU = Benchmark(
    op="gelu",
    baseline=F.gelu,
    cases={level: grid(shapes, [{"approximate": "none"}, {"approximate": "tanh"}]) for level, shapes in UNARY_SHAPES.items()},
    build=build_unary,
)
SILU = Benchmark(op="silu", baseline=F.silu, cases={level: grid(shapes) for level, shapes in UNARY_SHAPES.items()}, build=build_unary)


def test_add(bench):
    bench.run(ADD)


def test_mul(bench):
    bench.run(MUL)


def test_gelu(bench):
    bench.run(GELU)


def test_silu(bench):
    bench.run(SILU)
