"""Benchmarks of the pointwise family: add, mul, gelu and silu."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gemswatch.testing.benchmark import Benchmark, CasePlan, Judged, grid

# Core shapes are GPU-sized; under Triton's CPU interpreter the core level
# uses the tiny INTERPRETER_* plans instead, so a preflight takes seconds.
UNARY_SHAPES = {
    "core": [{"x": [1024, 1024]}, {"x": [4096, 4096]}, {"x": [8, 2048, 4096]}],
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
        CasePlan({"x": [1024, 1024], "other": [1024, 1024]}),
        CasePlan({"x": [4096, 4096], "other": [4096, 4096]}),
        CasePlan({"x": [4096, 4096], "other": [4096]}),
        CasePlan({"x": [4096, 4096], "other": [4096, 4096]}, {"alpha": 0.5}),
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

INTERPRETER_UNARY_SHAPES = {"core": [{"x": [1, 5]}, {"x": [4, 123]}, {"x": [2, 3, 40]}]}
INTERPRETER_BINARY_CASES = {
    "core": [
        CasePlan({"x": [1, 5], "other": [1, 5]}),
        CasePlan({"x": [4, 123], "other": [4, 123]}),
        CasePlan({"x": [4, 123], "other": [123]}),
        CasePlan({"x": [4, 123], "other": [4, 123]}, {"alpha": 0.5}),
    ],
}


def build_binary(case, device):
    x = torch.randn(case.shape["x"], dtype=case.dtype, device=device)
    other = torch.randn(case.shape["other"], dtype=case.dtype, device=device)
    return (x, other), dict(case.params)


def build_unary(case, device):
    x = torch.randn(case.shape["x"], dtype=case.dtype, device=device)
    return (x,), dict(case.params)


def elementwise(args, kwargs):
    # One rounding per element, judged against the element itself.
    return Judged()


def _without_alpha(cases):
    # mul takes no alpha.
    return {level: [c for c in plans if "alpha" not in c.params] for level, plans in cases.items()}


def _gelu_cases(shapes):
    return {level: grid(s, [{"approximate": "none"}, {"approximate": "tanh"}]) for level, s in shapes.items()}


def _silu_cases(shapes):
    return {level: grid(s) for level, s in shapes.items()}


ADD = Benchmark(
    op="add", baseline=torch.add, cases=BINARY_CASES, build=build_binary, interpreter_cases=INTERPRETER_BINARY_CASES,
    accuracy=elementwise,
)
MUL = Benchmark(
    op="mul", baseline=torch.mul, cases=_without_alpha(BINARY_CASES), build=build_binary,
    interpreter_cases=_without_alpha(INTERPRETER_BINARY_CASES), accuracy=elementwise,
)  # fmt: skip
GELU = Benchmark(
    op="gelu", baseline=F.gelu, cases=_gelu_cases(UNARY_SHAPES), build=build_unary,
    interpreter_cases=_gelu_cases(INTERPRETER_UNARY_SHAPES), accuracy=elementwise,
)  # fmt: skip
SILU = Benchmark(
    op="silu", baseline=F.silu, cases=_silu_cases(UNARY_SHAPES), build=build_unary,
    interpreter_cases=_silu_cases(INTERPRETER_UNARY_SHAPES), accuracy=elementwise,
)  # fmt: skip


def test_add(bench):
    bench.run(ADD)


def test_mul(bench):
    bench.run(MUL)


def test_gelu(bench):
    bench.run(GELU)


def test_silu(bench):
    bench.run(SILU)
