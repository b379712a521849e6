"""Benchmarks of the reduction family: sum, mean and amax."""

from __future__ import annotations

import torch

from gemswatch.testing.benchmark import Benchmark, CasePlan

# Core shapes are GPU-sized; the interpreter's core plan is tiny.
CASES = {
    "core": [
        CasePlan({"x": [1024, 1024]}, {"dim": [-1]}),
        CasePlan({"x": [4096, 4096]}, {"dim": [-1]}),
        CasePlan({"x": [4096, 4096]}, {"dim": [0]}),
        CasePlan({"x": [32, 1024, 512]}, {"dim": [1]}),
        CasePlan({"x": [4096, 4096]}, {"dim": None}),
    ],
    "comprehensive": [
        CasePlan({"x": [1024, 1024]}, {"dim": [-1]}),
        CasePlan({"x": [4096, 4096]}, {"dim": [-1]}),
        CasePlan({"x": [4096, 4096]}, {"dim": [0]}),
        CasePlan({"x": [1024, 65536]}, {"dim": [-1]}),
        CasePlan({"x": [65536, 1024]}, {"dim": [0]}),
        CasePlan({"x": [64, 512, 512]}, {"dim": [1]}),
        CasePlan({"x": [4096, 8192]}, {"dim": None}),
        CasePlan({"x": [16384, 16384]}, {"dim": [-1]}),
    ],
}

INTERPRETER_CASES = {
    "core": [
        CasePlan({"x": [1, 33]}, {"dim": [-1]}),
        CasePlan({"x": [4, 123]}, {"dim": [-1]}),
        CasePlan({"x": [4, 123]}, {"dim": [0]}),
        CasePlan({"x": [3, 5, 17]}, {"dim": [1]}),
        CasePlan({"x": [3, 5, 17]}, {"dim": None}),
    ],
}


def build(case, device):
    x = torch.randn(case.shape["x"], dtype=case.dtype, device=device)
    dim = case.params["dim"]
    if dim is None:  # every op's default reduces over all dims
        return (x,), {}
    return (x,), {"dim": dim}


SUM = Benchmark(op="sum", baseline=torch.sum, cases=CASES, build=build, interpreter_cases=INTERPRETER_CASES)
MEAN = Benchmark(op="mean", baseline=torch.mean, cases=CASES, build=build, interpreter_cases=INTERPRETER_CASES)
AMAX = Benchmark(op="amax", baseline=torch.amax, cases=CASES, build=build, interpreter_cases=INTERPRETER_CASES)


def test_sum(bench):
    bench.run(SUM)


def test_mean(bench):
    bench.run(MEAN)


def test_amax(bench):
    bench.run(AMAX)
