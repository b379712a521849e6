"""Accuracy of gems.sum, gems.mean and gems.amax against a float64 reference.

Black-box cases: reduced widths in every size class (powers of two and their
neighbours, drawn widths, past 65536 with an odd remainder), reduced along
the last dim, the first and a middle one, several dims, negative dims, all
dims, with and without keepdim; every dtype, ``dtype=`` accumulation
(float64 included), strided, padded, expanded and 4-dim permuted inputs,
0-d and empty inputs, values that overflow a float16 accumulator, NaN and
infinities. Sums are judged against the sum of |x| they reduce, so that
cancellation neither hides nor fakes an error.
"""

from __future__ import annotations

import math

import pytest
import torch

from gemswatch import gems
from gemswatch.testing.accuracy import assert_close, to_reference
from gemswatch.testing.cases import LAYOUTS, SIZE_CLASSES, around_powers, record, size_tier, with_layout

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
DTYPE_IDS = ["f32", "f16", "bf16", "f64"]
OPS = [
    pytest.param("sum", marks=pytest.mark.sum),
    pytest.param("mean", marks=pytest.mark.mean),
    pytest.param("amax", marks=pytest.mark.amax),
]
SUMS = [pytest.param("sum", marks=pytest.mark.sum), pytest.param("mean", marks=pytest.mark.mean)]


def _randn(gen: torch.Generator, shape, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * scale).to(gems.device, dtype)


def _gen(case_rng) -> torch.Generator:
    return torch.Generator().manual_seed(case_rng.randrange(1 << 30))


def _dims(dim, ndim: int) -> list[int]:
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return list(range(ndim))
    return sorted(d % max(ndim, 1) for d in ((dim,) if isinstance(dim, int) else dim))


def _call(op: str, x: torch.Tensor, dim, keepdim: bool = False, dtype=None):
    if op == "amax":
        return gems.amax(x, () if dim is None else dim, keepdim)
    if dtype is not None:
        return getattr(gems, op)(x, dim, keepdim, dtype=dtype)
    return getattr(gems, op)(x, dim, keepdim)


def _ref(op: str, x: torch.Tensor, dim, keepdim: bool, dtype=None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(float64 reference, the sum of |x| it reduces, for sum and mean)."""
    if dtype is not None and dtype.itemsize < x.dtype.itemsize:
        x = x.to(dtype)  # torch casts the input before a narrowing reduction
    r = to_reference(x)
    dims = _dims(dim, x.dim())
    if x.dim() == 0:
        return r, r.abs()
    if op == "amax":
        return r.amax(dims, keepdim=keepdim), None
    scale = r.abs().sum(dims, keepdim=keepdim)
    if op == "mean":
        n = math.prod(x.shape[d] for d in dims)
        return r.sum(dims, keepdim=keepdim) / n, scale / n
    return r.sum(dims, keepdim=keepdim), scale


def _check(op: str, x: torch.Tensor, dim, keepdim: bool = False, dtype=None, **context) -> None:
    out = _call(op, x, dim, keepdim, dtype)
    want, scale = _ref(op, x, dim, keepdim, dtype)
    n = math.prod(x.shape[d] for d in _dims(dim, x.dim())) if x.dim() else 1
    record(x, n, op=op, dim=str(dim), keepdim=str(keepdim))
    desc = ", ".join(
        f"{k}={v}" for k, v in dict(op=op, shape=tuple(x.shape), stride=x.stride(), dtype=x.dtype, dim=dim, keepdim=keepdim, out_dtype=dtype, **context).items()
    )
    expected_dtype = dtype or x.dtype
    if out.dtype != expected_dtype or out.shape != want.shape:
        raise AssertionError(f"[{desc}] got {out.dtype} {tuple(out.shape)}, expected {expected_dtype} {tuple(want.shape)}")
    try:
        assert_close(out, want, expected_dtype, reduce_len=1 if op == "amax" else n, equal_nan=True, scale=scale)
    except AssertionError as e:
        raise AssertionError(f"[{desc}] {e}") from None


# --- widths in every size class --------------------------------------------

# amax is slow under the interpreter (about 40 us an element), so it takes one
# width a class where sum and mean take fixed edges and draws.
FIXED_WIDTHS = {"tiny": [1, 16], "small": [17, 1023], "medium": [1025, 4097], "large": [], "huge": [2**16 + 1, 2**16 + 3001]}
GPU_WIDTHS = [2**17 + 3, 2**20 + 1]


def _widths(case_rng, op: str, name: str, dtype: torch.dtype) -> list[int]:
    lo, hi = SIZE_CLASSES[name]
    if name == "huge":
        hi = 2**16 + 2**12
        widths = FIXED_WIDTHS[name] if dtype == torch.float32 else [case_rng.randint(lo, hi)]
        if op == "amax" and dtype == torch.float32:
            widths = widths[1:]  # one interpreter-slow width: the ragged one
        return widths + (GPU_WIDTHS if size_tier() == "gpu" else [])
    if name == "large" and size_tier() == "cpu":
        hi = 2**15  # the interpreter's budget; the huge class goes past 2^16
    edges = around_powers(lo, hi)
    if op == "amax" or name == "large":
        return [case_rng.choice(edges + FIXED_WIDTHS[name])] if op == "amax" else [case_rng.randint(lo, hi)]
    drawn = [case_rng.randint(lo, hi)] + ([case_rng.choice(edges)] if name == "small" else [])
    return FIXED_WIDTHS[name] + drawn


def _width_params():
    for name in SIZE_CLASSES:
        for dtype, dtype_id in zip(DTYPES, DTYPE_IDS):
            if name == "huge" and dtype == torch.float64 and size_tier() == "cpu":
                continue
            yield pytest.param(name, dtype, id=f"{name}-{dtype_id}")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("size_class, dtype", list(_width_params()))
def test_reduce_widths(op, size_class, dtype, case_rng):
    # Each width along the last dim, and (for all but the widest) along the
    # first or a middle dim, in turn: row, column and slab reductions.
    gen = _gen(case_rng)
    wide = size_class in ("large", "huge")
    cheap = size_class in ("tiny", "small") or (op != "amax" and size_class != "huge")
    widths = _widths(case_rng, op, size_class, dtype)
    for i, w in enumerate(widths):
        rows = 1 if wide or (op == "amax" and w > 1024) else case_rng.randint(1, 3)
        # Odd widths' rows hold magnitudes beyond the next narrower type
        # (bf16 beyond fp16, fp64 beyond fp32).
        magnitude = BEYOND.get(dtype, 2.0) if i % 2 else 2.0
        x = _heavy_ends(_randn(gen, (rows, w), dtype, magnitude), -1)
        values = f"randn*{magnitude:g}"
        if op == "amax" and dtype == torch.float16:
            # All -inf in every class: a maximum that starts from the
            # dtype's lowest finite value shows.
            x, values = torch.full_like(x, -math.inf), "all -inf"
        elif op == "amax":
            # Every element negative, the last still the largest: a maximum
            # that starts from 0 (or takes masked lanes as 0) shows.
            x, values = x - (float(x.double().max()) + 1.0), "all negative"
            if dtype == torch.bfloat16 and w > 4096:
                at = case_rng.randint(4096, w - 1)  # in a wide row's later blocks
                x[0, at], values = math.nan, f"all negative, NaN at [0, {at}]"
        _check(op, x, -1, keepdim=bool(i % 2), values=values)
        if not cheap:
            continue
        if i % 2 == 0 or len(widths) == 1:
            cols = 2 if wide else case_rng.randint(2, 5)
            _check(op, _heavy_ends(_randn(gen, (w, cols), dtype, 2.0), 0), 0, keepdim=i % 4 == 0)
        if i % 2 == 1 or len(widths) == 1:
            _check(op, _heavy_ends(_randn(gen, (2, w, 2 if wide else 3), dtype, 2.0), 1), 1)


BEYOND = {torch.bfloat16: 1e6, torch.float64: 1e200}


def _heavy_ends(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The first and last elements along ``dim`` made the largest (about
    6 sqrt(width) times the mean magnitude), the last twice the first: a
    dropped head or tail (a mask or remainder off by one) shows in a long
    sum, and a dropped tail in a maximum."""
    big = (6.0 * math.sqrt(x.shape[dim]) + 0.3) * float(x.double().abs().mean())
    x.select(dim, 0).fill_(big)
    x.select(dim, -1).fill_(2 * big)
    return x


# --- dims, keepdim, layouts ----------------------------------------------------

DIMS = [None, 0, 1, 2, -1, -2, (0, 2), (-1, -3), (0, 1, 2), (2, 0), (), [1]]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reduce_dims(op, keepdim, case_rng):
    gen = _gen(case_rng)
    x = _randn(gen, (5, 6, 7), torch.float32, 2.0)
    for dim in DIMS:
        _check(op, x, dim, keepdim)
    y = _randn(gen, (3, 4, 5, 6), torch.bfloat16, 2.0)
    for dim in ((1, 3), (0, 3), (1, 2), -3, (0, 1, 3)):
        _check(op, y, dim, keepdim)
    # 5 and 6 dims (a kernel may flatten to at most 4, or wrap dims as if
    # it had): one dim, negative dims, tuples, all dims.
    z = _randn(gen, (2, 3, 3, 2, 4), torch.float32, 2.0)
    for dim in (1, 3, -2, (0, 2, 4), (1, 3), None):
        _check(op, z, dim, keepdim)
    w = _randn(gen, (2, 2, 3, 2, 3, 2), torch.float16, 2.0)
    for dim in (2, (0, 5), (1, 3, 4), -4):
        _check(op, w, dim, keepdim)


def _permuted(gen, dtype):
    base = _randn(gen, (3, 4, 5, 7), dtype, 2.0)
    yield "permute(2,0,3,1)", base.permute(2, 0, 3, 1)
    yield "permute(3,1,0,2)", base.permute(3, 1, 0, 2)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
def test_reduce_permuted_4d(op, dtype, case_rng):
    # One reduced dim of a permuted 4-dim view keeps 3 dims, in every position.
    gen = _gen(case_rng)
    for name, x in _permuted(gen, dtype):
        for dim in range(4):
            _check(op, x, dim, keepdim=bool(dim % 2), layout=name)
        _check(op, x, (1, 2), layout=name)


def _strided(gen, dtype):
    yield "transposed", _randn(gen, (33, 70), dtype, 2.0).t()
    yield "stepped", _randn(gen, (12, 7, 41), dtype, 2.0)[::2, :, 1::3]
    yield "padded-rows", _randn(gen, (9, 133), dtype, 2.0)[:, :127]
    yield "expanded", _randn(gen, (1, 65), dtype, 2.0).expand(6, 65)
    yield "expanded-middle", _randn(gen, (4, 1, 15), dtype, 2.0).expand(4, 5, 15)
    yield "permuted-3d", _randn(gen, (6, 7, 9), dtype, 2.0).permute(1, 2, 0)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dims", [(0, -1), (1, None), ((0, 1), -2)], ids=str)
def test_reduce_strided(op, dims):
    gen = torch.Generator().manual_seed(3)
    for name, x in _strided(gen, torch.float32):
        if name == "transposed":
            x[3, 5] = math.nan  # NaN propagates along both dims
        for dim in dims:
            _check(op, x, dim, keepdim=dim == 1, layout=name)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("draw", range(3))
def test_reduce_random(op, draw, case_rng):
    # An unseen shape, layout, dtype and set of dims per run (the seed replays it).
    gen = _gen(case_rng)
    dtype = case_rng.choice(DTYPES)
    rank = case_rng.randint(1, 6)
    budget = 1024 if op == "amax" else 8192
    shape = [case_rng.randint(1, int(budget ** (1 / rank))) for _ in range(rank)]
    layout = case_rng.choice(LAYOUTS)
    x = with_layout(lambda s: _randn(gen, s, dtype, 2.0), shape, layout)
    dims = case_rng.sample(range(rank), case_rng.randint(1, rank))
    dims = [d - rank if case_rng.random() < 0.5 else d for d in dims]
    dim = None if case_rng.random() < 0.15 else (dims[0] if len(dims) == 1 else tuple(dims))
    _check(op, x, dim, keepdim=case_rng.random() < 0.5, layout=layout)


@pytest.mark.parametrize("op", OPS)
def test_reduce_batch(op, case_rng):
    # A real batch: 64 to 128 rows of 64 to 128 reduced along the last dim
    # (a kernel's second and later tiles of rows), the rows in one or two
    # leading dims, each row at its own level; then (sum, mean) down its
    # columns. Drawn per run, the dtype too.
    gen = _gen(case_rng)
    top = 96 if op == "amax" else 128  # amax is slow under the interpreter
    rows, n = case_rng.randint(64, top), case_rng.randint(64, top)
    lead = case_rng.choice([(rows,), (2, rows // 2), (rows // 8, 8)])
    dtype = case_rng.choice(DTYPES)
    level = torch.randn(*lead, 1, generator=gen, dtype=torch.float64) * 4
    x = (torch.randn(*lead, n, generator=gen, dtype=torch.float64) + level).to(gems.device, dtype)
    if op == "amax":
        x[..., case_rng.randrange(n)] += 8  # one maximum a row, somewhere
    _check(op, x, -1, keepdim=case_rng.random() < 0.5, values="randn + 4 * randn per row")
    if op != "amax":
        _check(op, x.reshape(-1, n), 0, values="randn + 4 * randn per row")


# --- values ------------------------------------------------------------------


# (shape, dim, dtype, value): tensors of one value (inexact, exact, 0,
# negative, large): a sum is n * c, a mean c, an amax c (every element ties
# for the maximum); rows, columns, a middle dim, several dims and all dims,
# narrow and past 4096.
CONSTANT_CASES = [
    ((3, 300), -1, torch.float32, 0.1),
    ((2, 5000), -1, torch.bfloat16, -3.0),
    ((300, 3), 0, torch.float16, 0.7),
    ((3, 40, 5), 1, torch.float32, -0.0),
    ((4, 6, 5), (0, 2), torch.float32, 2.5e30),
    ((5, 7), None, torch.float64, 1.0 / 3.0),
]


@pytest.mark.parametrize("op", OPS)
def test_reduce_constant(op):
    for i, (shape, dim, dtype, value) in enumerate(CONSTANT_CASES):
        x = torch.full(shape, value, dtype=dtype, device=gems.device)
        _check(op, x, dim, keepdim=bool(i % 2), values=f"all {value:g}")
    if op == "amax":
        # Ties for the maximum at the first, a middle and the last element
        # of each row, and of each column.
        gen = torch.Generator().manual_seed(12)
        x = -_randn(gen, (4, 300), torch.float32).abs() - 1.0
        x[:, 0] = x[:, -1] = x[:, 150] = 5.0
        _check(op, x, -1, values="ties at 0, 150, 299")
        _check(op, x.t().contiguous(), 0, values="ties at 0, 150, 299")


@pytest.mark.parametrize("op", SUMS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("size_class", ["medium", "large", "huge"])
def test_sum_long_rows_overflow_a_half_accumulator(op, dtype, size_class, case_rng):
    # Partial sums far beyond float16's range whose totals are modest: each
    # row is +c for its first half and -c for the second (bfloat16 also with
    # c itself beyond float16). Then a long one-signed row, which a float16
    # running sum rounds away.
    gen = _gen(case_rng)
    lo, hi = SIZE_CLASSES[size_class]
    n = case_rng.randint(max(lo, 2048), min(hi, 2**16 + 2**12))
    c = 3000.0 if dtype == torch.float16 else 2.0e6
    half = torch.full((n // 2,), c, dtype=torch.float64)
    row = torch.cat([half, -half, torch.rand(n % 2, generator=gen, dtype=torch.float64)])
    x = (row + torch.rand(n, generator=gen, dtype=torch.float64)).to(gems.device, dtype)
    _check(op, x.view(1, n), 1, values=f"+-{c:g} halves")
    if n <= 2**15:  # the total of a one-signed fp16 row fits fp16 up to here
        _check(op, torch.rand((2, n), generator=gen, dtype=torch.float64).to(gems.device, dtype), -1, values="rand(0, 1)")


@pytest.mark.parametrize("op", SUMS)
@pytest.mark.parametrize("size_class", list(SIZE_CLASSES))
def test_sum_one_signed_rows(op, size_class, case_rng):
    # Float32 rows of one sign, one width a class. Where terms cancel, a
    # long sum may be off by its compute slack of sum(|x|), which can exceed
    # 0.2 % of the total; without cancellation the slack is of the total
    # itself (under 0.07 % up to 2^16 + 2^12 terms), so a 0.2 % scale error
    # confined to one class of widths shows there.
    gen = _gen(case_rng)
    lo, hi = SIZE_CLASSES[size_class]
    n = case_rng.randint(lo, min(hi, 2**16 + 2**12))
    x = (0.5 + torch.rand((2, n), generator=gen, dtype=torch.float64)).to(gems.device, torch.float32)
    _check(op, x, -1, keepdim=bool(n % 2), values="0.5 + rand")


@pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")  # the float16 total's cast to inf
@pytest.mark.parametrize("op", SUMS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_sum_16bit_small_values_and_large_totals(op, dtype, case_rng):
    # Long rows (past 1024, and past 8192) of small positive values: each
    # divided by n first would underflow float16 (bfloat16: near its
    # smallest normal). Then rows whose total is beyond float16's 65504 while
    # the mean is modest: a float16 accumulator or partial sum overflows (a
    # float16 sum is inf, as torch gives; the mean is not).
    gen = _gen(case_rng)
    smalls = (1e-2, 1e-4) if dtype == torch.float16 else (1e-2, 1e-35)
    widths = (case_rng.randint(1025, 4096), case_rng.randint(4097, 9000))
    for i, (w, scale) in enumerate(zip(widths, smalls)):
        x = ((0.5 + torch.rand((2, w), generator=gen, dtype=torch.float64)) * scale).to(gems.device, dtype)
        _check(op, x, -1, values=f"(0.5 + rand) * {scale:g}")
        if i == 0:
            _check(op, x.t(), 0, values=f"(0.5 + rand) * {scale:g}")
    if dtype != torch.float16:
        return
    w = case_rng.randint(4097, 6000)
    x = ((0.5 + torch.rand((2, w, 2), generator=gen, dtype=torch.float64)) * 30).to(gems.device, dtype)
    _check_total_beyond_half(op, x, -2, values="(0.5 + rand) * 30")
    n = 2**16 + 3001  # about 69000 values near 1, a total past 65504
    x = (0.5 + torch.rand((1, n), generator=gen, dtype=torch.float64)).to(gems.device, dtype)
    _check_total_beyond_half(op, x, None if case_rng.random() < 0.5 else -1, values="0.5 + rand")


def _check_total_beyond_half(op: str, x: torch.Tensor, dim, **context) -> None:
    if op == "mean":
        return _check(op, x, dim, **context)
    # The float16 total overflows to inf, as torch's: judged against the
    # reference rounded to float16.
    out = _call(op, x, dim)
    want = to_reference(to_reference(x).sum(() if dim is None else dim).to(x.dtype))
    assert bool(want.isinf().all())
    try:
        assert_close(out, want, x.dtype, reduce_len=x.numel())
    except AssertionError as e:
        raise AssertionError(f"[op={op}, shape={tuple(x.shape)}, dtype={x.dtype}, dim={dim}, {context}] {e}") from None


@pytest.mark.parametrize("op", SUMS)
@pytest.mark.parametrize("src", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["to-f32", "to-f64"])
def test_sum_dtype_argument_widens(op, src, dtype, case_rng):
    # 16-bit values whose sums overflow float16 unless accumulated as asked,
    # in a small row, and in rows past 4096 (and past 2^16 for one of them)
    # where partial sums must be kept as wide as asked too.
    gen = _gen(case_rng)
    x = (torch.rand((3, case_rng.randint(600, 1100)), generator=gen, dtype=torch.float64) * 60000).to(gems.device, src)
    _check(op, x, 1, dtype=dtype)
    _check(op, x.t(), 1, keepdim=True, dtype=dtype)
    wide = case_rng.randint(4097, 9000) if (src, dtype) != (torch.float16, torch.float32) else case_rng.randint(2**16 + 1, 2**16 + 2**12)
    x = (torch.rand((2, wide), generator=gen, dtype=torch.float64) * 60000).to(gems.device, src)
    _check(op, x, -1, dtype=dtype, values="rand * 60000")
    _check(op, x.view(2, 1, wide).expand(2, 2, wide), (0, 2), dtype=dtype, values="rand * 60000, expanded")


@pytest.mark.parametrize("op", SUMS)
@pytest.mark.parametrize("dim", [1, 0, None, (0, 2)], ids=str)
def test_sum_dtype_float64_accumulates_in_float64(op, dim, case_rng):
    # float32 values near its maximum: only a float64 accumulator holds the sum.
    gen = _gen(case_rng)
    shape = (2, case_rng.randint(20, 200), 3)
    big = (3.0e38 * (0.5 + torch.rand(shape, generator=gen, dtype=torch.float64) / 2)).to(gems.device, torch.float32)
    _check(op, big, dim, dtype=torch.float64, values="near float32 max")


@pytest.mark.parametrize("op", SUMS)
def test_sum_dtype_argument_narrows(op, case_rng):
    # A narrowing dtype rounds the input first (as torch does).
    gen = _gen(case_rng)
    n = case_rng.randint(600, 1100)
    _check(op, _randn(gen, (4, n), torch.float32, 3.0), -1, dtype=torch.float16)
    _check(op, _randn(gen, (n, 3), torch.float64, 3.0), 0, dtype=torch.bfloat16)


# (dtype, scale) of magnitudes beyond the next smaller float type's range.
WIDE = [(torch.bfloat16, 1e30), (torch.bfloat16, 1e-30), (torch.float32, 1e-35), (torch.float64, 1e300), (torch.float64, 1e-300)]


@pytest.mark.parametrize("op", OPS)
def test_reduce_wide_values(op, case_rng):
    gen = _gen(case_rng)
    for dtype, scale in WIDE:
        x = _randn(gen, (4, case_rng.randint(100, 300)), dtype, scale / 8 if scale > 1 else scale)
        _check(op, x, 1, values=f"randn*{scale:g}")
        _check(op, x, 0, values=f"randn*{scale:g}")


@pytest.mark.amax
def test_amax_negative_nan_and_inf():
    gen = torch.Generator().manual_seed(9)
    # All negative (a zero-initialised maximum is wrong), NaN in one row and
    # one column, -inf columns, a row of -inf, +inf in one row.
    x = -_randn(gen, (4, 300)).abs() - 0.5
    x[1, 7] = math.nan
    x[:, 11] = -math.inf
    x[2, :] = -math.inf
    x[3, 299] = math.inf
    for dtype in (torch.float32, torch.bfloat16):
        y = x.to(dtype)
        _check("amax", y, 1)
        _check("amax", y.t().contiguous(), 0)
        _check("amax", y.t(), 1)
        _check("amax", y, None)


@pytest.mark.amax
def test_amax_nan_in_wide_rows(case_rng):
    # One NaN past the 4096th element of a wide reduction along a middle dim
    # and along all dims (the last dim's wide rows: test_reduce_widths);
    # everything else negative.
    gen = _gen(case_rng)
    dtype = case_rng.choice([torch.float32, torch.bfloat16])
    w = case_rng.randint(4100, 4400)
    at = case_rng.randint(4096, w - 1)
    x = (-_randn(gen, (1, w, 2), torch.float64).abs() - 0.5).to(dtype)
    x[0, at, 1] = math.nan
    _check("amax", x, 1, values=f"NaN at [0, {at}, 1]")
    _check("amax", x[0, :, 1], None, values=f"NaN at {at}")


# Dims of a 3-dim and a 4-dim input reduced together (some, not all), keepdim
# in turn; then all of them.
SEVERAL_DIMS = [((4, 5, 6), (0, 2)), ((4, 5, 6), (1, 2)), ((4, 5, 6), (-3, -2)), ((3, 4, 5, 6), (1, 3)), ((3, 4, 5, 6), (0, 2, 3)),
                ((4, 5, 6), None)]


@pytest.mark.parametrize("op", OPS)
def test_reduce_nan_and_inf_over_several_dims(op, case_rng):
    # One NaN, one +inf and one -inf (apart, and a +inf with a -inf in one
    # slice); each propagates through a reduction over several dims.
    gen = _gen(case_rng)
    for i, (shape, dim) in enumerate(SEVERAL_DIMS):
        dtype = (torch.float32, torch.bfloat16, torch.float16)[i % 3]
        x = -_randn(gen, shape, torch.float64, 2.0).abs().to(dtype) - 0.5
        flat = x.view(-1)
        picks = case_rng.sample(range(flat.numel()), 4)
        flat[picks[0]], flat[picks[1]], flat[picks[2]], flat[picks[3]] = math.nan, math.inf, -math.inf, -math.inf
        _check(op, x, dim, keepdim=bool(i % 2), values=f"NaN, inf, -inf at flat {picks}")


@pytest.mark.parametrize("op", OPS)
def test_reduce_several_wide_rows(op, case_rng):
    # Several rows past 8192 (one past 2^15), each at its own level: partial
    # results of one row given to another, or a row's running value carried
    # into the next, show. Reduced along the last dim and along the first.
    gen = _gen(case_rng)
    dtype = case_rng.choice([torch.float32, torch.bfloat16])
    for rows, w in ((3, case_rng.randint(8193, 12000)), (2, case_rng.randint(2**15 + 1, 40000))):
        levels = torch.tensor([10.0 * (i - 1) for i in range(rows)], dtype=torch.float64).view(rows, 1)
        x = (torch.randn((rows, w), generator=gen, dtype=torch.float64) + levels).to(gems.device, dtype)
        _check(op, x, -1, keepdim=rows == 3, values="randn + 10 * (row - 1)")
        if rows == 3:
            _check(op, x.t(), 0, values="randn + 10 * (column - 1)")


@pytest.mark.amax
def test_amax_integer_extremes(case_rng):
    # int64 values below -2^31 (and -2^53: a float64 maximum rounds them)
    # and int32 values near its minimum, with a row of the minimum itself,
    # over widths that leave a partial block.
    g = _gen(case_rng)
    w = case_rng.choice([257, 300, 1025, 1037])
    for dtype, base in ((torch.int64, -(2**62)), (torch.int32, -(2**31))):
        x = (base + torch.randint(0, 2**20, (2, w), generator=g, dtype=torch.int64)).to(dtype)
        x[1] = torch.iinfo(dtype).min
        out, want = gems.amax(x.to(gems.device), -1).cpu(), x.amax(-1)
        assert out.dtype == want.dtype and torch.equal(out, want), (
            f"amax shape={tuple(x.shape)} dtype={dtype} dim=-1 values={base}+[0, 2^20), a row of {torch.iinfo(dtype).min}: "
            f"got {out.tolist()}, expected {want.tolist()}"
        )


@pytest.mark.parametrize("op", SUMS)
def test_sum_nan_and_inf(op):
    x = torch.randn(3, 200, generator=torch.Generator().manual_seed(10))
    x[0, 5], x[1, 6], x[1, 9], x[2, 3], x[2, 4] = math.nan, math.inf, 2.0, math.inf, -math.inf
    _check(op, x.to(gems.device), 1)
    _check(op, x.t().contiguous().to(gems.device), 0)


# --- 0-d, empty, integers, errors ---------------------------------------------


@pytest.mark.parametrize("op", OPS)
def test_reduce_zero_dim_input(op):
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor(1.25, device=gems.device, dtype=dtype)
        for dim in (None, 0, -1, ()):
            _check(op, x, dim)
            _check(op, x, dim, keepdim=True)


@pytest.mark.parametrize("op", OPS)
def test_reduce_empty_kept_dims(op):
    x = torch.empty(0, 4, device=gems.device)
    assert _call(op, x, 1).shape == (0,)
    assert _call(op, x, 1, keepdim=True).shape == (0, 1)
    assert _call(op, torch.empty(3, 0, 5, device=gems.device), (0, 2)).shape == (0,)


@pytest.mark.sum
@pytest.mark.mean
def test_sum_mean_over_empty_dim():
    x = torch.empty(0, 4, device=gems.device)
    assert torch.equal(gems.sum(x, 0).cpu(), torch.zeros(4))
    assert gems.sum(x).item() == 0 and gems.sum(x, 0, keepdim=True).shape == (1, 4)
    assert gems.mean(x, 0).isnan().all()


@pytest.mark.amax
def test_amax_over_empty_dim_raises():
    with pytest.raises((IndexError, RuntimeError)):
        gems.amax(torch.empty(0, 4, device=gems.device), 0)


@pytest.mark.sum
def test_sum_integer_and_bool():
    g = torch.Generator().manual_seed(10)
    x = torch.randint(-(2**20), 2**20, (5, 263), generator=g, dtype=torch.int32).to(gems.device)
    assert gems.sum(x, 1).dtype == torch.int64
    assert torch.equal(gems.sum(x, 1).cpu(), x.cpu().sum(1))
    assert torch.equal(gems.sum(x.t(), 1, keepdim=True).cpu(), x.cpu().t().sum(1, keepdim=True))
    mask = x > 0
    assert torch.equal(gems.sum(mask).cpu(), mask.cpu().sum())


# (dtype, low, high, width): integer sums past the input type's range
# (torch accumulates integers in int64), int64 terms below -2^31 and sums
# past 2^53 (a float64 accumulator rounds them).
INT_SUMS = [
    (torch.bool, 0, 2, 300),
    (torch.int8, 100, 128, 300),
    (torch.uint8, 200, 256, 300),
    (torch.int32, 2**30, 2**31, 5),
    (torch.int32, -(2**31), -(2**30), 1031),
    (torch.int64, 2**52, 2**52 + 2**20, 67),
    (torch.int64, -(2**40), -(2**32), 1025),
]


@pytest.mark.sum
@pytest.mark.parametrize("dtype, low, high, w", INT_SUMS, ids=lambda v: str(v).replace("torch.", ""))
def test_sum_integer_overflows_input_type(dtype, low, high, w, case_rng):
    g = _gen(case_rng)
    x = torch.randint(low, high, (3, w), generator=g, dtype=torch.int64).to(dtype)
    # The last dim always; the first dim or all dims in turn; and two of
    # three dims (first and last, or the last two) of a 3-dim input.
    x3 = torch.randint(low, high, (2, 3, w), generator=g, dtype=torch.int64).to(dtype)
    for dim, y in ((-1, x), case_rng.choice([(0, x.t()), (None, x)]), (case_rng.choice([(0, 2), (1, 2)]), x3)):
        got = gems.sum(y.to(gems.device)) if dim is None else gems.sum(y.to(gems.device), dim)
        want = y.sum() if dim is None else y.sum(dim)
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want), (
            f"sum shape={tuple(y.shape)} dtype={dtype} dim={dim} values=randint[{low}, {high}): "
            f"got {got.dtype} {got.cpu().reshape(-1).tolist()[:3]}, expected {want.dtype} {want.reshape(-1).tolist()[:3]}"
        )


@pytest.mark.mean
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["i32", "i64"])
def test_mean_integer_with_float_dtype(dtype, case_rng):
    # Integer sums past the input type's range, the mean asked in float64.
    g = _gen(case_rng)
    low = 2**30 if dtype == torch.int32 else 2**52
    x = torch.randint(low, 2 * low, (3, case_rng.randint(5, 40)), generator=g, dtype=torch.int64).to(gems.device, dtype)
    _check("mean", x, -1, dtype=torch.float64, values=f"randint[{low}, {2 * low})")
    _check("mean", x, None, dtype=torch.float64, values=f"randint[{low}, {2 * low})")


@pytest.mark.amax
def test_amax_integer():
    g = torch.Generator().manual_seed(10)
    x = torch.randint(-(2**20), 2**20, (5, 263), generator=g, dtype=torch.int32).to(gems.device)
    assert torch.equal(gems.amax(x, 0).cpu(), x.cpu().amax(0))
    negative = -x.abs() - 1
    assert torch.equal(gems.amax(negative, 1).cpu(), negative.cpu().amax(1))


@pytest.mark.sum
def test_sum_complex_is_right_or_refused():
    # torch sums complex tensors; a kernel that cannot must say so plainly.
    x = torch.randn(3, 17, dtype=torch.complex64, generator=torch.Generator().manual_seed(11)).to(gems.device)
    try:
        out = gems.sum(x, 1)
    except (TypeError, RuntimeError, NotImplementedError, ValueError) as e:
        assert "complex" in str(e), f"unclear error for complex64: {type(e).__name__}: {e}"
        return
    assert_close(out, x.cpu().to(torch.complex128).sum(1), torch.complex64, reduce_len=17)


@pytest.mark.mean
def test_mean_of_integers_needs_float_dtype():
    x = torch.arange(6, device=gems.device)
    with pytest.raises(RuntimeError, match="floating point|dtype"):
        gems.mean(x)
    assert_close(gems.mean(x, dtype=torch.float32), torch.tensor(2.5, dtype=torch.float64), torch.float32)


@pytest.mark.parametrize("op", OPS)
def test_reduce_bad_dims(op):
    x = torch.zeros(3, 4, device=gems.device)
    with pytest.raises(IndexError):
        _call(op, x, 2)
    with pytest.raises(RuntimeError, match="multiple times"):
        _call(op, x, (1, -1))
