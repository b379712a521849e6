"""Accuracy of gems.mm, gems.addmm and gems.addmm_ against a float64 reference."""

from __future__ import annotations

import types

import pytest
import torch

from gemswatch import gems
from gemswatch.gems.ops import mm as mm_module
from gemswatch.testing.accuracy import assert_close, to_reference

DTYPES = [
    pytest.param(torch.float32, id="float32"),
    pytest.param(torch.float16, id="float16"),
    pytest.param(torch.bfloat16, id="bfloat16"),
]
# (M, N, K): one element, single tiles, ragged edges in every dimension,
# K = 1 (no accumulation), several K tiles.
SHAPES = [(1, 1, 1), (16, 33, 64), (33, 16, 100), (64, 100, 33), (100, 64, 1), (1, 100, 16), (64, 64, 160)]
# How each operand is laid out in memory: "n" row-major, "t" a transposed view.
LAYOUTS = ["nn", "tn", "nt", "tt"]


def _randn(*shape: int, dtype: torch.dtype, seed: int, layout: str = "n") -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if layout == "t":  # same logical shape, column-major storage
        return torch.randn(tuple(reversed(shape)), generator=g).to(gems.device, dtype).t()
    return torch.randn(shape, generator=g).to(gems.device, dtype)


def _operands(M: int, N: int, K: int, dtype: torch.dtype, layout: str = "nn"):
    return _randn(M, K, dtype=dtype, seed=1, layout=layout[0]), _randn(K, N, dtype=dtype, seed=2, layout=layout[1])


def _ref_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return to_reference(a) @ to_reference(b)


def _shape_id(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


@pytest.mark.mm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
def test_mm(shape, dtype):
    M, N, K = shape
    a, b = _operands(M, N, K, dtype)
    out = gems.mm(a, b)
    assert out.is_contiguous()
    assert_close(out, _ref_mm(a, b), dtype, reduce_len=K)


@pytest.mark.mm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_mm_transposed(layout, dtype):
    M, N, K = 33, 64, 100
    a, b = _operands(M, N, K, dtype, layout)
    assert_close(gems.mm(a, b), _ref_mm(a, b), dtype, reduce_len=K)


# Marked addmm, the operator it calls: a case must run the candidate of the
# operator its marker names (the per-case invocation check).
@pytest.mark.addmm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_mm_tma_kernel(monkeypatch, layout, dtype):
    # The descriptor (TMA) kernel normally takes only large products on
    # Hopper; force it here (Triton's interpreter runs descriptors too).
    if gems.device == "cuda" and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tensor descriptors need compute capability 9.0 or newer")
    monkeypatch.setattr(mm_module, "_use_tma", lambda *args: True)
    M, N, K = 40, 24, 72  # 16-byte aligned rows in every dtype; ragged tiles
    a, b = _operands(M, N, K, dtype, layout)
    bias = _randn(N, dtype=dtype, seed=3)
    out = gems.addmm(bias, a, b, beta=0.5, alpha=2.0)
    assert_close(out, 0.5 * to_reference(bias) + 2.0 * _ref_mm(a, b), dtype, reduce_len=K)


@pytest.mark.mm
def test_mm_strided_slices():
    # Row and column strides that are neither 1 nor the row length.
    a = _randn(40, 70, dtype=torch.float32, seed=3)[::2, 1::3]  # (20, 23)
    b = _randn(46, 50, dtype=torch.float32, seed=4)[::2, ::2]  # (23, 25)
    assert_close(gems.mm(a, b), _ref_mm(a, b), torch.float32, reduce_len=23)


@pytest.mark.mm
@pytest.mark.parametrize("shape", [(0, 5, 3), (4, 0, 3), (4, 5, 0)], ids=["M0", "N0", "K0"])
def test_mm_empty(shape):
    M, N, K = shape
    a, b = _operands(M, N, K, torch.float32)
    out = gems.mm(a, b)
    assert out.shape == (M, N)
    assert_close(out, _ref_mm(a, b), torch.float32)


@pytest.mark.mm
@pytest.mark.gems_impl
def test_mm_shape_mismatch_names_both_shapes():
    a = torch.zeros(2, 3, device=gems.device)
    b = torch.zeros(4, 5, device=gems.device)
    with pytest.raises(RuntimeError, match=r"\(2, 3\).*\(4, 5\)"):
        gems.mm(a, b)


@pytest.mark.mm
def test_mm_rejects_mixed_dtypes():
    a = torch.zeros(2, 3, device=gems.device)
    with pytest.raises(RuntimeError, match="same dtype"):
        gems.mm(a, a.t().to(torch.float16))


@pytest.mark.mm
@pytest.mark.gems_impl
def test_mm_rejects_float64():
    a = torch.zeros(2, 3, device=gems.device)
    with pytest.raises(TypeError, match="float64"):
        gems.mm(a.double(), a.t().double())


# Bias shapes addmm broadcasts to (M, N): full, row vector, column, scalar.
BIASES = {"full": lambda M, N: (M, N), "row": lambda M, N: (N,), "col": lambda M, N: (M, 1), "scalar": lambda M, N: ()}
SCALES = [(1, 1), (0.5, 2.0), (0, 1.5), (-1, 0)]  # (beta, alpha)


@pytest.mark.addmm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", list(BIASES))
@pytest.mark.parametrize("shape", [(16, 33, 64), (33, 100, 16)], ids=_shape_id)
def test_addmm_bias(shape, bias, dtype):
    M, N, K = shape
    a, b = _operands(M, N, K, dtype)
    inp = _randn(*BIASES[bias](M, N), dtype=dtype, seed=5)
    out = gems.addmm(inp, a, b)
    assert out.shape == (M, N)
    assert_close(out, to_reference(inp) + _ref_mm(a, b), dtype, reduce_len=K)


@pytest.mark.addmm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("beta, alpha", SCALES)
def test_addmm_scales(beta, alpha, dtype):
    M, N, K = 33, 16, 64
    a, b = _operands(M, N, K, dtype, "tn")
    inp = _randn(N, dtype=dtype, seed=6)
    out = gems.addmm(inp, a, b, beta=beta, alpha=alpha)
    assert_close(out, beta * to_reference(inp) + alpha * _ref_mm(a, b), dtype, reduce_len=K)


@pytest.mark.addmm
def test_addmm_beta_zero_ignores_nan_input():
    # As in torch: with beta == 0 the input is not read, so NaN/inf vanish.
    a, b = _operands(8, 8, 8, torch.float32)
    inp = torch.full((8, 8), float("nan"), device=gems.device)
    assert_close(gems.addmm(inp, a, b, beta=0), _ref_mm(a, b), torch.float32, reduce_len=8)


@pytest.mark.addmm
@pytest.mark.gems_impl
def test_addmm_bad_bias_names_shapes():
    a, b = _operands(4, 5, 3, torch.float32)
    with pytest.raises(RuntimeError, match=r"\(3,\).*\(4, 5\)"):
        gems.addmm(torch.zeros(3, device=gems.device), a, b)


@pytest.mark.addmm_
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("beta, alpha", [(1, 1), (0.5, -2.0), (0, 1)])
def test_addmm_inplace(beta, alpha, dtype):
    M, N, K = 33, 64, 16
    a, b = _operands(M, N, K, dtype, "nt")
    inp = _randn(M, N, dtype=dtype, seed=7)
    expected = beta * to_reference(inp) + alpha * _ref_mm(a, b)
    ptr = inp.data_ptr()
    out = gems.addmm_(inp, a, b, beta=beta, alpha=alpha)
    assert out is inp and inp.data_ptr() == ptr
    assert_close(inp, expected, dtype, reduce_len=K)


@pytest.mark.addmm_
def test_addmm_inplace_transposed_input():
    M, N, K = 16, 33, 8
    a, b = _operands(M, N, K, torch.float32)
    inp = _randn(M, N, dtype=torch.float32, seed=8, layout="t")  # column-major (M, N) view
    expected = to_reference(inp) + _ref_mm(a, b)
    assert gems.addmm_(inp, a, b) is inp
    assert_close(inp, expected, torch.float32, reduce_len=K)


@pytest.mark.addmm_
@pytest.mark.gems_impl
def test_addmm_inplace_aliasing_operand():
    # input is also mat1: every program must read the original values.
    x = _randn(20, 20, dtype=torch.float32, seed=9)
    expected = to_reference(x) + to_reference(x) @ to_reference(x)
    assert gems.addmm_(x, x, x) is x
    assert_close(x, expected, torch.float32, reduce_len=20)


@pytest.mark.addmm_
@pytest.mark.gems_impl
def test_addmm_inplace_wrong_shape_names_shapes():
    a, b = _operands(4, 5, 3, torch.float32)
    with pytest.raises(RuntimeError, match=r"\(5,\).*\(4, 5\)"):
        gems.addmm_(torch.zeros(5, device=gems.device), a, b)


@pytest.mark.mm
@pytest.mark.gems_impl
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["nn", "nt", "tn"])
@pytest.mark.parametrize("splits", [2, 3, 5])
def test_split_k_matches_reference(splits, layout, dtype):
    # K = 100 in tiles of 16 is 7 K tiles: the splits get 4+3, 3+3+1 and
    # 2+2+2+1+0 of them (an empty split must contribute zeros).
    M, N, K = 20, 33, 100
    a, b = _operands(M, N, K, dtype, layout)
    bias = _randn(N, dtype=dtype, seed=3).expand(M, N)
    out = torch.empty(M, N, dtype=dtype, device=gems.device)
    upcast = gems.device == "cpu" and dtype == torch.bfloat16
    common = dict(HAS_BIAS=True, DOT_PRECISION=mm_module._dot_precision(a, upcast), UPCAST=upcast)
    mm_module._split(a, b, out, bias, 2.0, 0.5, common, (16, 16, 16, 2, 4), splits)
    assert_close(out, 0.5 * to_reference(bias) + 2.0 * _ref_mm(a, b), dtype, reduce_len=K)


# On a GPU, products this large are tuned on first use: the tuner's trial runs
# must leave addmm_'s input (also its output) as it was, and few output tiles
# send them through the split-K choice too.
tuned_on_gpu = pytest.mark.skipif(gems.device != "cuda", reason="tuning happens on a GPU only")


@pytest.mark.addmm_
@tuned_on_gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(256, 256, 512), (16, 512, 4096), (2048, 2048, 64)], ids=_shape_id)
def test_addmm_inplace_first_tuned_call(shape, dtype):
    M, N, K = shape
    a, b = _operands(M, N, K, dtype)
    inp = _randn(M, N, dtype=dtype, seed=10)
    expected = 0.5 * to_reference(inp) + _ref_mm(a, b)
    gems.addmm_(inp, a, b, beta=0.5)
    assert_close(inp, expected, dtype, reduce_len=K)


@pytest.mark.mm
@tuned_on_gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(16, 1024, 4096), (1024, 16, 4096), (512, 512, 2048)], ids=_shape_id)
def test_mm_few_output_tiles(shape, dtype):
    M, N, K = shape
    a, b = _operands(M, N, K, dtype, "nt")
    assert_close(gems.mm(a, b), _ref_mm(a, b), dtype, reduce_len=K)


@pytest.mark.mm
@pytest.mark.gems_impl
@pytest.mark.parametrize("tf32, dtype, expected", [
    (True, torch.float32, "tf32x3"), (False, torch.float32, "ieee"), (False, torch.bfloat16, "tf32"),
])  # fmt: skip
def test_fp32_products_use_tensor_cores_only_where_they_exist(monkeypatch, tf32, dtype, expected):
    # A pre-Ampere or AMD GPU has no TF32: its fp32 products stay exact.
    monkeypatch.setattr(mm_module, "interpreted", False)
    monkeypatch.setattr(mm_module, "_has_tf32", lambda index: tf32)
    fake_cuda_matrix = types.SimpleNamespace(dtype=dtype, is_cuda=True, device=torch.device("cuda", 0))
    assert mm_module._dot_precision(fake_cuda_matrix, upcast=False) == expected


@pytest.mark.mm
@pytest.mark.gems_impl
def test_tf32_products_get_k_major_copies_of_large_operands():
    a = _randn(512, 64, dtype=torch.float32, seed=1, layout="t")  # column-major A
    b = _randn(64, 512, dtype=torch.float32, seed=2)  # row-major B
    ka, kb = mm_module._k_major(a, b, "tf32x3")
    assert ka.stride(1) == 1 and kb.stride(0) == 1  # A row-major, B column-major
    assert torch.equal(ka, a) and torch.equal(kb, b)
    same = mm_module._k_major(a, b, "ieee")  # exact products keep the layout
    assert same[0] is a and same[1] is b
    skinny = a[:16], b[:, :16]  # too narrow for a copy to pay
    kept = mm_module._k_major(*skinny, "tf32x3")
    assert kept[0] is skinny[0] and kept[1] is skinny[1]
