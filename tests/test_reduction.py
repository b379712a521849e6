"""Accuracy of gems.sum, gems.mean and gems.amax against a float64 reference."""

from __future__ import annotations

import math

import pytest
import torch

from gemswatch import gems
from gemswatch.gems.ops import _launch
from gemswatch.testing.accuracy import assert_close, to_reference

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
OPS = [
    pytest.param("sum", marks=pytest.mark.sum),
    pytest.param("mean", marks=pytest.mark.mean),
    pytest.param("amax", marks=pytest.mark.amax),
]
# (shape, dim): one element, odd widths along the last dim, exactly one
# 1024-wide chunk, several chunks, a middle dim (column kernel), two separate
# runs of reduced dims, everything (None), negative dims, size-1 dims.
CASES = [
    ((1,), 0),
    ((123,), -1),
    ((5, 781), 1),
    ((3, 1023), -1),
    ((2, 1024), 1),
    ((2, 2500), 1),
    ((7, 1), 1),
    ((781, 3), 0),
    ((4, 33, 6), 1),
    ((4, 5, 6), (0, 2)),
    ((4, 5, 6), (-1, -2)),
    ((3, 5, 7), None),
    ((2, 1, 9), (0, 2)),
    ((3, 4, 5, 6), (1, 3)),
]


def _randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(gems.device, dtype)


def _dims(dim, ndim: int) -> list[int]:
    if dim is None:
        return list(range(ndim))
    return [d % ndim for d in ((dim,) if isinstance(dim, int) else dim)]


def _call(op: str, x: torch.Tensor, dim, keepdim: bool = False, **kw):
    if op == "amax":
        return gems.amax(x, () if dim is None else dim, keepdim)
    return getattr(gems, op)(x, dim, keepdim, **kw)


def _ref(op: str, x: torch.Tensor, dim, keepdim: bool = False) -> torch.Tensor:
    r = to_reference(x)
    dims = _dims(dim, x.dim())
    if op == "sum":
        return r.sum(dims, keepdim=keepdim)
    if op == "mean":
        return r.mean(dims, keepdim=keepdim)
    return r.amax(dims, keepdim=keepdim)


def _reduce_len(x: torch.Tensor, dim) -> int:
    return math.prod(x.shape[d] for d in _dims(dim, x.dim()))


def _check(op: str, x: torch.Tensor, dim, keepdim: bool = False, dtype=None) -> None:
    out = _call(op, x, dim, keepdim)
    assert_close(out, _ref(op, x, dim, keepdim), dtype or x.dtype, reduce_len=_reduce_len(x, dim))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{'x'.join(map(str, c[0]))}-dim{c[1]}")
def test_reduce(op, case, dtype):
    shape, dim = case
    _check(op, _randn(*shape, dtype=dtype, seed=1), dim)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dim", [0, (0, 2), None], ids=str)
def test_reduce_keepdim(op, dim):
    x = _randn(3, 4, 5, seed=2)
    out = _call(op, x, dim, keepdim=True)
    assert out.dim() == 3
    assert_close(out, _ref(op, x, dim, keepdim=True), torch.float32, reduce_len=_reduce_len(x, dim))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("layout", ["transposed", "permuted", "sliced"])
@pytest.mark.parametrize("dim", [0, 1, (0, 2), None], ids=str)
def test_reduce_non_contiguous(op, layout, dim):
    if layout == "transposed":
        x = _randn(6, 7, 9, seed=3).transpose(0, 2)
    elif layout == "permuted":
        x = _randn(6, 7, 9, seed=3).permute(1, 2, 0)
    else:
        x = _randn(12, 7, 20, seed=3)[::2, :, 1::3]
    _check(op, x, dim)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("case", [((3, 781), 1), ((2, 3000), None), ((781, 3), 0), ((2, 500, 3), 1)], ids=str)
def test_reduce_split(op, case, monkeypatch):
    # A short grid over a long reduced axis splits it into partial results.
    monkeypatch.setattr(_launch, "REDUCE_BLOCK_SIZE", 32)
    monkeypatch.setattr(_launch, "TILE_SIZE", 256)
    shape, dim = case
    x = _randn(*shape, seed=4)
    dims = _dims(dim, x.dim())
    outer = math.prod(x.shape[: dims[0]])
    inner = math.prod(x.shape[dims[-1] + 1 :])
    assert _launch.reduce_launch(outer, _reduce_len(x, dim), inner).n_splits > 1
    _check(op, x, dim)


@pytest.mark.parametrize("op", OPS)
def test_short_reduced_axis_of_wide_columns(op):
    # The shape of a split's second pass: 100 partial rows of 300 columns fit
    # one tile of narrower column blocks, read with a single load each.
    launch = _launch.reduce_launch(1, 100, 300)
    assert launch.block_reduce >= 100 and launch.n_splits == 1
    assert launch.block_inner < min(_launch.COLUMN_BLOCK, 300)
    _check(op, _randn(100, 300, seed=9), 0)


@pytest.mark.sum
@pytest.mark.mean
def test_reduce_split_unpatched():
    # Large enough to split with the real heuristics.
    x = _randn(2, 40000, seed=5)
    assert _launch.reduce_launch(2, 40000, 1).n_splits > 1
    _check("sum", x, 1)
    _check("mean", x, None)


@pytest.mark.parametrize("op", [pytest.param("sum", marks=pytest.mark.sum), pytest.param("mean", marks=pytest.mark.mean)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduce_dtype_argument(op, dtype):
    x = _randn(4, 781, dtype=dtype, seed=6)
    out = getattr(gems, op)(x, 1, dtype=torch.float32)
    assert out.dtype == torch.float32
    assert_close(out, _ref(op, x, 1), torch.float32, reduce_len=781)


@pytest.mark.parametrize("op", OPS)
def test_reduce_zero_dim_input(op):
    x = torch.tensor(1.25, device=gems.device)
    for dim in (None, 0, -1):
        out = _call(op, x, dim)
        assert out.shape == ()
        assert_close(out, to_reference(x), torch.float32)


@pytest.mark.parametrize("op", OPS)
def test_reduce_dim_list_empty_means_all(op):
    x = _randn(3, 5, seed=7)
    out = _call(op, x, [])
    assert out.shape == ()
    assert_close(out, _ref(op, x, None), torch.float32, reduce_len=15)


@pytest.mark.sum
@pytest.mark.mean
def test_sum_mean_over_empty_dim():
    x = _randn(0, 4, seed=8)
    assert torch.equal(gems.sum(x, 0).cpu(), torch.zeros(4))
    assert gems.mean(x, 0).isnan().all()


@pytest.mark.amax
def test_amax_over_empty_dim_raises():
    with pytest.raises(IndexError):
        gems.amax(_randn(0, 4), 0)


@pytest.mark.amax
@pytest.mark.parametrize("dim", [1, 0], ids=["rows", "columns"])
def test_amax_nan_and_inf(dim):
    x = _randn(4, 300, seed=9)
    x[1, 7] = math.nan
    x[:, 11] = -math.inf
    x[2, :] = -math.inf
    x = x if dim == 1 else x.t().contiguous()
    out = gems.amax(x, dim)
    assert_close(out, to_reference(x).amax(dim), torch.float32, equal_nan=True)


@pytest.mark.sum
@pytest.mark.amax
def test_integer_and_bool():
    g = torch.Generator().manual_seed(10)
    x = torch.randint(-1000, 1000, (5, 123), generator=g, dtype=torch.int32).to(gems.device)
    assert gems.sum(x, 1).dtype == torch.int64
    assert torch.equal(gems.sum(x, 1).cpu(), x.cpu().sum(1))
    assert torch.equal(gems.amax(x, 0).cpu(), x.cpu().amax(0))
    mask = x > 0
    assert torch.equal(gems.sum(mask).cpu(), mask.cpu().sum())


@pytest.mark.mean
def test_mean_of_integers_needs_float_dtype():
    x = torch.arange(6, device=gems.device)
    with pytest.raises(RuntimeError, match="floating point"):
        gems.mean(x)
    assert_close(gems.mean(x, dtype=torch.float32), torch.tensor(2.5, dtype=torch.float64), torch.float32)


@pytest.mark.parametrize("op", OPS)
def test_reduce_bad_dims(op):
    x = _randn(3, 4)
    with pytest.raises(IndexError):
        _call(op, x, 2)
    with pytest.raises(RuntimeError, match="multiple times"):
        _call(op, x, (1, -1))
