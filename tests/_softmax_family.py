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
    "test_dtype_argument",
    "test_zero_dim_and_empty",
    "test_random_shapes",
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


def _check(op: str, x: torch.Tensor, dim: int, **kw) -> torch.Tensor:
    """Run the operator on ``x`` and judge it; a failure names the case."""
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
        assert_close(out, want.reshape(x.shape), out_dtype, reduce_len=width, scale=scale, rounded_terms=scale is not None)
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


# (shape, dim): first, middle and last dims, a size-1 softmax dim, 1-D and
# 4-D, a long column (reduced along dim 0 past one block).
DIM_CASES = [
    ((5, 3, 40), 0),
    ((2, 1030, 3), 1),
    ((3, 4, 5, 6), 2),
    ((257,), 0),
    ((6, 1, 5), 1),
    ((2, 3, 129), -2),
    ((4097, 2), 0),
    ((2, 3, 9000), -1),
]


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


# (input dtype, dtype=): the half_to_float path, a downcast, half to
# bfloat16 (torch casts the input first).
DTYPE_ARGUMENTS = [
    (torch.float16, torch.float32),
    (torch.bfloat16, torch.float32),
    (torch.float32, torch.float16),
    (torch.float16, torch.bfloat16),
    (torch.float32, torch.float32),
]


def test_dtype_argument(op):
    gen = torch.Generator().manual_seed(14)
    for i, (dtype, out_dtype) in enumerate(DTYPE_ARGUMENTS):
        n = 781 if i % 2 == 0 else 9000
        out = _check(op, _logits(gen, (3, n), dtype), -1, dtype=out_dtype)
        assert out.dtype == out_dtype


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
    assert torch.equal(getattr(gems, op)(x, -1).isfinite(), reference(op, x, -1)[0].isfinite())


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
