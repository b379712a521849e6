"""Accuracy cases shared by the softmax family (softmax, log_softmax).

Black-box: the cases cover the input space a kernel's branches may depend
on (row widths around every power of two up to past 65536, every dtype in
every size class, dim 0 / middle / -1, strided and broadcast layouts,
extreme values, the ``dtype=`` argument, empty and 0-d inputs) without
knowing any kernel's blocks. Cheap, high-yield cases come first.

Each test takes the operator name from the ``op`` fixture of the test module
that imports it (tests/test_softmax.py, tests/test_log_softmax.py), so a run of
one operator's file exercises only that operator, and a candidate for it is
called in every case.
"""

from __future__ import annotations

import math

import pytest
import torch

from gemswatch import gems
from gemswatch.gems.ops import _launch
from gemswatch.testing.accuracy import assert_close, to_reference
from gemswatch.testing.cases import class_widths, record, size_tier, wide_values, with_layout

__all__ = [
    "randn",
    "reference",
    "test_widths",
    "test_dims",
    "test_layouts",
    "test_extreme_values",
    "test_infinities",
    "test_column_infinities",
    "test_dtype_argument",
    "test_float64",
    "test_float64_widths",
    "test_nan_and_infinite_rows",
    "test_small_probabilities",
    "test_zero_dim_and_empty",
    "test_random_shapes",
    "test_constant_rows",
    "test_batch_rows",
    "test_bad_dim",
    "test_library_looped",
    "test_library_persistent_rows",
]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SIZE_CLASSES = ["tiny", "small", "medium", "large", "huge"]
# Under the interpreter a 65536-wide row costs about 0.4 s: the CPU tier
# keeps a few widths of the wide classes, one on each side of the powers,
# three in the huge class (one per dtype).
_CPU_WIDE = {"large": [8193, 16383, 32769, 65536], "huge": [65537, 65536 + 999, 65536 + 2049]}


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 3.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(gems.device, dtype)


def reference(op: str, x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 result and the magnitude each element's error is judged
    against (log_softmax subtracts two terms that may cancel)."""
    r = to_reference(x)
    shifted = r - r.amax(dim, keepdim=True)
    if op == "softmax":
        e = shifted.exp()
        out = e / e.sum(dim, keepdim=True)
        return out, out.abs()
    lse = shifted.exp().sum(dim, keepdim=True).log()
    # log of a sum >= 1: its error is the sum's relative error, about 1 in
    # absolute terms however small the log is.
    return shifted - lse, shifted.abs() + lse.abs() + 1


def _describe(op: str, x: torch.Tensor, dim: int, kw: dict) -> str:
    extra = "".join(f", {k}={v}" for k, v in kw.items())
    return f"[case: {op}(x of shape {tuple(x.shape)}, {x.dtype}, stride {x.stride()}, dim={dim}{extra})]"


def _check(op: str, x: torch.Tensor, dim: int, equal_nan: bool = False, **kw) -> torch.Tensor:
    """Run the operator on ``x`` and judge it; a failure names the case.
    ``equal_nan``: NaN is expected where the reference has it (and only
    there)."""
    out_dtype = kw.get("dtype") or x.dtype
    width = x.shape[dim] if x.dim() else 1
    record(x, width=width, dim=str(dim))
    out = getattr(gems, op)(x, dim, **kw)
    try:
        assert out.shape == x.shape, f"shape {tuple(out.shape)}, expected {tuple(x.shape)}"
        src = x.to(out_dtype) if kw.get("dtype") is not None else x  # torch casts the input first
        want, scale = reference(op, src, dim) if x.dim() else reference(op, src.reshape(1), 0)
        # softmax's error is relative to each probability; log_softmax's to
        # its terms, which torch's half kernel rounds before subtracting.
        scale = scale.reshape(x.shape) if op == "log_softmax" else None
        assert_close(out, want.reshape(x.shape), out_dtype, reduce_len=width, scale=scale, rounded_terms=scale is not None,
                     equal_nan=equal_nan)
    except AssertionError as e:
        raise AssertionError(f"{e} {_describe(op, x, dim, kw)}") from None
    return out


def _logits(gen: torch.Generator, shape, dtype, kind: str = "normal") -> torch.Tensor:
    return wide_values(gen, shape, dtype, kind, device=gems.device, scale=2.0)


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


def _widths(size_class: str) -> list[int]:
    if size_tier() == "cpu" and size_class in _CPU_WIDE:
        return _CPU_WIDE[size_class]
    return class_widths(size_class)


@pytest.mark.parametrize("size_class", SIZE_CLASSES)
def test_widths(op, size_class):
    # Every width of the class once, the dtype rotating so every dtype meets
    # every class. The first case is a single element (the simplest failure
    # to read).
    gen = torch.Generator().manual_seed(SIZE_CLASSES.index(size_class))
    for i, n in enumerate(_widths(size_class)):
        rows = _rows(n, i)
        dtype = DTYPES[i % len(DTYPES)]
        _check(op, _logits(gen, (rows, n), dtype), -1)


# (shape, dim): first, middle and last dims, a size-1 softmax dim, 1-D to
# 6-D, long columns (reduced along dim 0 past one block, and past many).
DIM_CASES = [
    ((5, 3, 40), 0),
    ((2, 1030, 3), 1),
    ((3, 4, 5, 6), 2),
    ((257,), 0),
    ((6, 1, 5), 1),
    ((2, 3, 129), -2),
    ((4097, 2), 0),
    ((2, 3, 9000), -1),
    ((20000, 3), 0),  # long, few columns: a split reduced axis in the library
    ((3000, 40), 0),
    ((2, 1500, 130), 1),
    ((2**16 + 7, 3), -1),  # more rows than a grid's second dim holds (65535)
    # 5 and 6 dims (a kernel may flatten to at most 4): first, middle, last.
    ((3, 2, 2, 3, 4), 0),
    ((2, 3, 2, 3, 5), 2),
    ((2, 3, 2, 3, 70), -1),
    ((2, 2, 3, 2, 3, 4), 3),
    ((2, 1, 3, 2, 2, 33), -1),
]
if size_tier() == "gpu":
    DIM_CASES.append(((3, 2**16 + 7), 0))  # as many columns (about 4 s a case under the interpreter)


def test_dims(op):
    gen = torch.Generator().manual_seed(11)
    for i, (shape, dim) in enumerate(DIM_CASES):
        _check(op, _logits(gen, shape, DTYPES[i % len(DTYPES)]), dim)


# (layout, logical shape, dim): views a caller can pass, reduced along a
# strided dim and along a unit-stride one; a padded wide row.
LAYOUT_CASES = [
    ("transposed", (40, 33), 0),
    ("transposed", (40, 33), -1),
    ("stepped", (13, 50), -1),
    ("padded", (7, 300), -1),
    ("padded", (2, 9000), -1),
    ("expanded", (4, 3, 70), -1),
    ("expanded", (4, 70), 0),
    ("permuted", (4, 5, 6), 1),
    ("permuted", (3, 2, 4, 5), -1),
]


def test_layouts(op):
    gen = torch.Generator().manual_seed(12)
    for i, (layout, shape, dim) in enumerate(LAYOUT_CASES):
        dtype = DTYPES[i % len(DTYPES)]
        x = with_layout(lambda s: _logits(gen, s, dtype), shape, layout)
        _check(op, x, dim)


# (kind, dtypes, widths): logits of 1e4 overflow exp without the max
# subtracted, in one chunk and in many; tiny logits; bfloat16 logits beyond
# float16's range.
VALUE_CASES = [
    ("large", DTYPES, (300, 20000)),
    ("tiny", [torch.float16], (300,)),
    ("beyond_half", [torch.bfloat16], (100, 9000)),
    ("mixed", [torch.bfloat16], (1000,)),
]


def test_extreme_values(op):
    gen = torch.Generator().manual_seed(13)
    for kind, dtypes, widths in VALUE_CASES:
        for n in widths:
            for dtype in dtypes:
                _check(op, _logits(gen, (2 if n < 4096 else 1, n), dtype, kind), -1)


@pytest.mark.parametrize("n", [300, 20000], ids=["narrow", "wide"])
def test_infinities(op, n):
    x = randn(3, n, seed=7)
    x[0, 5:] = -math.inf  # masked tail: probability 0, log-probability -inf
    x[1, 0] = -math.inf
    x[2, ::7] = -math.inf
    record(x, width=n, dim="-1")
    out = getattr(gems, op)(x, -1)
    expected, scale = reference(op, x, -1)
    finite = expected.isfinite()
    assert torch.equal(out.isfinite().cpu(), finite), "the -inf entries must stay -inf (or 0) and only those"
    assert_close(out.cpu()[finite], expected[finite], torch.float32, reduce_len=n, scale=scale[finite] if op == "log_softmax" else None, rounded_terms=op == "log_softmax")


def test_column_infinities(op):
    # Down long columns: -inf through the first two thirds of one column (a
    # stretch a kernel may reduce on its own), every other entry of another,
    # and a column all -inf (NaN, as torch gives).
    x = randn(3000, 40, seed=8)
    x[:2000, 5] = -math.inf
    x[::2, 9] = -math.inf
    x[:, 7] = -math.inf
    record(x, width=3000, dim="0")
    out = getattr(gems, op)(x, 0)
    expected, scale = reference(op, x, 0)
    assert out[:, 7].isnan().all(), f"{op} of a column all -inf must be NaN, as torch's"
    keep = torch.ones(40, dtype=torch.bool)
    keep[7] = False
    out, expected = out.cpu()[:, keep], expected[:, keep]
    finite = expected.isfinite()
    assert torch.equal(out.isfinite(), finite), "the -inf entries must stay -inf (or 0) and only those"
    scale = scale[:, keep][finite] if op == "log_softmax" else None
    assert_close(out[finite], expected[finite], torch.float32, reduce_len=3000, scale=scale, rounded_terms=op == "log_softmax")


# (input dtype, dtype=, shape, dim): the half_to_float path on the first,
# a middle and the last dim (the result is judged as float32 work), a
# downcast, half to bfloat16 (torch casts the input first).
DTYPE_ARGUMENTS = [
    (torch.float16, torch.float32, (781, 3), 0),
    (torch.bfloat16, torch.float32, (2, 4500, 2), 1),
    (torch.float32, torch.float16, (3, 781), -1),
    (torch.float16, torch.bfloat16, (3, 9000), -1),
    (torch.float32, torch.float32, (3, 9000), -1),
    (torch.float16, torch.float32, (2, 150, 3), 1),
    (torch.bfloat16, torch.float32, (300, 3), 0),
    (torch.float16, torch.float32, (3, 300), -1),
]


def test_dtype_argument(op):
    gen = torch.Generator().manual_seed(14)
    for dtype, out_dtype, shape, dim in DTYPE_ARGUMENTS:
        out = _check(op, _logits(gen, shape, dtype), dim, dtype=out_dtype)
        assert out.dtype == out_dtype


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_float64(op, dim):
    # float64 is computed in float64 (judged by float64's rule) or refused
    # with TypeError, never computed in float32.
    shape = {0: (130, 3), 1: (2, 65, 3), -1: (3, 200)}[dim]
    gen = torch.Generator().manual_seed(15 + dim)
    x = _logits(gen, shape, torch.float64)
    try:
        _check(op, x, dim)
    except TypeError:
        pass
    try:
        _check(op, x.float(), dim, dtype=torch.float64)
    except TypeError:
        pass


# Widths drawn per run from each size class (huge: past 2^16, a little on
# the CPU tier).
_FLOAT64_WIDTHS = {"tiny": (2, 16), "small": (17, 1024), "medium": (1025, 8192), "large": (8193, 65536), "huge": (65537, 65536 + 4096)}


@pytest.mark.parametrize("size_class", SIZE_CLASSES)
def test_float64_widths(op, size_class, case_rng):
    # float64 (and dtype=torch.float64) in every size class: a kernel may
    # compute float64 in float32 only past some width. Rows along the last
    # dim, and as long columns below the huge class.
    n = case_rng.randint(*_FLOAT64_WIDTHS[size_class])
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    x = _logits(gen, (2 if n < 65536 else 1, n), torch.float64)
    cases = [(x, -1, {}), (x.float(), -1, {"dtype": torch.float64})]
    if size_class != "huge":
        cases.append((_logits(gen, (n, 2), torch.float64), 0, {}))
    for y, dim, kw in cases:
        try:
            _check(op, y, dim, **kw)
        except TypeError:
            pass  # refused (the contract of test_float64)


# (row, what): rows a caller's masks and overflows produce, among finite
# rows. torch gives NaN for a whole row holding NaN, +inf (inf - inf) or
# nothing but -inf (0 / 0).
_NONFINITE_ROWS = {1: "NaN", 2: "+inf", 3: "all -inf", 4: "+inf and -inf"}


@pytest.mark.parametrize("n", [300, 20000, 40000], ids=["narrow", "wide", "past-32768"])
def test_nan_and_infinite_rows(op, n):
    x = randn(6, n, seed=9)
    x[1, n // 3] = math.nan
    x[2, n - 2] = math.inf
    x[3] = -math.inf
    x[4, 1], x[4, n // 2] = math.inf, -math.inf
    _check(op, x, -1, equal_nan=True)
    if n == 300:  # and down columns
        _check(op, x.t().contiguous(), 0, equal_nan=True)


# Rows of logits spread wide (randn * 4: probabilities down to about 1e-12).
SPREAD_CASES = [((8, 64), -1), ((1, 1000), -1), ((1, 4096), -1), ((300, 2), 0), ((2, 300, 2), 1)]


def _spread_error(op: str, x: torch.Tensor, out: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each float32 result's error beyond the error its row's largest
    result has (the sum's error is common to the row and judged by the
    rule), the bound float32 work keeps it within, and x - max.

    softmax: relative to each probability; log_softmax: absolute. The bound
    is a few ulps of rounding (exp, the division or subtraction, the
    result's own rounding) plus the rounding of x - max carried through exp,
    which grows with |x - max| (GPU exp approximations stay within about
    1.2 ulps per unit of |x - max|, CUDA's __expf), and the rounding of
    x * log2(e) and max * log2(e) where exp is taken as exp2 of their
    difference."""
    eps = torch.finfo(torch.float32).eps
    r = to_reference(x)
    top = r.argmax(dim, keepdim=True)
    shifted = r - r.gather(dim, top)
    terms = 4 + 3 * shifted.abs() + r.abs() + r.gather(dim, top).abs()
    want, _ = reference(op, x, dim)
    got = to_reference(out)
    if op == "softmax":
        dev = got / want
        err = (dev - dev.gather(dim, top)).abs().nan_to_num(0.0, 0.0, 0.0)
        return err, eps * terms, shifted
    lse = (-want.gather(dim, top)).abs()  # log of the row's sum, >= 0
    dev = got - want
    err = (dev - dev.gather(dim, top)).abs()
    return err, eps * (terms + want.abs() + lse), shifted


def test_small_probabilities(op):
    # float32 results judged tightly, each against its own magnitude: a
    # softmax off by a relative 1e-6 per unit of |x - max| (a slightly wrong
    # exponent base or temperature) is 1e-5 off at spreads of 10, which the
    # per-element rule absorbs on small probabilities.
    gen = torch.Generator().manual_seed(16)
    for shape, dim in SPREAD_CASES:
        g = torch.Generator().manual_seed(int(torch.randint(1 << 30, (1,), generator=gen)))
        x = (torch.randn(shape, generator=g) * 4).to(gems.device)
        out = _check(op, x, dim)
        err, bound, shifted = _spread_error(op, x, out, dim)
        worst = int((err / bound).argmax())
        assert bool((err <= bound).all()), (
            f"{op}: error beyond float32 work against the row's largest result: at {_index_of(worst, x.shape)} "
            f"x - max = {float(shifted.flatten()[worst]):.4g}, got {float(out.flatten()[worst]):.9g}, "
            f"error {float(err.flatten()[worst]):.3g} > {float(bound.flatten()[worst]):.3g} "
            f"({'relative' if op == 'softmax' else 'absolute'}) {_describe(op, x, dim, {})}"
        )


def _index_of(flat: int, shape) -> tuple[int, ...]:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return tuple(reversed(idx))


def test_zero_dim_and_empty(op):
    x = torch.tensor(0.3, device=gems.device)
    _check(op, x, 0)
    _check(op, x, -1)
    for shape, dim in (((0, 7), -1), ((0, 7), 0), ((3, 0), -1), ((3, 0), 0)):
        x = randn(*shape)
        record(x, width=shape[dim], dim=str(dim))
        assert getattr(gems, op)(x, dim).shape == shape


@pytest.mark.parametrize("draw", range(3))
def test_random_shapes(op, draw, case_rng):
    # A shape nobody listed: a size class, a width within it, a few rows,
    # the softmax dim somewhere, a dtype and a layout, all drawn per seed.
    size_class = case_rng.choice(SIZE_CLASSES[:4] if draw < 2 else SIZE_CLASSES[2:4])
    lo, hi = {"tiny": (1, 16), "small": (17, 1024), "medium": (1025, 8192), "large": (8193, 40000)}[size_class]
    n = case_rng.randint(lo, hi)
    rows = case_rng.randint(1, max(1, 4096 // n))
    inner = case_rng.choice([1, 1, case_rng.randint(2, 5)])
    shape, dim = ((rows, n), -1) if inner == 1 else ((rows, n, inner), 1)
    dtype = case_rng.choice(DTYPES)
    layout = case_rng.choice(["contiguous", "contiguous", "transposed", "stepped", "padded"])
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    x = with_layout(lambda s: _logits(gen, s, dtype), shape, layout)
    _check(op, x, dim)


# (shape, dim, constant rows): rows whose values are all equal (uniform
# probabilities 1/n, log-probabilities -log n), among rows that are not, in
# one chunk and in many, along the last, a middle and the first dim; the
# constants exact, inexact, 0 and large (exp overflows unless the max is
# subtracted). Real rows of memory, not broadcast ones (test_layouts has
# those).
CONSTANT_CASES = [
    ((4, 2), -1, [1, 3]),
    ((5, 300), -1, [0, 2, 4]),
    ((3, 9000), -1, [1]),
    ((2, 20000), -1, [0]),
    ((3, 40, 4), 1, None),
    ((300, 3), 0, None),
]
_CONSTANTS = [0.75, 0.1, 0.0, -3.0, 1e4]


def test_constant_rows(op):
    gen = torch.Generator().manual_seed(17)
    for i, (shape, dim, rows) in enumerate(CONSTANT_CASES):
        dtype = DTYPES[i % len(DTYPES)]
        x = _logits(gen, shape, dtype)
        for j, r in enumerate(rows if rows is not None else [None]):
            c = _CONSTANTS[(2 * i + j) % len(_CONSTANTS)]
            if r is None:  # every row along ``dim`` constant, one level each
                levels = torch.arange(x.numel() // shape[dim], dtype=torch.float64) % 5 - 2
                x = levels.view(*[s if d != dim % x.dim() else 1 for d, s in enumerate(shape)]).expand(shape).to(gems.device, dtype).contiguous()
            else:
                x[r] = c
        _check(op, x, dim)
    # A whole tensor of one value, along a middle dim and the last.
    _check(op, torch.full((4, 7, 6), 2.5, device=gems.device), 1)
    _check(op, torch.full((3, 64), -0.3, device=gems.device, dtype=torch.bfloat16), -1)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f16", "bf16"])
def test_batch_rows(op, dtype, case_rng):
    # A real batch: 64 to 160 rows of 64 to 160 along the last dim (a
    # kernel's second and later tiles of rows, programs of several rows),
    # the rows in one or two leading dims, drawn per run; then as many rows
    # along a middle dim.
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    rows, n = case_rng.randint(64, 160), case_rng.randint(64, 160)
    lead = case_rng.choice([(rows,), (2, rows // 2), (rows // 8, 8)])
    layout = case_rng.choice(["contiguous", "contiguous", "padded", "stepped"])
    _check(op, with_layout(lambda s: _logits(gen, s, dtype), (*lead, n), layout), -1)
    if dtype == torch.float32:
        _check(op, _logits(gen, (rows // 8, n, 8), dtype), 1)


def test_bad_dim(op):
    with pytest.raises(IndexError):
        getattr(gems, op)(randn(3, 4), 2)


# -- the library's own paths at small sizes (skipped for a candidate) ---------


@pytest.mark.gems_impl
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f16", "bf16"])
def test_library_looped(op, dtype, monkeypatch):
    # The online row and column kernels, reached at CPU-cheap widths.
    monkeypatch.setattr(_launch, "MAX_FUSED_SIZE", 128)
    gen = torch.Generator().manual_seed(2)
    for shape, dim in (((3, 781), 1), ((2, 300, 3), 1), ((300, 5), 0), ((2, 3, 1000), -1)):
        _check(op, _logits(gen, shape, dtype), dim)
    x = randn(3, 300, seed=7)
    x[0, 5:] = -math.inf
    assert torch.equal(getattr(gems, op)(x, -1).isfinite().cpu(), reference(op, x, -1)[0].isfinite())


@pytest.mark.gems_impl
@pytest.mark.parametrize("n_rows", [13, 1030])
def test_library_persistent_rows(op, n_rows, monkeypatch):
    # Wide fused rows on a persistent grid with prefetch: under the
    # interpreter 4 programs walk the 33 tiles of 1030 rows.
    monkeypatch.setattr(_launch, "PIPELINE_MIN_BYTES", 64)
    launch = _launch.row_launch(n_rows, 100)
    grid, stages = _launch.pipelined_grid(launch.grid(n_rows)[0], launch.block_rows * launch.block_cols * 4, torch.device(gems.device))
    assert stages > 1
    for dtype in DTYPES:
        _check(op, randn(n_rows, 100, dtype=dtype, seed=8), -1)
