"""Accuracy of gems.add, gems.mul, gems.gelu and gems.silu against a float64 reference.

Black-box cases: the suite knows nothing of any kernel's blocks or branches,
so it covers what an elementwise kernel's branches can depend on: element
counts from 1 to past 2^16 (powers of two and their neighbours, plus sizes
drawn per run), every dtype in every size class, 1- to 6-dim and strided,
permuted, broadcast, 0-d and empty operands, values that are not small
integers (which fp32 adds exactly) and that do not fit fp16 in bf16, inf and
NaN, and every argument (add's alpha, gelu's approximate).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from gemswatch import gems
from gemswatch.testing.accuracy import assert_close, to_reference
from gemswatch.testing.cases import LAYOUTS, SIZE_CLASSES, around_powers, describe_layout, record, size_tier, wide_values, with_layout

# Under Triton's interpreter numpy warns about inf/NaN arithmetic that the
# kernels rely on (exp saturating to inf) or that only touches masked lanes.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
DTYPE_IDS = ["f32", "f16", "bf16", "f64"]

BINARY = [pytest.param("add", marks=pytest.mark.add), pytest.param("mul", marks=pytest.mark.mul)]
UNARY = [
    pytest.param("gelu", marks=pytest.mark.gelu),
    pytest.param("gelu_tanh", marks=pytest.mark.gelu),
    pytest.param("silu", marks=pytest.mark.silu),
]

# Element counts in every size class of the shared table: a few fixed edges
# (powers of two and neighbours, where block masks and vector widths change)
# and one or two drawn per run. The interpreter affords one size a dtype in
# the large classes.
FIXED_SIZES = {"tiny": [1, 3, 16], "small": [17, 127, 1024], "medium": [1025, 4097], "large": [], "huge": [2**16 + 1]}
GPU_SIZES = [2**20 + 1, 2**22 + 3]  # the float64 reference and comparison on the host bound these


def _values(gen: torch.Generator, n: int, dtype, wide: bool) -> torch.Tensor:
    """randn * 3, or with ``wide`` magnitudes the next narrower type cannot
    hold: fp64 beyond fp32's 3.4e38. bf16 always mixes them in, in every
    size (a kernel may take a float16 path for some sizes only): every third
    element beyond fp16's 65504, every third below its smallest subnormal."""
    if dtype == torch.bfloat16:
        x = _randn(gen, (n,), dtype, 3.0)
        x[1::3] = wide_values(gen, (len(range(1, n, 3)),), dtype, "beyond_half", device=gems.device)
        x[2::3] = wide_values(gen, (len(range(2, n, 3)),), dtype, "tiny", device=gems.device)
        return x
    if wide and dtype == torch.float64:
        return _randn(gen, (n,), dtype, 1e200)
    return _randn(gen, (n,), dtype, 3.0)


def _sizes(case_rng, name: str, dtype: torch.dtype) -> list[int]:
    lo, hi = SIZE_CLASSES[name]
    if name == "huge":
        hi = 2**16 + 2**12
        sizes = FIXED_SIZES[name] if dtype == torch.float32 else [case_rng.randint(lo, hi)]
        return sizes + (GPU_SIZES if size_tier() == "gpu" else [])
    if name == "large" and size_tier() == "cpu":
        hi = 2**15  # the interpreter's budget; the huge class goes past 2^16
    sizes = FIXED_SIZES[name] + [case_rng.randint(lo, hi)]
    if name == "small":
        sizes.append(case_rng.choice(around_powers(lo, hi)))
    return sizes


def _size_params():
    # Every dtype in every class, float64 included: a kernel may compute
    # float64 in float32 only past some size.
    for name in SIZE_CLASSES:
        for dtype, dtype_id in zip(DTYPES, DTYPE_IDS):
            yield pytest.param(name, dtype, id=f"{name}-{dtype_id}")


def _ctx(**what) -> str:
    return ", ".join(f"{k}={v}" for k, v in what.items())


def _check(out, want, dtype, context: str, **kw) -> None:
    """assert_close, naming the case (shape, dtype, layout) on failure."""
    try:
        assert_close(out, want, dtype, **kw)
    except AssertionError as e:
        raise AssertionError(f"[{context}] {e}") from None


def _randn(gen: torch.Generator, shape, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * scale).to(gems.device, dtype)


def _band(gen: torch.Generator, shape, dtype, exponent: float) -> torch.Tensor:
    """Random signs and magnitudes in [10^e, 10^(e+1)): one band per call, so
    the output-scaled atol of the comparison stays within a decade."""
    mag = 10.0 ** (exponent + torch.rand(tuple(shape), generator=gen, dtype=torch.float64))
    sign = torch.randint(0, 2, tuple(shape), generator=gen, dtype=torch.float64) * 2 - 1
    return (mag * sign).to(gems.device, dtype)


# --- add and mul --------------------------------------------------------------


def _call_binary(op: str, x, y, alpha=None):
    if op == "mul":
        return gems.mul(x, y)
    return gems.add(x, y) if alpha is None else gems.add(x, y, alpha=alpha)


def _ref_binary(op: str, x, y, alpha=None):
    x = to_reference(x) if isinstance(x, torch.Tensor) else x
    y = to_reference(y) if isinstance(y, torch.Tensor) else y
    if op == "mul":
        return x * y
    return x + (1 if alpha is None else alpha) * y


# Numbers and alphas in these tests are exact in every float dtype: torch
# rounds a number to the tensor's dtype on some devices and not on others.
def _check_binary(op: str, x, y, alpha=None, **context) -> None:
    out = _call_binary(op, x, y, alpha)
    dtype = torch.result_type(x, y)
    first, second = (x, y) if isinstance(x, torch.Tensor) else (y, x)
    other = describe_layout(second) if isinstance(second, torch.Tensor) else "number"
    record(first, out.numel(), op=op, other=other, alpha=str(alpha))
    desc = _ctx(op=op, x=_describe(x), y=_describe(y), alpha=alpha, **context)
    want, scale = _ref_binary(op, x, y, alpha), _add_scale(op, x, y, alpha)
    judged = _terms_agree(op, x, y, alpha, dtype, want.shape)
    if judged is not None:
        out, want, scale = out[judged.to(out.device)], want[judged], scale.expand(judged.shape)[judged]
    _check(out, want, dtype, desc, equal_nan=True, scale=scale)


def _terms(x, y, alpha) -> tuple[torch.Tensor, torch.Tensor]:
    """x and alpha * y in float64 (numbers as 0-dim tensors)."""
    x, y = (to_reference(v) if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=torch.float64) for v in (x, y))
    return x, (1 if alpha is None else alpha) * y


def _add_scale(op: str, x, y, alpha):
    """An add's error is judged against its terms, |x| + |alpha * y|: where
    they cancel, the rounding of alpha * y in fp32 is honest. A product's
    against |x * y| itself, so that tiny products beside huge ones are judged."""
    a, b = _terms(x, y, alpha)
    total = a.abs() + b.abs() if op == "add" else a.abs() * b.abs()
    return torch.where(total.isfinite(), total, torch.zeros_like(total))


def _terms_agree(op: str, x, y, alpha, dtype, shape):
    """For add with alpha != 1 in a 16-bit dtype, the elements whose terms
    do not cancel, else None: torch on the CPU rounds alpha * y to the dtype
    before adding, which is honest, but off by half an ulp of alpha * y where
    the sum is much smaller (the fp32 and fp64 cases judge those)."""
    if op != "add" or alpha in (None, 1) or dtype.itemsize > 2:
        return None
    a, b = _terms(x, y, alpha)
    return (a * b >= 0).expand(shape)


def _describe(v) -> str:
    if not isinstance(v, torch.Tensor):
        return repr(v)
    return f"{tuple(v.shape)}/{str(v.dtype).removeprefix('torch.')}/stride{v.stride()}"


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("size_class, dtype", list(_size_params()))
def test_binary_sizes(op, size_class, dtype, case_rng):
    # Flat contiguous operands of every class; every other size also gives
    # add an alpha != 1.
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    for i, n in enumerate(_sizes(case_rng, size_class, dtype)):
        # add's bf16 y holds the same magnitudes at the same places (a tiny
        # sum of tiny terms); mul's is randn, so products stay in bf16's range.
        x = _values(gen, n, dtype, wide=bool(i % 2))
        y = _values(gen, n, dtype, wide=False) if op == "add" else _randn(gen, (n,), dtype)
        _check_binary(op, x, y, alpha=-1.75 if op == "add" and i % 2 else None, n=n)


# dtype -> (exponent of x, exponent of y) bands that keep add's sums and
# mul's products inside the dtype: bf16 gets magnitudes beyond fp16's range
# (above 65504 and below its subnormals), fp64 beyond fp32's, fp16 its
# subnormals.
ADD_BANDS = {
    torch.float32: [(-30, -30), (18, 15)],
    torch.float16: [(-6, -6), (3, 2)],
    torch.bfloat16: [(5, 5), (-12, -12), (20, 17)],
    torch.float64: [(-200, -200), (200, 197)],
}
MUL_BANDS = {
    torch.float32: [(-20, -10), (18, 1)],
    torch.float16: [(-3, -2), (2, 0)],
    torch.bfloat16: [(5, 0), (-12, -1), (18, 1)],
    torch.float64: [(-200, -100), (200, 100)],
}


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_binary_wide_values(op, dtype, case_rng):
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    n = case_rng.randint(700, 1300)
    for ex, ey in (ADD_BANDS if op == "add" else MUL_BANDS)[dtype]:
        x, y = _band(gen, (n,), dtype, ex), _band(gen, (n,), dtype, ey)
        _check_binary(op, x, y, alpha=1.5 if op == "add" else None, bands=(ex, ey))


# (input shape, other shape): trailing vector (bias), column, both sides
# broadcast, a 0-dim tensor, more dims on the right-hand side, 4- to 6-dim,
# and a bias over a row wider than common blocks.
BROADCASTS = [
    ((4, 33), (33,)),
    ((5, 1, 7), (3, 1)),
    ((1, 9), (17, 1)),
    ((6, 7), ()),
    ((7,), (2, 3, 7)),
    ((2, 1, 3, 5), (4, 1, 1)),
    ((3, 1025), (1025,)),
    ((6, 33), (6, 1)),
    ((3, 4, 5), (1, 4, 1)),
    ((2, 1, 3, 1, 5), (4, 3, 1, 1)),  # 5 and 6 dims
    ((2, 3, 1, 2, 1, 3), (1, 1, 4, 1, 2, 1)),
]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_binary_broadcast(op, shapes, case_rng):
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    dtype = case_rng.choice(DTYPES)
    x, y = _randn(gen, shapes[0], dtype, 3.0), _randn(gen, shapes[1], dtype)
    # add: alpha != 1 on one order, the default on the other, in turn.
    alphas = case_rng.choice([(-2.5, None), (None, 0.375)])
    _check_binary(op, x, y, alpha=alphas[0] if op == "add" else None)
    _check_binary(op, y, x, alpha=alphas[1] if op == "add" else None)  # the broadcast operand first


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_binary_number_operand(op, dtype, case_rng):
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    x = _randn(gen, (3, case_rng.randint(300, 1100)), dtype, 3.0)
    _check_binary(op, x, 0.71875)
    _check_binary(op, 3, x)  # a number first; an int keeps the tensor's dtype
    _check_binary(op, -1.375, x[:, ::2])
    if op == "add":
        _check_binary(op, x, 2.25, alpha=3)
        _check_binary(op, 3.5, x, alpha=-2.5)  # alpha scales the tensor, not the number
        _check_binary(op, 2, x.t(), alpha=0.5)


@pytest.mark.parametrize("op", BINARY)
def test_binary_zero_dim_operands(op):
    gen = torch.Generator().manual_seed(15)
    x, s = _randn(gen, (4, 9), torch.float16), torch.tensor(1.5, device=gems.device)
    # A 0-dim float32 tensor does not promote a float16 tensor (torch rule).
    assert _call_binary(op, x, s).dtype == torch.float16
    _check_binary(op, x, s)
    _check_binary(op, s, x)
    _check_binary(op, s, torch.tensor(-2.75, device=gems.device, dtype=torch.float64))
    if op == "add":
        _check_binary(op, s, x, alpha=2.5)


def _layouts(gen: torch.Generator, dtype):
    """(name, x, y) pairs of non-contiguous operands of matching shapes."""
    a, b = _randn(gen, (40, 37), dtype, 3.0), _randn(gen, (40, 37), dtype)
    c, d = _randn(gen, (6, 5, 7, 9), dtype, 3.0), _randn(gen, (6, 5, 7, 9), dtype)
    yield "transposed", a.t(), b.t()
    yield "sliced-step", a[::3, 1::2], b[::3, ::2][:, 1:]
    yield "transposed+row-major", a.t(), b.t().contiguous()
    yield "transposed+bias", a.t(), _randn(gen, (40,), dtype)
    yield "permuted-4d", c.permute(2, 0, 3, 1), d.permute(2, 0, 3, 1)
    yield "permuted-4d+contiguous", c.permute(3, 1, 0, 2), d.permute(3, 1, 0, 2).contiguous()
    yield "sliced-3d+expanded", c[1::2, :, ::3, 2], _randn(gen, (1, 5, 3), dtype).expand(3, 5, 3)
    yield "six-strided-dims", _randn(gen, (4, 3, 4, 3, 4, 3), dtype)[::2, :, ::2, :, ::2, :], _randn(gen, (3,), dtype)
    e, f = _randn(gen, (2, 3, 4, 3, 5), dtype, 3.0), _randn(gen, (2, 3, 4, 3, 5), dtype)
    yield "five-dims", e, f
    yield "permuted-5d", e.permute(4, 2, 0, 3, 1), f.permute(4, 2, 0, 3, 1)
    yield "six-dims", e.view(2, 3, 4, 3, 5, 1).transpose(0, 5), f.view(2, 3, 4, 3, 5, 1).transpose(0, 5).contiguous()


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_binary_non_contiguous(op, dtype):
    gen = torch.Generator().manual_seed(7)
    for name, x, y in _layouts(gen, dtype):
        _check_binary(op, x, y, alpha=0.75 if op == "add" else None, layout=name)


def _huge_views(gen, dtype):
    """(name, view) pairs of non-contiguous views past 2^16 elements, where
    a kernel may take another path."""
    yield "transposed", _randn(gen, (263, 270), dtype, 3.0).t()
    yield "padded-rows", _randn(gen, (281, 256), dtype, 3.0)[:, :251]
    yield "stepped", _randn(gen, (130, 1100), dtype, 3.0)[:, 1::2]


@pytest.mark.parametrize("op", BINARY)
def test_binary_huge_non_contiguous(op, case_rng):
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    dtype = case_rng.choice(DTYPES)
    for name, x in _huge_views(gen, dtype):
        y = _randn(gen, x.shape, dtype) if name != "transposed" else _randn(gen, x.shape[::-1], dtype).t()
        _check_binary(op, x, y, alpha=0.75 if op == "add" else None, layout=name)


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("draw", range(3))
def test_binary_random(op, draw, case_rng):
    # An unseen shape, dtype, layout and alpha per run (the seed replays it).
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    dtype = case_rng.choice(DTYPES)
    rank = case_rng.randint(1, 6)
    shape = [case_rng.randint(1, int(4096 ** (1 / rank))) for _ in range(rank)]
    layout = case_rng.choice(["contiguous", "transposed", "sliced", "broadcast", "number", "number-first"])
    alpha = case_rng.choice([None, case_rng.randint(-24, 24) / 8]) if op == "add" else None
    x = _randn(gen, shape, dtype, 3.0)
    if layout == "transposed":
        x = x.transpose(0, -1)
    elif layout == "sliced":
        x = _randn(gen, [s * 2 for s in shape], dtype, 3.0)[(slice(None, None, 2),) * len(shape)]
    y = _randn(gen, x.shape, dtype)
    if layout == "broadcast":
        y = _randn(gen, [1] + list(x.shape[1:]), dtype)
    elif layout in ("number", "number-first"):
        y = case_rng.randint(-128, 128) / 32
    if layout == "number-first":
        x, y = y, x
    _check_binary(op, x, y, alpha, draw=layout)


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize(
    "dtypes",
    [(torch.float16, torch.bfloat16), (torch.float16, torch.float32), (torch.bfloat16, torch.float64), (torch.int32, torch.float16)],
    ids=lambda d: f"{d[0]}-{d[1]}".replace("torch.", ""),
)
def test_binary_type_promotion(op, dtypes):
    gen = torch.Generator().manual_seed(13)
    if dtypes[0].is_floating_point:
        x = _randn(gen, (3, 123), dtypes[0], 3.0)
    else:
        x = torch.randint(-9, 9, (3, 123), generator=gen, dtype=dtypes[0]).to(gems.device)
    y = _randn(gen, (3, 123), dtypes[1])
    out = _call_binary(op, x, y)
    assert out.dtype == torch.result_type(x, y)
    _check_binary(op, x, y)


@pytest.mark.parametrize("op", BINARY)
def test_binary_integer(op):
    gen = torch.Generator().manual_seed(16)
    x = torch.randint(-100, 100, (5, 33), generator=gen, dtype=torch.int32).to(gems.device)
    y = torch.randint(-100, 100, (33,), generator=gen, dtype=torch.int32).to(gems.device)
    expected = (x.cpu() + y.cpu() if op == "add" else x.cpu() * y.cpu())
    out = _call_binary(op, x, y)
    assert out.dtype == torch.int32 and torch.equal(out.cpu(), expected)
    # A float number promotes to the default float dtype.
    _check_binary(op, x, 0.5)
    if op == "add":
        assert torch.equal(gems.add(x, y, alpha=3).cpu(), x.cpu() + 3 * y.cpu())


# (dtype, low, high of |x|, low, high of |y|, add's alpha): integers whose
# results a float path rounds: int32 sums and products past 2^24 (float32's
# mantissa), int64 ones past 2^53 (float64's); random signs, no overflow.
ADD_INTS = [(torch.int32, 2**27, 2**28, 0, 2**20, -3), (torch.int64, 2**58, 2**59, 0, 2**40, 3)]
MUL_INTS = [(torch.int32, 30000, 46000, 30000, 46000, None), (torch.int64, 2**29, 2**31, 2**29, 2**31, None)]


def _signed_ints(gen, shape, dtype, low: int, high: int) -> torch.Tensor:
    mag = torch.randint(low, high, tuple(shape), generator=gen, dtype=torch.int64)
    return (mag * (torch.randint(0, 2, tuple(shape), generator=gen, dtype=torch.int64) * 2 - 1)).to(dtype)


@pytest.mark.parametrize("op", BINARY)
def test_binary_integer_large_magnitudes(op, case_rng):
    # Judged exactly (on the CPU, in the integer dtype): a kernel that
    # computes integers through float32 or float64 loses the low bits.
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    w = case_rng.randint(100, 3000)
    for dtype, lo, hi, ylo, yhi, alpha in ADD_INTS if op == "add" else MUL_INTS:
        x, y = _signed_ints(gen, (3, w), dtype, lo, hi), _signed_ints(gen, (w,), dtype, ylo, yhi)
        number = int(y[0])  # a Python int operand as large as the tensor's others
        for a, b in ((x, y), (y, x), (x.t(), x.t().flip(0)), (x, number), (number, x)):
            got = _call_binary(op, *(v.to(gems.device) if isinstance(v, torch.Tensor) else v for v in (a, b)), alpha)
            want = torch.add(a, b, alpha=alpha) if op == "add" else torch.mul(a, b)
            record(x, got.numel(), op=op, other="number" if isinstance(b, int) else describe_layout(b), alpha=str(alpha))
            assert got.dtype == want.dtype and torch.equal(got.cpu(), want), (
                f"{op}({_describe(a)}, {_describe(b)}, alpha={alpha}) with |values| in [{lo}, {hi}): "
                f"{int((got.cpu() != want).sum())} of {want.numel()} elements differ, "
                f"e.g. got {got.cpu().reshape(-1)[:2].tolist()}, expected {want.reshape(-1)[:2].tolist()}"
            )


# 0-dim tensors of another dtype category take part in type promotion (a
# number does not): an int32 tensor with a 0-dim float64 tensor is float64,
# with a 0-dim float16 one float16; a 0-dim int64 tensor keeps int32.
ZERO_DIM_OTHERS = [(torch.float64, 1e300), (torch.float64, 0.1), (torch.float16, 1.5), (torch.bfloat16, -2.5e30), (torch.int64, -7)]


@pytest.mark.parametrize("op", BINARY)
def test_binary_zero_dim_promotes_integers(op):
    x = torch.arange(-6, 6, dtype=torch.int32, device=gems.device).reshape(3, 4) * 5
    for dtype, value in ZERO_DIM_OTHERS:
        s = torch.tensor(value, dtype=dtype, device=gems.device)
        for a, b in ((x, s), (s, x.t())):
            alpha = 2 if op == "add" else None
            want_dtype = torch.result_type(a, b)
            got = _call_binary(op, a, b, alpha)
            assert got.dtype == want_dtype, f"{op}({_describe(a)}, {_describe(b)}): got {got.dtype}, expected {want_dtype} (torch's promotion)"
            if want_dtype.is_floating_point:
                _check_binary(op, a, b, alpha)
            else:
                want = torch.add(a.cpu(), b.cpu(), alpha=alpha) if op == "add" else torch.mul(a.cpu(), b.cpu())
                assert torch.equal(got.cpu(), want), f"{op}({_describe(a)}, {_describe(b)}): got {got.cpu().tolist()}, expected {want.tolist()}"


@pytest.mark.add
def test_add_integer_with_float_alpha_raises():
    # torch refuses a float alpha for integer tensors rather than truncate it.
    x = torch.arange(6, dtype=torch.int64, device=gems.device)
    with pytest.raises((RuntimeError, TypeError, ValueError), match="alpha"):
        gems.add(x, x, alpha=2.5)


@pytest.mark.parametrize("op", BINARY)
def test_binary_inf_nan(op):
    inf, nan = math.inf, math.nan
    x = torch.tensor([inf, -inf, inf, nan, 1.5, 0.0, -0.0, 3.0e38, -2.5], device=gems.device)
    y = torch.tensor([-inf, -inf, 2.0, 1.0, nan, inf, -inf, 3.0e38, 0.0], device=gems.device)
    for dtype, alpha in ((torch.float32, None), (torch.bfloat16, None), (torch.float32, -0.5)):
        if alpha is not None and op == "mul":
            continue
        a, b = x.to(dtype), y.to(dtype)
        # Overflow to inf is the right answer: round the reference to the dtype.
        want = to_reference(_ref_binary(op, a, b, alpha).to(dtype))
        _check(_call_binary(op, a, b, alpha), want, dtype, _ctx(op=op, dtype=dtype, alpha=alpha), equal_nan=True)


@pytest.mark.parametrize("op", BINARY)
def test_binary_empty(op):
    gen = torch.Generator().manual_seed(17)
    x = _randn(gen, (0, 5))
    assert _call_binary(op, x, x).shape == (0, 5)
    assert _call_binary(op, x, _randn(gen, (5,))).shape == (0, 5)
    assert _call_binary(op, _randn(gen, (3, 1, 2)), _randn(gen, (0, 1))).shape == (3, 0, 2)


@pytest.mark.parametrize("op", BINARY)
def test_binary_shape_mismatch_raises(op):
    gen = torch.Generator().manual_seed(18)
    with pytest.raises(RuntimeError, match="broadcast|must match|size"):
        _call_binary(op, _randn(gen, (3, 4)), _randn(gen, (5, 4)))


# --- gelu and silu ------------------------------------------------------------


def _call_unary(op: str, x):
    if op == "gelu":
        return gems.gelu(x)
    if op == "gelu_tanh":
        return gems.gelu(x, approximate="tanh")
    return gems.silu(x)


def _ref_unary(op: str, x):
    x = to_reference(x)
    if op == "silu":
        return F.silu(x)
    return F.gelu(x, approximate="tanh" if op == "gelu_tanh" else "none")


def _check_unary(op: str, x, **context) -> None:
    out = _call_unary(op, x)
    record(x, op=op)
    assert out.dtype == x.dtype and out.shape == x.shape, f"{op}: got {out.dtype} {tuple(out.shape)} for {_describe(x)}"
    # Judged against |x|: gelu's and silu's tails (x * Phi(x), x * sigmoid(x)
    # for x << 0) are small through cancellation in torch's own formulas.
    scale = to_reference(x).abs().nan_to_num(posinf=0.0)
    _check(out, _ref_unary(op, x), x.dtype, _ctx(op=op, x=_describe(x), **context), equal_nan=True, scale=scale)


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("size_class, dtype", list(_size_params()))
def test_unary_sizes(op, size_class, dtype, case_rng):
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    for i, n in enumerate(_sizes(case_rng, size_class, dtype)):
        _check_unary(op, _values(gen, n, dtype, wide=bool(i % 2)), n=n)


# Exponent bands: large and tiny magnitudes (bf16 beyond fp16's range, fp64
# beyond fp32's), and the tails around +-10 where gelu's erf saturates.
UNARY_BANDS = {
    torch.float32: [-20, 1, 15],
    torch.float16: [-6, 1, 3],
    torch.bfloat16: [-12, 1, 5, 20],
    torch.float64: [-200, 1, 200],
}


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_unary_wide_values(op, dtype, case_rng):
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    n = case_rng.randint(700, 1300)
    for exponent in UNARY_BANDS[dtype]:
        _check_unary(op, _band(gen, (n,), dtype, exponent), band=exponent)
    # Both tails with the body: no 1 - 1 cancellation, no inf/inf or 0*inf NaN.
    x = torch.cat([torch.linspace(-12, 12, 2401, dtype=torch.float64), torch.tensor([-1e4, -30.0, 30.0, 1e4], dtype=torch.float64)])
    _check_unary(op, x.to(gems.device, dtype), values="linspace(-12, 12)")


@pytest.mark.parametrize("op", UNARY)
def test_unary_inf_nan(op):
    x = torch.tensor([math.inf, -math.inf, math.nan, 0.0, -0.0, 1.0], device=gems.device)
    for dtype in (torch.float32, torch.bfloat16):
        _check_unary(op, x.to(dtype))


def _unary_layouts(gen: torch.Generator, dtype):
    yield "transposed", _randn(gen, (33, 70), dtype, 3.0).t()
    yield "sliced-step", _randn(gen, (33, 70), dtype, 3.0)[1::2, ::3]
    yield "expanded", _randn(gen, (1, 70), dtype, 3.0).expand(5, 70)
    yield "padded-rows", _randn(gen, (9, 130), dtype, 3.0)[:, :127]
    yield "permuted-3d", _randn(gen, (5, 7, 33), dtype, 3.0).permute(2, 0, 1)
    yield "sliced-3d", _randn(gen, (6, 9, 40), dtype, 3.0)[::2, 1:, ::3]
    yield "permuted-4d", _randn(gen, (4, 5, 6, 7), dtype, 3.0).permute(1, 3, 0, 2)
    yield "strided-4d", _randn(gen, (4, 6, 5, 14), dtype, 3.0)[:, ::2, 1:, ::2].transpose(1, 3)
    yield "six-strided-dims", _randn(gen, (4, 3, 4, 3, 4, 3), dtype, 3.0)[::2, :, ::2, :, ::2, :]
    yield "five-dims", _randn(gen, (2, 3, 4, 3, 5), dtype, 3.0)
    yield "permuted-5d", _randn(gen, (2, 3, 4, 3, 5), dtype, 3.0).permute(3, 0, 4, 1, 2)
    yield "six-dims", _randn(gen, (2, 3, 2, 3, 2, 5), dtype, 3.0)


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["f32", "f16"])
def test_unary_non_contiguous(op, dtype):
    gen = torch.Generator().manual_seed(21)
    for name, x in _unary_layouts(gen, dtype):
        _check_unary(op, x, layout=name)


@pytest.mark.parametrize("op", UNARY)
def test_unary_huge_non_contiguous(op, case_rng):
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    dtype = case_rng.choice(DTYPES)
    for name, x in _huge_views(gen, dtype):
        _check_unary(op, x, layout=name)


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("draw", range(2))
def test_unary_random(op, draw, case_rng):
    # An unseen shape, layout and dtype per run (the seed replays it).
    gen = torch.Generator().manual_seed(case_rng.randrange(1 << 30))
    dtype = case_rng.choice(DTYPES)
    rank = case_rng.randint(1, 6)
    shape = [case_rng.randint(1, int(4096 ** (1 / rank))) for _ in range(rank)]
    layout = case_rng.choice(LAYOUTS)
    x = with_layout(lambda s: _randn(gen, s, dtype, 4.0), shape, layout)
    _check_unary(op, x, draw=layout)


@pytest.mark.parametrize("op", UNARY)
def test_unary_zero_dim_and_empty(op):
    for dtype in (torch.float32, torch.float64):
        _check_unary(op, torch.tensor(0.7, device=gems.device, dtype=dtype))
    assert _call_unary(op, torch.empty(3, 0, device=gems.device)).shape == (3, 0)
    assert _call_unary(op, torch.empty(0, device=gems.device, dtype=torch.bfloat16)).shape == (0,)


@pytest.mark.gelu
def test_gelu_rejects_unknown_approximation():
    with pytest.raises((ValueError, RuntimeError), match="approximate"):
        gems.gelu(torch.ones(4, device=gems.device), approximate="erf")
