"""Benchmarks of the normalization family: rms_norm and layer_norm over the last dim."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gemswatch.testing.benchmark import Benchmark, CasePlan, Judged

# Core shapes are GPU-sized; the interpreter's core plan is tiny.
CASES = {
    "core": [
        CasePlan({"x": [1024, 1024]}),
        CasePlan({"x": [4096, 4096]}),
        CasePlan({"x": [2048, 8192]}),
        CasePlan({"x": [4096, 4096]}, {"weight": False}),
    ],
    "comprehensive": [
        CasePlan({"x": [1024, 1024]}),
        CasePlan({"x": [4096, 4096]}),
        CasePlan({"x": [4096, 8192]}),
        CasePlan({"x": [16384, 4096]}),
        CasePlan({"x": [1024, 32768]}),  # long rows: fp32 missed 85 % of copy bandwidth here
        CasePlan({"x": [8192, 8192]}),
        CasePlan({"x": [65536, 128]}),
        CasePlan({"x": [8, 2048, 4096]}),
    ],
}

INTERPRETER_CASES = {
    "core": [
        CasePlan({"x": [1, 5]}),
        CasePlan({"x": [4, 123]}),
        CasePlan({"x": [2, 3, 64]}),
        CasePlan({"x": [4, 123]}, {"weight": False}),
    ],
}


def _build(case, device, with_bias):
    x = torch.randn(case.shape["x"], dtype=case.dtype, device=device)
    n = case.shape["x"][-1]
    kwargs = {}
    if case.params.get("weight", True):
        kwargs["weight"] = torch.randn(n, dtype=case.dtype, device=device)
        if with_bias:
            kwargs["bias"] = torch.randn(n, dtype=case.dtype, device=device)
    kwargs["eps"] = 1e-5
    return (x, [n]), kwargs


def _norm_accuracy(args, kwargs, centred):
    """Judged against the magnitude of the terms of each element: |x| (and
    |mean| when centred) times rstd, weight and bias."""
    x, (n,) = args
    mean = x.mean(-1, keepdim=True) if centred else torch.zeros_like(x[..., :1])
    rstd = 1 / torch.sqrt((x - mean).square().mean(-1, keepdim=True) + kwargs["eps"])
    scale = (x.abs() + mean.abs()) * rstd
    if kwargs.get("weight") is not None:
        scale = scale * kwargs["weight"].abs()
    if kwargs.get("bias") is not None:
        scale = scale + kwargs["bias"].abs()
    return Judged(reduce_len=n, scale=scale)


RMS_NORM = Benchmark(
    op="rms_norm", baseline=F.rms_norm, cases=CASES, build=lambda c, d: _build(c, d, False),
    interpreter_cases=INTERPRETER_CASES, accuracy=lambda a, k: _norm_accuracy(a, k, centred=False),
)  # fmt: skip
LAYER_NORM = Benchmark(
    op="layer_norm", baseline=F.layer_norm, cases=CASES, build=lambda c, d: _build(c, d, True),
    interpreter_cases=INTERPRETER_CASES, accuracy=lambda a, k: _norm_accuracy(a, k, centred=True),
)  # fmt: skip


def test_rms_norm(bench):
    bench.run(RMS_NORM)


def test_layer_norm(bench):
    bench.run(LAYER_NORM)
