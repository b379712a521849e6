"""Accuracy of gems.add, gems.mul, gems.gelu and gems.silu against a float64 reference."""

from __future__ import annotations

import math

import pytest
import torch

from gemswatch import gems
from gemswatch.testing.accuracy import assert_close, to_reference

# Under Triton's interpreter numpy warns about inf/NaN arithmetic that the
# kernels rely on (exp saturating to inf) or that only touches masked lanes.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# One element, odd widths, exactly one 1024-element block, several blocks
# with a ragged tail, 2-D and 3-D.
SHAPES = [(1,), (123,), (781,), (1023,), (1024,), (3, 1000), (2, 3, 129)]

BINARY = [pytest.param("add", marks=pytest.mark.add), pytest.param("mul", marks=pytest.mark.mul)]
UNARY = [
    pytest.param("gelu", marks=pytest.mark.gelu),
    pytest.param("gelu_tanh", marks=pytest.mark.gelu),
    pytest.param("silu", marks=pytest.mark.silu),
]


def _randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(gems.device, dtype)


def _gems_binary(op: str, x, y, alpha=1):
    if op == "add":
        return gems.add(x, y, alpha=alpha) if alpha != 1 else gems.add(x, y)
    return gems.mul(x, y)


def _ref_binary(op: str, x, y, alpha=1):
    x = to_reference(x) if isinstance(x, torch.Tensor) else x
    y = to_reference(y) if isinstance(y, torch.Tensor) else y
    return x + alpha * y if op == "add" else x * y


def _gems_unary(op: str, x):
    if op == "gelu":
        return gems.gelu(x)
    if op == "gelu_tanh":
        return gems.gelu(x, approximate="tanh")
    return gems.silu(x)


def _ref_unary(op: str, x):
    x = to_reference(x)
    if op == "gelu":
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    if op == "gelu_tanh":
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return x * torch.sigmoid(x)


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_binary(op, shape, dtype):
    x, y = _randn(*shape, dtype=dtype, seed=1), _randn(*shape, dtype=dtype, seed=2)
    out = _gems_binary(op, x, y)
    assert out.is_contiguous()
    assert_close(out, _ref_binary(op, x, y), dtype)


@pytest.mark.add
@pytest.mark.parametrize("dtype", DTYPES)
def test_add_alpha(dtype):
    x, y = _randn(5, 123, dtype=dtype, seed=1), _randn(5, 123, dtype=dtype, seed=2)
    assert_close(gems.add(x, y, alpha=-2.5), _ref_binary("add", x, y, alpha=-2.5), dtype)


# (input shape, other shape): trailing vector (bias), column, both sides
# broadcast, a 0-dim tensor, more dims on the right-hand side.
BROADCASTS = [((4, 33), (33,)), ((5, 1, 7), (3, 1)), ((1, 9), (17, 1)), ((6, 7), ()), ((7,), (2, 3, 7))]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_binary_broadcast(op, shapes, dtype):
    x, y = _randn(*shapes[0], dtype=dtype, seed=3), _randn(*shapes[1], dtype=dtype, seed=4)
    out = _gems_binary(op, x, y)
    assert out.shape == torch.broadcast_shapes(x.shape, y.shape)
    assert_close(out, _ref_binary(op, x, y), dtype)


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_binary_python_scalar(op, dtype):
    x = _randn(3, 781, dtype=dtype, seed=5)
    assert_close(_gems_binary(op, x, 0.75), _ref_binary(op, x, 0.75), dtype)
    # Scalar first, and an integer scalar: the dtype stays the tensor's.
    assert_close(_gems_binary(op, 3, x), _ref_binary(op, 3, x), dtype)


@pytest.mark.add
def test_add_scalar_alpha():
    x = _randn(2, 123, seed=6)
    assert_close(gems.add(x, 2.0, alpha=3), to_reference(x) + 6.0, torch.float32)


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("layout", ["transposed", "sliced", "transposed+bias", "mixed"])
def test_binary_non_contiguous(op, layout):
    base = _randn(40, 37, seed=7)
    other = _randn(40, 37, seed=8)
    if layout == "transposed":
        x, y = base.t(), other.t()
    elif layout == "sliced":
        x, y = base[::3, 1::2], other[::3, ::2][:, 1:]
    elif layout == "transposed+bias":
        x, y = base.t(), _randn(40, seed=9)
    else:  # one transposed, one row-major
        x, y = base.t(), other.t().contiguous()
    out = _gems_binary(op, x, y)
    assert_close(out, _ref_binary(op, x, y), torch.float32)


@pytest.mark.add
def test_add_transposed_keeps_layout():
    x = _randn(40, 37, seed=10).t()
    out = gems.add(x, x)
    assert out.stride() == x.stride()
    assert_close(out, 2 * to_reference(x), torch.float32)


@pytest.mark.parametrize("op", BINARY)
def test_binary_high_rank_slices(op):
    # Six non-mergeable strided dims: more than the kernel's four.
    x = _randn(4, 3, 4, 3, 4, 3, seed=11)[::2, :, ::2, :, ::2, :]
    y = _randn(3, seed=12)
    assert_close(_gems_binary(op, x, y), _ref_binary(op, x, y), torch.float32)


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize(
    "dtypes",
    [(torch.float16, torch.bfloat16), (torch.float16, torch.float32), (torch.bfloat16, torch.float32)],
    ids=lambda d: f"{d[0]}-{d[1]}".replace("torch.", ""),
)
def test_binary_type_promotion(op, dtypes):
    x, y = _randn(3, 123, dtype=dtypes[0], seed=13), _randn(3, 123, dtype=dtypes[1], seed=14)
    out = _gems_binary(op, x, y)
    expected_dtype = torch.result_type(x, y)
    assert out.dtype == expected_dtype
    assert_close(out, _ref_binary(op, x, y), expected_dtype)


@pytest.mark.parametrize("op", BINARY)
def test_binary_zero_dim_tensor_keeps_dtype(op):
    # A 0-dim float32 tensor does not promote a float16 tensor (torch rule).
    x, s = _randn(4, 9, dtype=torch.float16, seed=15), torch.tensor(1.5, device=gems.device)
    out = _gems_binary(op, x, s)
    assert out.dtype == torch.float16
    assert_close(out, _ref_binary(op, x, s), torch.float16)


@pytest.mark.parametrize("op", BINARY)
def test_binary_integer(op):
    g = torch.Generator().manual_seed(16)
    x = torch.randint(-100, 100, (5, 33), generator=g, dtype=torch.int32).to(gems.device)
    y = torch.randint(-100, 100, (33,), generator=g, dtype=torch.int32).to(gems.device)
    out = _gems_binary(op, x, y)
    assert out.dtype == torch.int32
    assert torch.equal(out.cpu(), (x + y).cpu() if op == "add" else (x * y).cpu())


@pytest.mark.parametrize("op", BINARY)
def test_binary_empty(op):
    x = _randn(0, 5, seed=17)
    assert _gems_binary(op, x, x).shape == (0, 5)


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_unary(op, shape, dtype):
    x = _randn(*shape, dtype=dtype, seed=20, scale=3.0)
    out = _gems_unary(op, x)
    assert out.dtype == dtype and out.is_contiguous()
    assert_close(out, _ref_unary(op, x), dtype)


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_tails(op, dtype):
    # Far into both tails, where gelu's erf saturates (and 16-bit gelu takes
    # its erfc-based path: no cancellation allowed for large negative x).
    x = torch.linspace(-12, 12, 2401).to(gems.device, dtype)
    assert_close(_gems_unary(op, x), _ref_unary(op, x), dtype)


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("layout", ["transposed", "sliced", "expanded"])
def test_unary_non_contiguous(op, layout):
    if layout == "transposed":
        x = _randn(33, 70, seed=21, scale=3.0).t()
    elif layout == "sliced":
        x = _randn(33, 70, seed=21, scale=3.0)[1::2, ::3]
    else:
        x = _randn(1, 70, seed=21, scale=3.0).expand(5, 70)
    out = _gems_unary(op, x)
    assert_close(out, _ref_unary(op, x), torch.float32)


@pytest.mark.parametrize("op", UNARY)
def test_unary_extremes(op):
    # Saturation: no inf/inf or 0*inf NaNs for large |x|.
    x = torch.tensor([-1e4, -30.0, -10.0, 0.0, 10.0, 30.0, 1e4], device=gems.device)
    assert_close(_gems_unary(op, x), _ref_unary(op, x), torch.float32)


@pytest.mark.parametrize("op", UNARY)
def test_unary_zero_dim_and_empty(op):
    x = torch.tensor(0.7, device=gems.device)
    out = _gems_unary(op, x)
    assert out.shape == ()
    assert_close(out, _ref_unary(op, x), torch.float32)
    assert _gems_unary(op, _randn(3, 0)).shape == (3, 0)


@pytest.mark.gelu
def test_gelu_rejects_unknown_approximation():
    with pytest.raises((ValueError, RuntimeError), match="approximate"):
        gems.gelu(_randn(4), approximate="erf")


@pytest.mark.parametrize("op", BINARY)
def test_binary_shape_mismatch_raises(op):
    with pytest.raises(RuntimeError, match="broadcast|must match"):
        _gems_binary(op, _randn(3, 4), _randn(5, 4))
