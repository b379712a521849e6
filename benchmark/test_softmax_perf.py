"""Benchmarks of the softmax family: softmax and log_softmax over one dim."""

from __future__ import annotations

import torch

from gemswatch.testing.benchmark import Benchmark, CasePlan, Judged

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
        CasePlan({"x": [8192, 8192]}, {"dim": 0}),
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


def softmax_accuracy(args, kwargs):
    # Each probability is judged against itself; a row's terms are its width.
    (x,), dim = args, kwargs["dim"]
    return Judged(reduce_len=x.shape[dim])


def log_softmax_accuracy(args, kwargs):
    # x - max - log(sum): judged against its terms, which a half kernel may round first.
    (x,), dim = args, kwargs["dim"]
    shifted = x - x.amax(dim, keepdim=True)
    lse = shifted.exp().sum(dim, keepdim=True).log()
    return Judged(reduce_len=x.shape[dim], scale=shifted.abs() + lse.abs() + 1, rounded_terms=True)


SOFTMAX = Benchmark(
    op="softmax", baseline=torch.softmax, cases=CASES, build=build, interpreter_cases=INTERPRETER_CASES,
    accuracy=softmax_accuracy,
)
LOG_SOFTMAX = Benchmark(
    op="log_softmax", baseline=torch.log_softmax, cases=CASES, build=build, interpreter_cases=INTERPRETER_CASES,
    accuracy=log_softmax_accuracy,
)


def test_softmax(bench):
    bench.run(SOFTMAX)


def test_log_softmax(bench):
    bench.run(LOG_SOFTMAX)
