"""Accuracy cases shared by the softmax family (softmax, log_softmax).

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

__all__ = [
    "randn",
    "reference",
    "test_accuracy",
    "test_looped",
    "test_persistent_rows",
    "test_wider_than_fused_limit",
    "test_non_contiguous",
    "test_dtype_argument",
    "test_infinities",
    "test_zero_dim_and_empty",
    "test_bad_dim",
]

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (shape, dim): one row of one element, odd widths, exactly one block
# (1024), 1-D, 3-D along every dim (the middle and first dims take the
# column kernel), a size-1 softmax dim.
CASES = [
    ((1, 1), -1),
    ((1, 123), -1),
    ((4, 781), 1),
    ((3, 1023), -1),
    ((2, 1024), -1),
    ((257,), 0),
    ((2, 3, 129), -1),
    ((2, 3, 129), 1),
    ((5, 3, 40), 0),
    ((6, 1, 5), 1),
]


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 3.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(gems.device, dtype)


def reference(op: str, x: torch.Tensor, dim: int) -> torch.Tensor:
    r = to_reference(x)
    shifted = r - r.amax(dim, keepdim=True)
    if op == "softmax":
        e = shifted.exp()
        return e / e.sum(dim, keepdim=True)
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def _check(op: str, x: torch.Tensor, dim: int, dtype=None, **kw) -> None:
    out = getattr(gems, op)(x, dim, **kw)
    assert out.shape == x.shape
    assert_close(out, reference(op, x, dim), dtype or x.dtype, reduce_len=x.shape[dim] if x.dim() else 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{'x'.join(map(str, c[0]))}-dim{c[1]}")
def test_accuracy(op, case, dtype):
    shape, dim = case
    _check(op, randn(*shape, dtype=dtype, seed=1), dim)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "case", [((3, 781), 1), ((2, 300, 3), 1), ((300, 5), 0), ((2, 3, 1000), -1)], ids=lambda c: str(c)
)
def test_looped(op, case, dtype, monkeypatch):
    # Rows wider than the fused block take the online kernels.
    monkeypatch.setattr(_launch, "MAX_FUSED_SIZE", 128)
    shape, dim = case
    x = randn(*shape, dtype=dtype, seed=2)
    dim %= x.dim()
    inner = math.prod(shape[dim + 1 :])
    if inner == 1:
        assert not _launch.row_launch(math.prod(shape[:dim]), shape[dim]).fused
    else:
        assert not _launch.column_launch(shape[dim], inner)[2]
    _check(op, x, dim)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_rows", [13, 1030])
def test_persistent_rows(op, n_rows, dtype, monkeypatch):
    # Wide fused rows run on a persistent grid with prefetch; under the
    # interpreter 4 programs walk the 33 tiles of 1030 rows (the last one
    # partly padding).
    monkeypatch.setattr(_launch, "PIPELINE_MIN_BYTES", 64)
    launch = _launch.row_launch(n_rows, 100)
    tiles = launch.grid(n_rows)[0]
    grid, stages = _launch.pipelined_grid(tiles, launch.block_rows * launch.block_cols * dtype.itemsize, torch.device(gems.device))
    assert stages > 1 and grid[0] == min(tiles, _launch.multiprocessors(torch.device(gems.device)))
    _check(op, randn(n_rows, 100, dtype=dtype, seed=8), -1)


def test_wider_than_fused_limit(op):
    # No patching: a real row above MAX_FUSED_SIZE.
    n = _launch.MAX_FUSED_SIZE + 3000
    assert not _launch.row_launch(1, n).fused
    _check(op, randn(1, n, seed=3), -1)


@pytest.mark.parametrize("layout", ["transposed", "sliced", "permuted3d"])
@pytest.mark.parametrize("dim", [0, -1])
def test_non_contiguous(op, layout, dim):
    if layout == "transposed":
        x = randn(40, 33, seed=4).t()
    elif layout == "sliced":
        x = randn(40, 99, seed=4)[::3, 1::2]
    else:
        x = randn(4, 5, 6, seed=4).permute(2, 0, 1)
    _check(op, x, dim)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_dtype_argument(op, dtype):
    # The aten half_to_float path: half input, float32 result.
    x = randn(4, 781, dtype=dtype, seed=6)
    out = getattr(gems, op)(x, -1, dtype=torch.float32)
    assert out.dtype == torch.float32
    assert_close(out, reference(op, x, -1), torch.float32, reduce_len=781)


@pytest.mark.parametrize("fused_limit", [16384, 64], ids=["fused", "looped"])
def test_infinities(op, fused_limit, monkeypatch):
    monkeypatch.setattr(_launch, "MAX_FUSED_SIZE", fused_limit)
    x = randn(3, 300, seed=7)
    x[0, 5:] = -math.inf  # masked tail: probability 0, log-probability -inf
    x[1, 0] = -math.inf
    x[2, ::7] = -math.inf
    out = getattr(gems, op)(x, -1)
    expected = reference(op, x, -1)
    finite = expected.isfinite()
    assert torch.equal(out.isfinite().cpu(), finite), "the -inf entries must stay -inf (or 0) and only those"
    assert_close(out.cpu()[finite], expected[finite], torch.float32, reduce_len=300)


def test_zero_dim_and_empty(op):
    x = torch.tensor(0.3, device=gems.device)
    _check(op, x, 0)
    assert getattr(gems, op)(randn(0, 7), -1).shape == (0, 7)


def test_bad_dim(op):
    with pytest.raises(IndexError):
        getattr(gems, op)(randn(3, 4), 2)
