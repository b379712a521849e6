"""Accuracy of gems.softmax against a float64 reference."""

from __future__ import annotations

import math

import pytest
import torch

from gemswatch import gems
from gemswatch.gems.ops import _launch
from _softmax_family import *  # noqa: F401,F403  (the family's shared cases)
from _softmax_family import randn

# Under Triton's interpreter numpy warns about inf/NaN arithmetic that the
# kernels rely on (exp saturating to inf) or that only touches masked lanes.
pytestmark = [
    pytest.mark.softmax,
    pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter"),
]


@pytest.fixture
def op() -> str:
    return "softmax"


@pytest.mark.gems_impl
def test_softmax_transposed_keeps_layout():
    x = randn(40, 33, seed=5).t()
    out = gems.softmax(x, 0)
    assert out.stride() == x.stride()


def test_softmax_all_negative_infinity_row_is_nan():
    x = torch.full((2, 50), -math.inf, device=gems.device)
    assert gems.softmax(x, -1).isnan().all()


@pytest.mark.gems_impl
@pytest.mark.parametrize(
    "shared_memory, n_cols, dtype, prefetch",
    [
        (232448, 32768, torch.bfloat16, True),  # H200: three 64 KiB rows fit
        (166912, 32768, torch.bfloat16, False),  # A100: they would not
        (232448, 32768, torch.float32, False),  # 128 KiB rows
        (232448, 16384, torch.bfloat16, False),  # 32 KiB rows: two programs share a multiprocessor
    ],
    ids=["h200-16bit", "a100-16bit", "h200-fp32", "h200-narrow"],
)
def test_wide_rows_prefetch_only_where_shared_memory_allows(monkeypatch, shared_memory, n_cols, dtype, prefetch):
    monkeypatch.setattr(_launch, "shared_memory", lambda device: shared_memory)
    monkeypatch.setattr(_launch, "multiprocessors", lambda device: 132)
    launch = _launch.row_launch(4096, n_cols)
    tile_bytes = launch.block_rows * launch.block_cols * dtype.itemsize
    grid, stages = _launch.pipelined_grid(launch.grid(4096)[0], tile_bytes, torch.device("cuda", 0))
    if prefetch:
        assert grid == (132,) and stages * tile_bytes <= shared_memory
    else:
        assert grid == launch.grid(4096) and stages == 1


@pytest.mark.gems_impl
@pytest.mark.parametrize(
    "shape", [(1, 4096, 4096), (1, 8192, 8192), (2, 65536, 64)], ids=lambda s: "x".join(map(str, s))
)
def test_long_columns_split_to_fill_the_machine(monkeypatch, shape):
    # dim 0 of a matrix has few column blocks: one per 128 columns would leave
    # most of an H200's 132 multiprocessors idle.
    monkeypatch.setattr(_launch, "multiprocessors", lambda device: 132)
    n_outer, n, n_inner = shape
    plan = _launch.column_launch(n_outer, n, n_inner, torch.device("cuda", 0))
    programs = n_outer * _launch.cdiv(n_inner, plan.block_k) * plan.n_splits
    assert not plan.fused and programs >= 132
    assert plan.per_split % plan.block_n == 0 and plan.per_split >= 4 * plan.block_n
    assert (plan.n_splits - 1) * plan.per_split < n <= plan.n_splits * plan.per_split


@pytest.mark.gems_impl
def test_many_column_blocks_need_no_split(monkeypatch):
    monkeypatch.setattr(_launch, "multiprocessors", lambda device: 132)
    assert _launch.column_launch(32, 4096, 4096, torch.device("cuda", 0)).n_splits == 1
    # A short axis splits no further than pieces of 4 chunks.
    small = _launch.column_launch(1, 1024, 1024, torch.device("cuda", 0))
    assert small.n_splits == 1024 // (4 * small.block_n)
