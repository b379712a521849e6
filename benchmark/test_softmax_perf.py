"""Benchmarks of the softmax family: softmax and log_softmax over one dim."""

from __future__ import annotations

import torch

from gemswatch.testing.benchmark import Benchmark, CasePlan

# Core shapes are GPU-sized; under Triton's interpreter the core level uses
# the tiny INTERPRETER_CASES, so a preflight runs in seconds there.
CASES = {
    "core": [
        CasePlan({"x": [1024, 1024]}, {"dim": -1}),
        CasePlan({"x": [4096, 4096]}, {"dim": -1}),
        CasePlan({"x": [1024, 32768]}, {"dim": -1}),
        CasePlan({"x": [4096, 4096]}, {"dim": 0}),
    ],
    "comprehensive": [
        CasePlan({"x": [1024, 1024]}, {"dim": -1}),
        CasePlan({"x": [4096, 4096]}, {"dim": -1}),
        CasePlan({"x": [4096, 32768]}, {"dim": -1}),
        CasePlan({"x": [65536, 128]}, {"dim": -1}),
        CasePlan({"x": [32, 8, 32768]}, {"dim": -1}),
        CasePlan({"x": [4096, 4096]}, {"dim": 0}),
        CasePlan({"x": [64, 1024, 256]}, {"dim": 1}),
        CasePlan({"x": [16384, 16384]}, {"dim": -1}),
    ],
}

INTERPRETER_CASES = {
    "core": [
        CasePlan({"x": [1, 5]}, {"dim": -1}),
        CasePlan({"x": [4, 123]}, {"dim": -1}),
        CasePlan({"x": [4, 123]}, {"dim": 0}),
        CasePlan({"x": [2, 3, 64]}, {"dim": 1}),
    ],
}


def build(case, device):
    x = torch.randn(case.shape["x"], dtype=case.dtype, device=device)
    return (x,), {"dim": case.params["dim"]}


SOFTMAX = Benchmark(
    op="softmax", baseline=torch.softmax, cases=CASES, build=build, interpreter_cases=INTERPRETER_CASES
)
LOG_SOFTMAX = Benchmark(
    op="log_softmax", baseline=torch.log_softmax, cases=CASES, build=build, interpreter_cases=INTERPRETER_CASES
)


def test_softmax(bench):
    bench.run(SOFTMAX)


def test_log_softmax(bench):
    bench.run(LOG_SOFTMAX)
