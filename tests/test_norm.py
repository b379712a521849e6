"""Accuracy of gems.rms_norm, gems.layer_norm and native_layer_norm against a float64 reference.

Black-box: normalised widths around every power of two up to past 65536
(every dtype in every size class), normalized_shape over one to three
trailing dims, strided and broadcast inputs and parameters, values that
overflow a half accumulator or cancel in a naive variance, every argument
(weight and bias present or not, eps given, 0, large or None). Cheap cases
come first.
"""

from __future__ import annotations

import math

import pytest
import torch

from gemswatch import gems
from gemswatch.gems.ops import _launch
from gemswatch.gems.ops import norm as norm_module
from gemswatch.testing.accuracy import TOLERANCES, assert_close, to_reference
from gemswatch.testing.cases import class_widths, record, size_tier, wide_values, with_layout

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZE_CLASSES = ["tiny", "small", "medium", "large", "huge"]
_CPU_WIDE = {"large": [8193, 16383, 32769, 65536], "huge": [65537, 65536 + 999, 65536 + 2049]}
# Parameter sets each operator takes; tests rotate through them.
AFFINE = {"rms_norm": ["none", "weight"], "layer_norm": ["none", "weight", "bias", "weight+bias"]}
OPS = [pytest.param("rms_norm", marks=pytest.mark.rms_norm), pytest.param("layer_norm", marks=pytest.mark.layer_norm)]


def _default_eps(op: str, dtype: torch.dtype) -> float:
    # torch: rms_norm's eps=None is the eps of its compute type (float32 for
    # half inputs); layer_norm's default is 1e-5.
    if op == "layer_norm":
        return 1e-5
    return torch.finfo(torch.float64 if dtype == torch.float64 else torch.float32).eps


def _dims(x: torch.Tensor, normalized_shape) -> list[int]:
    return list(range(x.dim() - len(normalized_shape), x.dim()))


def reference(op, x, normalized, weight, bias, eps):
    """The float64 result and the magnitude of the terms of each element."""
    r = to_reference(x)
    dims = _dims(x, normalized)
    eps = _default_eps(op, x.dtype) if eps is None else eps
    if op == "rms_norm":
        rstd = 1 / torch.sqrt(r.square().mean(dims, keepdim=True) + eps)
        centred, spread = r, r.abs()
    else:
        mean = r.mean(dims, keepdim=True)
        rstd = 1 / torch.sqrt((r - mean).square().mean(dims, keepdim=True) + eps)
        centred, spread = r - mean, r.abs() + mean.abs()
    y, scale = centred * rstd, spread * rstd
    if weight is not None:
        w = to_reference(weight)
        y, scale = y * w, scale * w.abs()
    if bias is not None:
        b = to_reference(bias)
        y, scale = y + b, scale + b.abs()
    return y, scale


def _call(op, x, normalized, weight, bias, eps):
    if op == "rms_norm":
        return gems.rms_norm(x, normalized, weight, eps) if eps is not None else gems.rms_norm(x, normalized, weight)
    if eps is None:
        return gems.layer_norm(x, normalized, weight, bias)
    return gems.layer_norm(x, normalized, weight, bias, eps)


def _check(op, x, normalized, weight=None, bias=None, eps=None):
    """Run the operator and judge it; a failure names the case."""
    n = math.prod(normalized) if normalized else 1
    record(x, width=n)
    out = _call(op, x, list(normalized), weight, bias, eps)
    try:
        assert out.shape == x.shape, f"shape {tuple(out.shape)}, expected {tuple(x.shape)}"
        want, scale = reference(op, x, normalized, weight, bias, eps)
        assert_close(out, want, x.dtype, reduce_len=n, scale=scale)
    except AssertionError as e:
        params = ", ".join(
            f"{name} {tuple(t.shape)} {t.dtype} stride {t.stride()}" for name, t in (("weight", weight), ("bias", bias)) if t is not None
        )
        raise AssertionError(
            f"{e} [case: {op}(x of shape {tuple(x.shape)}, {x.dtype}, stride {x.stride()}, normalized_shape={list(normalized)}, "
            f"{params or 'no weight or bias'}, eps={eps})]"
        ) from None
    return out


def _values(gen, shape, dtype, op, kind="normal"):
    x = wide_values(gen, shape, dtype, kind, device="cpu")
    if op == "layer_norm" and kind == "normal":
        x = (x.double() + 2.0).to(dtype)  # a mean away from zero
    return x.to(gems.device)


def _params(gen, op, affine, shape, dtype):
    weight = wide_values(gen, shape, dtype, device=gems.device) if "weight" in affine else None
    bias = wide_values(gen, shape, dtype, device=gems.device) if "bias" in affine else None
    return weight, bias


def _rows(n: int, i: int) -> int:
    """Rows for the i-th width n: a few (a remainder of any row tile) while
    rows are narrow, one when wide; the GPU tier adds rows (grids of many
    programs, persistent loops)."""
    if i == 0:
        return 1
    if size_tier() == "cpu":
        # At least 512 elements: enough for the bias check to see a 0.2 %
        # scale error in bfloat16.
        return 1 if n >= 4096 else max(1 + (3 * i) % 7, 512 // n)
    return 1 + (37 * i) % 300 if n < 4096 else (5 if n <= 65536 else 2)


def _widths(size_class):
    if size_tier() == "cpu" and size_class in _CPU_WIDE:
        return _CPU_WIDE[size_class]
    return class_widths(size_class)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("size_class", SIZE_CLASSES)
def test_widths(op, size_class):
    # Every width of the class once; dtype, parameters and eps rotate so
    # every dtype meets every class, and so do the parameter sets.
    gen = torch.Generator().manual_seed(SIZE_CLASSES.index(size_class))
    affines = AFFINE[op]
    for i, n in enumerate(_widths(size_class)):
        rows = _rows(n, i)
        dtype = DTYPES[i % len(DTYPES)]
        affine = affines[(i // len(DTYPES)) % len(affines)] if n > 1 else affines[-1]
        eps = (None, 1e-5, 0.5)[(i // 2) % 3]
        weight, bias = _params(gen, op, affine, (n,), dtype)
        _check(op, _values(gen, (rows, n), dtype, op), (n,), weight, bias, eps)


# (input shape, normalized_shape): several trailing dims, 1-D input, a wide
# row spread over two dims, a single-element normalised shape, 5- and 6-dim
# inputs.
SHAPE_CASES = [
    ((2, 3, 40), (3, 40)),
    ((2, 3, 4, 50), (3, 4, 50)),
    ((781,), (781,)),
    ((3, 90, 100), (90, 100)),
    ((5, 1), (1,)),
    # 5 and 6 dims (a kernel may flatten to at most 4): the last dim, the
    # last two, the last three.
    ((2, 3, 2, 3, 40), (40,)),
    ((2, 2, 3, 2, 3, 20), (3, 20)),
    ((3, 2, 2, 3, 4, 5), (3, 4, 5)),
]


@pytest.mark.parametrize("op", OPS)
def test_normalized_shapes(op):
    # Every parameter set (none, weight, bias, both) with every shape: the
    # width of a row must come from normalized_shape, not from the weight.
    gen = torch.Generator().manual_seed(21)
    for i, (shape, normalized) in enumerate(SHAPE_CASES):
        dtype = DTYPES[i % len(DTYPES)]
        for affine in AFFINE[op]:
            weight, bias = _params(gen, op, affine, normalized, dtype)
            # A spread near sqrt(eps) every other case, so where eps goes shows.
            x = _values(gen, shape, dtype, op) * (0.1 if i % 2 else 1.0)
            _check(op, x, normalized, weight, bias, 0.01 if i % 2 else 1e-5)


@pytest.mark.parametrize("op", OPS)
def test_several_wide_rows(op, case_rng):
    # Several rows past 4096 and past 32768 (where a kernel may walk a row
    # in chunks, or give programs several rows each), each row at its own
    # level and spread: statistics carried from one row into another show.
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    dtype = case_rng.choice(DTYPES)
    for lead, n in (((3,), case_rng.randint(4097, 32768)), ((2, 3), case_rng.randint(32769, 40000))):
        rows = math.prod(lead)
        level = torch.arange(rows, dtype=torch.float64).view(*lead, 1)
        x = (torch.randn((*lead, n), generator=gen, dtype=torch.float64) * (1 + level) + 2 * level).to(gems.device, dtype)
        affine = case_rng.choice(AFFINE[op])
        weight, bias = _params(gen, op, affine, (n,), dtype)
        _check(op, x, (n,), weight, bias, case_rng.choice([None, 1e-5]))


# (layout of x, shape, layout of the parameters): views a caller can pass.
LAYOUT_CASES = [
    ("transposed", (50, 33), "contiguous"),
    ("stepped", (10, 99), "contiguous"),
    ("padded", (7, 300), "contiguous"),
    ("padded", (2, 9000), "contiguous"),
    ("expanded", (4, 3, 70), "contiguous"),
    ("permuted", (4, 5, 6), "contiguous"),
    ("contiguous", (6, 200), "stepped"),
]


@pytest.mark.parametrize("op", OPS)
def test_layouts(op):
    gen = torch.Generator().manual_seed(22)
    for i, (layout, shape, param_layout) in enumerate(LAYOUT_CASES):
        dtype = DTYPES[i % len(DTYPES)]
        x = with_layout(lambda s: _values(gen, s, dtype, op), shape, layout)
        n = shape[-1]
        weight, bias = (
            with_layout(lambda s: wide_values(gen, s, dtype, device=gems.device), (n,), param_layout)
            for _ in range(2)
        )
        _check(op, x, (n,), weight, bias if op == "layer_norm" else None, 1e-5)


@pytest.mark.parametrize("op", OPS)
def test_extreme_values(op):
    # Half inputs whose squares overflow float16 (a half accumulator), bfloat16
    # inputs beyond float16's range, tiny inputs where eps dominates, and (for
    # layer_norm) a mean 300 standard deviations from zero, which a naive
    # E[x^2] - E[x]^2 in float32 loses to cancellation; narrow and wide rows.
    gen = torch.Generator().manual_seed(23)
    for n in (300, 20000):
        _check(op, _values(gen, (2, n), torch.float16, op, "large"), (n,), None, None, 1e-5)
        _check(op, _values(gen, (2, n), torch.bfloat16, op, "beyond_half"), (n,), None, None, 1e-5)
        _check(op, (_values(gen, (2, n), torch.float32, op) * 1e-3), (n,), None, None, 1e-4)
        if op == "layer_norm":
            # Every dtype narrow, float32 and a 16-bit dtype wide (one row each).
            for dtype in DTYPES if n < 4096 else (torch.float32, torch.bfloat16):
                x = (wide_values(gen, (2 if n < 4096 else 1, n), torch.float64, device="cpu") + 300.0).to(dtype).to(gems.device)
                _check_offset(x, _check(op, x, (n,), None, None, 1e-5))
    if op == "layer_norm":
        # and past 32768, where a kernel's row no longer fits one block
        x = (wide_values(gen, (1, 40000), torch.float64, device="cpu") + 300.0).to(torch.float32).to(gems.device)
        _check_offset(x, _check(op, x, (40000,), None, None, 1e-5))


def _check_offset(x, out):
    """layer_norm of rows whose |mean| is far beyond their spread, judged
    tighter than the rule: the result's rounding plus float32 work on the
    centred values (a few ulps of |x| and about log2(n) of |mean|, the
    mean's summation), times rstd. A one-pass E[x^2] - E[x]^2 variance in
    float32 loses (mean / std)^2 ulps to cancellation."""
    n = x.shape[-1]
    r = to_reference(x)
    mean = r.mean(-1, keepdim=True)
    rstd = 1 / torch.sqrt((r - mean).square().mean(-1, keepdim=True) + 1e-5)
    want = (r - mean) * rstd
    err = (to_reference(out) - want).abs()
    eps = torch.finfo(torch.float32).eps
    bound = TOLERANCES[x.dtype].rtol * want.abs() + eps * rstd * (4 * r.abs() + 2 * math.log2(n) * mean.abs())
    worst = int((err / bound).argmax())
    assert bool((err <= bound).all()), (
        f"layer_norm of a row with mean {float(mean.flatten()[worst // n]):.6g} and std {float(1 / rstd.flatten()[worst // n]):.3g}: "
        f"error {float(err.flatten()[worst]):.3g} > {float(bound.flatten()[worst]):.3g} at flat index {worst} (float32 work on "
        f"centred values; a one-pass variance cancels) [case: layer_norm(x of shape {tuple(x.shape)}, {x.dtype}), eps=1e-05]"
    )


@pytest.mark.parametrize("op", OPS)
def test_eps_and_parameters(op):
    # eps left out, 0 and large, in narrow and wide rows; parameters in
    # float32 with a half input (the output keeps the input's dtype); for
    # layer_norm a bias without weight.
    gen = torch.Generator().manual_seed(24)
    # Large eps with small values (eps dominates the variance) in narrow
    # rows and rows past 32768.
    for i, (rows, n, eps) in enumerate(((3, 123, None), (3, 9000, None), (3, 123, 0.0), (1, 33000, 10.0), (2, 123, 10.0))):
        dtype = DTYPES[i % len(DTYPES)]
        x = _values(gen, (rows, n), dtype, op) * 0.05
        _check(op, x, (n,), None, None, eps)
    x = _values(gen, (3, 123), torch.float16, op)
    weight, bias = _params(gen, op, AFFINE[op][-1], (123,), torch.float32)
    assert _check(op, x, (123,), weight, bias, 1e-5).dtype == torch.float16
    if op == "layer_norm":
        for n in (123, 9000):
            _, bias = _params(gen, op, "bias", (n,), torch.bfloat16)
            _check(op, _values(gen, (2, n), torch.bfloat16, op), (n,), None, bias, 1e-5)


@pytest.mark.parametrize("op", OPS)
def test_float64(op):
    # float64 is computed in float64 (judged by float64's rule) or refused
    # with TypeError, never computed in float32; rms_norm's eps=None is then
    # float64's eps, which shows on values whose mean square is near 1e-10.
    gen = torch.Generator().manual_seed(25)
    for scale, eps, affine in ((1.0, None, AFFINE[op][-1]), (1e-5, None, "none"), (1.0, 0.5, "none")):
        x = (wide_values(gen, (3, 50), torch.float64, device="cpu") * scale).to(gems.device)
        weight, bias = _params(gen, op, affine, (50,), torch.float64)
        try:
            _check(op, x, (50,), weight, bias, eps)
        except TypeError:
            return


# Widths drawn per run from each size class (huge: a little past 2^16 on
# the CPU tier).
_FLOAT64_WIDTHS = {"tiny": (2, 16), "small": (17, 1024), "medium": (1025, 8192), "large": (8193, 65536), "huge": (65537, 65536 + 4096)}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("size_class", SIZE_CLASSES)
def test_float64_widths(op, size_class, case_rng):
    # float64 in every size class, computed in float64 or refused with
    # TypeError: a kernel may compute float64 in float32 only past some
    # width. eps=None is float64's eps.
    n = case_rng.randint(*_FLOAT64_WIDTHS[size_class])
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    x = wide_values(gen, (2 if n < 65536 else 1, n), torch.float64, device=gems.device)
    affine = AFFINE[op][SIZE_CLASSES.index(size_class) % len(AFFINE[op])]
    weight, bias = _params(gen, op, affine, (n,), torch.float64)
    try:
        _check(op, x, (n,), weight, bias, None)
    except TypeError:
        pass


# (input shape, normalized_shape, rows made constant): rows whose values are
# all equal among rows that are not. layer_norm's variance is 0 there and
# its result the bias (or 0), never 0 / 0; rms_norm's is x / sqrt(x^2 + eps),
# and 0 for a row of zeros. Narrow, past 4096 and past 32768; over one dim
# and over two; exact, inexact, 0 and large constants.
CONSTANT_CASES = [
    ((4, 2), (2,), [1, 3]),
    ((5, 300), (300,), [0, 2, 4]),
    ((3, 9000), (9000,), [1]),
    ((2, 33000), (33000,), [0]),
    ((3, 4, 50), (4, 50), [0, 2]),
]
_CONSTANTS = [1.5, 0.1, 0.0, -300.0, 7.0]


@pytest.mark.parametrize("op", OPS)
def test_constant_rows(op):
    gen = torch.Generator().manual_seed(26)
    for i, (shape, normalized, rows) in enumerate(CONSTANT_CASES):
        dtype = DTYPES[i % len(DTYPES)]
        x = _values(gen, shape, dtype, op)
        for j, r in enumerate(rows):
            x[r] = _CONSTANTS[(i + j) % len(_CONSTANTS)]
        for affine in AFFINE[op] if math.prod(normalized) < 4096 else AFFINE[op][-1:]:
            weight, bias = _params(gen, op, affine, normalized, dtype)
            _check(op, x, normalized, weight, bias, (None, 1e-5)[(i + len(affine)) % 2])
    # A whole tensor of one value, and of zeros.
    for value in (2.0, 0.0):
        weight, bias = _params(gen, op, AFFINE[op][-1], (64,), torch.float32)
        _check(op, torch.full((3, 64), value, device=gems.device), (64,), weight, bias, 1e-5)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f16", "bf16"])
def test_batch_rows(op, dtype, case_rng):
    # A real batch: 64 to 160 rows of 64 to 160 (a kernel's second and later
    # tiles of rows, programs of several rows), the rows in one or two
    # leading dims, each row at its own level and spread, drawn per run.
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    rows, n = case_rng.randint(64, 160), case_rng.randint(64, 160)
    lead = case_rng.choice([(rows,), (2, rows // 2), (rows // 8, 8)])
    rows = math.prod(lead)
    level = torch.randn(rows, 1, generator=gen, dtype=torch.float64)
    spread = 0.5 + torch.rand(rows, 1, generator=gen, dtype=torch.float64)
    x = (torch.randn(rows, n, generator=gen, dtype=torch.float64) * spread + level).view(*lead, n).to(dtype)
    layout = case_rng.choice(["contiguous", "contiguous", "padded", "stepped"])
    x = x.to(gems.device) if layout == "contiguous" else _relayout(x.to(gems.device), layout)
    weight, bias = _params(gen, op, case_rng.choice(AFFINE[op]), (n,), dtype)
    _check(op, x, (n,), weight, bias, case_rng.choice([None, 1e-5]))


def _relayout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """``x``'s values in a padded-row or stepped view."""
    n = x.shape[-1]
    if layout == "padded":
        wide = torch.zeros(*x.shape[:-1], n + 3, dtype=x.dtype, device=x.device)
        wide[..., :n] = x
        return wide[..., :n]
    wide = torch.zeros(*x.shape[:-1], 2 * n + 1, dtype=x.dtype, device=x.device)
    wide[..., 1::2] = x
    return wide[..., 1::2]


@pytest.mark.parametrize("op", OPS)
def test_empty(op):
    for shape, normalized in (((0, 8), (8,)), ((4, 0), (0,))):
        x = torch.randn(shape, device=gems.device)
        record(x, width=normalized[0])
        assert _call(op, x, list(normalized), None, None, None).shape == shape


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("draw", range(3))
def test_random_shapes(op, draw, case_rng):
    # A shape nobody listed: a width from a size class, a few rows, one or
    # two normalised dims, a dtype, parameters, eps and a layout, all drawn
    # per seed.
    lo, hi = case_rng.choice([(1, 16), (17, 1024), (1025, 8192), (8193, 40000)] if draw else [(8193, 40000)])
    n = case_rng.randint(lo, hi)
    rows = case_rng.randint(1, max(1, 4096 // n))
    dtype = case_rng.choice(DTYPES)
    affine = case_rng.choice(AFFINE[op])
    eps = case_rng.choice([None, 1e-5, 1e-2])
    layout = case_rng.choice(["contiguous", "contiguous", "transposed", "stepped", "padded"])
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    x = with_layout(lambda s: _values(gen, s, dtype, op), (rows, n), layout)
    weight, bias = _params(gen, op, affine, (n,), dtype)
    _check(op, x, (n,), weight, bias, eps)


@pytest.mark.parametrize("op", OPS)
def test_norm_shape_errors(op):
    x = torch.randn(3, 8, device=gems.device)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        getattr(gems, op)(x, [4])
    with pytest.raises(RuntimeError, match="weight"):
        getattr(gems, op)(x, [8], torch.randn(4, device=gems.device))


# -- native_layer_norm (the library's; no candidate replaces it) -------------


def _ref_stats(x, normalized, eps):
    r = to_reference(x)
    dims = _dims(x, normalized)
    mean = r.mean(dims, keepdim=True)
    return mean, 1 / torch.sqrt((r - mean).square().mean(dims, keepdim=True) + eps)


@pytest.mark.native_layer_norm
@pytest.mark.parametrize("affine", AFFINE["layer_norm"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("case", [((4, 123), (123,)), ((2, 3, 40), (3, 40)), ((781,), (781,)), ((2, 40000), (40000,))], ids=str)
def test_native_layer_norm(case, dtype, affine):
    shape, normalized = case
    gen = torch.Generator().manual_seed(8)
    x = _values(gen, shape, dtype, "layer_norm")
    weight, bias = _params(gen, "layer_norm", affine, normalized, dtype)
    out, mean, rstd = norm_module.native_layer_norm(x, list(normalized), weight, bias, 1e-5)
    ref_mean, ref_rstd = _ref_stats(x, normalized, 1e-5)
    # aten's contract: leading dims then one 1 per normalised dim; float32
    # statistics for half inputs on CUDA, the input dtype on CPU.
    stats_dtype = torch.float32 if (x.is_cuda and dtype != torch.float32) else dtype
    n = math.prod(normalized)
    assert mean.shape == rstd.shape == ref_mean.shape
    want, scale = reference("layer_norm", x, normalized, weight, bias, 1e-5)
    assert_close(out, want, dtype, reduce_len=n, scale=scale)
    assert_close(mean, ref_mean, stats_dtype, reduce_len=n, scale=to_reference(x).abs().amax(_dims(x, normalized), keepdim=True))
    assert_close(rstd, ref_rstd, stats_dtype, reduce_len=n)


@pytest.mark.native_layer_norm
def test_native_layer_norm_of_empty_rows():
    # [4, 0]: the statistics of an empty row are nan (mean of nothing), as aten's.
    x = torch.randn(4, 0, device=gems.device)
    out, mean, rstd = norm_module.native_layer_norm(x, [0], None, None, 1e-5)
    theirs = torch.ops.aten.native_layer_norm.default(x.cpu(), [0], None, None, 1e-5)
    assert out.shape == (4, 0) and mean.shape == theirs[1].shape and rstd.shape == theirs[2].shape
    assert torch.equal(mean.cpu().isnan(), theirs[1].isnan()) and torch.equal(rstd.cpu().isnan(), theirs[2].isnan())


@pytest.mark.native_layer_norm
def test_native_layer_norm_matches_aten_metadata():
    # Same shapes and dtypes as torch's own kernel on this device.
    for dtype in DTYPES:
        for normalized in ([40], [3, 40]):
            x = torch.randn(2, 3, 40, device=gems.device).to(dtype)
            weight, bias = torch.randn(normalized, device=gems.device).to(dtype), torch.randn(normalized, device=gems.device).to(dtype)
            ours = norm_module.native_layer_norm(x, normalized, weight, bias, 1e-5)
            theirs = torch.ops.aten.native_layer_norm.default(x, normalized, weight, bias, 1e-5)
            assert [(t.shape, t.dtype) for t in ours] == [(t.shape, t.dtype) for t in theirs]


@pytest.mark.native_layer_norm
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_native_layer_norm_float32_parameters(dtype):
    # Half input with float32 weight and bias: float32 statistics, half output
    # (aten on CPU and on CUDA alike).
    gen = torch.Generator().manual_seed(10)
    x = _values(gen, (2, 3, 40), dtype, "layer_norm")
    weight, bias = _params(gen, "layer_norm", "weight+bias", (40,), torch.float32)
    out, mean, rstd = norm_module.native_layer_norm(x, [40], weight, bias, 1e-5)
    assert (out.dtype, mean.dtype, rstd.dtype) == (dtype, torch.float32, torch.float32)
    ref_mean, ref_rstd = _ref_stats(x, (40,), 1e-5)
    want, scale = reference("layer_norm", x, (40,), weight, bias, 1e-5)
    assert_close(out, want, dtype, reduce_len=40, scale=scale)
    assert_close(mean, ref_mean, torch.float32, reduce_len=40, scale=to_reference(x).abs().amax(-1, keepdim=True))
    assert_close(rstd, ref_rstd, torch.float32, reduce_len=40)


# -- the library's own two-pass kernels at small widths (skipped for a candidate)


@pytest.mark.gems_impl
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f16", "bf16"])
def test_library_looped(op, dtype, monkeypatch):
    monkeypatch.setattr(_launch, "MAX_FUSED_SIZE", 64)
    gen = torch.Generator().manual_seed(4)
    for shape in ((3, 781), (2, 3, 200), (1, 65)):
        assert not _launch.row_launch(math.prod(shape[:-1]), shape[-1]).fused
        weight, bias = _params(gen, op, AFFINE[op][-1], shape[-1:], dtype)
        _check(op, _values(gen, shape, dtype, op), shape[-1:], weight, bias, 0.5)
    if op == "layer_norm":
        out, mean, rstd = norm_module.native_layer_norm(_values(gen, (4, 123), dtype, op), [123], None, None, 1e-5)
        assert mean.isfinite().all() and rstd.isfinite().all()
