"""Accuracy of gems.rms_norm, gems.layer_norm and native_layer_norm against a float64 reference."""

from __future__ import annotations

import math

import pytest
import torch

from gemswatch import gems
from gemswatch.gems.ops import _launch
from gemswatch.gems.ops import norm as norm_module
from gemswatch.testing.accuracy import assert_close, to_reference

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (input shape, normalized_shape): one element, odd widths, exactly one
# block (1024), a 1-D input, 3-D over the last dim and over the last two.
CASES = [
    ((1, 1), (1,)),
    ((4, 123), (123,)),
    ((3, 781), (781,)),
    ((2, 1023), (1023,)),
    ((2, 1024), (1024,)),
    ((781,), (781,)),
    ((2, 3, 40), (40,)),
    ((2, 3, 40), (3, 40)),
]
AFFINE = ["none", "weight", "weight+bias"]


def _randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, shift: float = 0.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) + shift).to(gems.device, dtype)


def _params(shape, dtype, affine: str):
    weight = _randn(*shape, dtype=dtype, seed=11) if affine != "none" else None
    bias = _randn(*shape, dtype=dtype, seed=12) if affine == "weight+bias" else None
    return weight, bias


def _dims(x: torch.Tensor, normalized_shape) -> list[int]:
    return list(range(x.dim() - len(normalized_shape), x.dim()))


def _ref_rms(x, normalized_shape, weight, eps):
    r = to_reference(x)
    y = r / torch.sqrt(r.square().mean(_dims(x, normalized_shape), keepdim=True) + eps)
    return y * to_reference(weight) if weight is not None else y


def _ref_layer_stats(x, normalized_shape, eps):
    r = to_reference(x)
    dims = _dims(x, normalized_shape)
    mean = r.mean(dims, keepdim=True)
    var = (r - mean).square().mean(dims, keepdim=True)
    return r, mean, 1 / torch.sqrt(var + eps)


def _ref_layer(x, normalized_shape, weight, bias, eps):
    r, mean, rstd = _ref_layer_stats(x, normalized_shape, eps)
    y = (r - mean) * rstd
    if weight is not None:
        y = y * to_reference(weight)
    if bias is not None:
        y = y + to_reference(bias)
    return y


def _looped(monkeypatch):
    monkeypatch.setattr(_launch, "MAX_FUSED_SIZE", 64)


@pytest.mark.rms_norm
@pytest.mark.parametrize("affine", AFFINE[:2])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{'x'.join(map(str, c[0]))}-norm{len(c[1])}")
def test_rms_norm(case, dtype, affine):
    shape, normalized = case
    x = _randn(*shape, dtype=dtype, seed=1)
    weight, _ = _params(normalized, dtype, affine)
    out = gems.rms_norm(x, list(normalized), weight, 1e-6)
    assert_close(out, _ref_rms(x, normalized, weight, 1e-6), dtype, reduce_len=math.prod(normalized))


@pytest.mark.rms_norm
@pytest.mark.parametrize("looped", [False, True], ids=["fused", "looped"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_default_eps(dtype, looped, monkeypatch):
    # eps=None means float32's epsilon for every input dtype, as torch computes
    # it (not the much larger finfo(float16).eps).
    if looped:
        _looped(monkeypatch)
    x = _randn(3, 123, dtype=dtype, seed=2) * 0.05
    out = gems.rms_norm(x, [123])
    assert_close(out, _ref_rms(x, (123,), None, torch.finfo(torch.float32).eps), dtype, reduce_len=123)


@pytest.mark.layer_norm
@pytest.mark.parametrize("affine", AFFINE)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{'x'.join(map(str, c[0]))}-norm{len(c[1])}")
def test_layer_norm(case, dtype, affine):
    shape, normalized = case
    x = _randn(*shape, dtype=dtype, seed=3, shift=2.0)
    weight, bias = _params(normalized, dtype, affine)
    out = gems.layer_norm(x, list(normalized), weight, bias, 1e-5)
    assert_close(out, _ref_layer(x, normalized, weight, bias, 1e-5), dtype, reduce_len=math.prod(normalized))


@pytest.mark.layer_norm
def test_layer_norm_eps():
    x = _randn(4, 123, seed=13) * 0.1
    out = gems.layer_norm(x, [123], eps=0.05)
    assert_close(out, _ref_layer(x, (123,), None, None, 0.05), torch.float32, reduce_len=123)


@pytest.mark.parametrize(
    "op", [pytest.param("rms_norm", marks=pytest.mark.rms_norm), pytest.param("layer_norm", marks=pytest.mark.layer_norm)]
)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 781), (2, 3, 200), (1, 65)], ids=str)
def test_norm_looped(op, shape, dtype, monkeypatch):
    # Rows wider than the fused block take the two-pass kernels.
    _looped(monkeypatch)
    assert not _launch.row_launch(math.prod(shape[:-1]), shape[-1]).fused
    x = _randn(*shape, dtype=dtype, seed=4, shift=3.0)
    weight, bias = _params(shape[-1:], dtype, "weight+bias")
    # A large eps, so a kernel that drops it fails.
    if op == "rms_norm":
        out, ref = gems.rms_norm(x, shape[-1:], weight, 0.5), _ref_rms(x, shape[-1:], weight, 0.5)
    else:
        out, ref = gems.layer_norm(x, shape[-1:], weight, bias, 0.5), _ref_layer(x, shape[-1:], weight, bias, 0.5)
    assert_close(out, ref, dtype, reduce_len=shape[-1])


@pytest.mark.layer_norm
@pytest.mark.parametrize("looped", [False, True], ids=["fused", "looped"])
def test_layer_norm_large_mean(looped, monkeypatch):
    # Values far from zero (mean/std = 300): a naive E[x^2] - E[x]^2 in fp32
    # loses the variance to cancellation.
    if looped:
        _looped(monkeypatch)
    x = _randn(4, 300, seed=5, shift=300.0)
    assert_close(gems.layer_norm(x, [300]), _ref_layer(x, (300,), None, None, 1e-5), torch.float32, reduce_len=300)


@pytest.mark.parametrize(
    "op", [pytest.param("rms_norm", marks=pytest.mark.rms_norm), pytest.param("layer_norm", marks=pytest.mark.layer_norm)]
)
@pytest.mark.parametrize("layout", ["transposed", "sliced"])
def test_norm_non_contiguous(op, layout):
    x = _randn(50, 33, seed=6).t() if layout == "transposed" else _randn(20, 99, seed=6)[::2, 1::3]
    n = x.shape[-1]
    weight, bias = _params((n,), torch.float32, "weight+bias")
    if op == "rms_norm":
        out, ref = gems.rms_norm(x, [n], weight), _ref_rms(x, (n,), weight, torch.finfo(torch.float32).eps)
    else:
        out, ref = gems.layer_norm(x, [n], weight, bias), _ref_layer(x, (n,), weight, bias, 1e-5)
    assert_close(out, ref, torch.float32, reduce_len=n)


@pytest.mark.rms_norm
@pytest.mark.layer_norm
def test_norm_mixed_parameter_dtype():
    # Half input with float32 parameters: the output keeps the input dtype.
    x = _randn(3, 123, dtype=torch.float16, seed=7)
    weight, bias = _params((123,), torch.float32, "weight+bias")
    out = gems.layer_norm(x, [123], weight, bias)
    assert out.dtype == torch.float16
    assert_close(out, _ref_layer(x, (123,), weight, bias, 1e-5), torch.float16, reduce_len=123)
    out = gems.rms_norm(x, [123], weight)
    assert out.dtype == torch.float16
    assert_close(out, _ref_rms(x, (123,), weight, torch.finfo(torch.float32).eps), torch.float16, reduce_len=123)


@pytest.mark.parametrize(
    "op", [pytest.param("rms_norm", marks=pytest.mark.rms_norm), pytest.param("layer_norm", marks=pytest.mark.layer_norm)]
)
def test_norm_shape_errors(op):
    x = _randn(3, 8)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        getattr(gems, op)(x, [4])
    with pytest.raises(RuntimeError, match="weight"):
        getattr(gems, op)(x, [8], _randn(4))


@pytest.mark.native_layer_norm
@pytest.mark.parametrize("looped", [False, True], ids=["fused", "looped"])
@pytest.mark.parametrize("affine", AFFINE)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", [((4, 123), (123,)), ((2, 3, 40), (3, 40)), ((781,), (781,))], ids=str)
def test_native_layer_norm(case, dtype, affine, looped, monkeypatch):
    if looped:
        _looped(monkeypatch)
    shape, normalized = case
    x = _randn(*shape, dtype=dtype, seed=8, shift=1.0)
    weight, bias = _params(normalized, dtype, affine)
    out, mean, rstd = norm_module.native_layer_norm(x, list(normalized), weight, bias, 1e-5)
    _, ref_mean, ref_rstd = _ref_layer_stats(x, normalized, 1e-5)
    # aten's contract: leading dims then one 1 per normalised dim; float32
    # statistics for half inputs on CUDA, the input dtype on CPU.
    stats_dtype = torch.float32 if (x.is_cuda and dtype != torch.float32) else dtype
    n = math.prod(normalized)
    assert mean.shape == rstd.shape == ref_mean.shape
    assert_close(out, _ref_layer(x, normalized, weight, bias, 1e-5), dtype, reduce_len=n)
    assert_close(mean, ref_mean, stats_dtype, reduce_len=n)
    assert_close(rstd, ref_rstd, stats_dtype, reduce_len=n)


@pytest.mark.native_layer_norm
def test_native_layer_norm_matches_aten_metadata():
    # Same shapes and dtypes as torch's own kernel on this device.
    for dtype in DTYPES:
        for normalized in ([40], [3, 40]):
            x = _randn(2, 3, 40, dtype=dtype, seed=9)
            weight, bias = _params(normalized, dtype, "weight+bias")
            ours = norm_module.native_layer_norm(x, normalized, weight, bias, 1e-5)
            theirs = torch.ops.aten.native_layer_norm.default(x, normalized, weight, bias, 1e-5)
            assert [(t.shape, t.dtype) for t in ours] == [(t.shape, t.dtype) for t in theirs]


@pytest.mark.native_layer_norm
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_native_layer_norm_float32_parameters(dtype):
    # Half input with float32 weight and bias: float32 statistics, half output
    # (aten on CPU and on CUDA alike).
    x = _randn(2, 3, 40, dtype=dtype, seed=10)
    weight, bias = _params((40,), torch.float32, "weight+bias")
    out, mean, rstd = norm_module.native_layer_norm(x, [40], weight, bias, 1e-5)
    assert (out.dtype, mean.dtype, rstd.dtype) == (dtype, torch.float32, torch.float32)
    _, ref_mean, ref_rstd = _ref_layer_stats(x, (40,), 1e-5)
    assert_close(out, _ref_layer(x, (40,), weight, bias, 1e-5), dtype, reduce_len=40)
    assert_close(mean, ref_mean, torch.float32, reduce_len=40)
    assert_close(rstd, ref_rstd, torch.float32, reduce_len=40)
    if not x.is_cuda:
        theirs = torch.ops.aten.native_layer_norm.default(x, [40], weight, bias, 1e-5)
        assert [t.dtype for t in theirs] == [dtype, torch.float32, torch.float32]
