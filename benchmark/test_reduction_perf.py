"""Benchmarks of the reduction family: sum, mean and amax."""

from __future__ import annotations

import math

import torch

from gemswatch.testing.benchmark import Benchmark, CasePlan, Judged

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


def _reduced(args, kwargs):
    """(the float64 input, the dims reduced, how many terms each result sums)."""
    (x,) = args
    dims = list(range(x.dim())) if kwargs.get("dim") is None else [d % x.dim() for d in kwargs["dim"]]
    return x, dims, math.prod(x.shape[d] for d in dims)


def sum_accuracy(args, kwargs):
    # A sum may cancel: its error is judged against the sum of |x| it is made of.
    x, dims, n = _reduced(args, kwargs)
    return Judged(reduce_len=n, scale=x.abs().sum(dims))


def mean_accuracy(args, kwargs):
    x, dims, n = _reduced(args, kwargs)
    return Judged(reduce_len=n, scale=x.abs().sum(dims) / n)


def amax_accuracy(args, kwargs):
    return Judged()  # one of the inputs, exactly


SUM = Benchmark(op="sum", baseline=torch.sum, cases=CASES, build=build, interpreter_cases=INTERPRETER_CASES,
                accuracy=sum_accuracy)
MEAN = Benchmark(op="mean", baseline=torch.mean, cases=CASES, build=build, interpreter_cases=INTERPRETER_CASES,
                 accuracy=mean_accuracy)
AMAX = Benchmark(op="amax", baseline=torch.amax, cases=CASES, build=build, interpreter_cases=INTERPRETER_CASES,
                 accuracy=amax_accuracy)


def test_sum(bench):
    bench.run(SUM)


def test_mean(bench):
    bench.run(MEAN)


def test_amax(bench):
    bench.run(AMAX)
