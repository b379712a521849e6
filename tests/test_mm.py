"""Accuracy of mm, addmm and addmm_ against a float64 reference.

Black-box cases: the suite knows nothing of any kernel's tiles or branches,
so it covers what a tiled matrix product's branches can depend on: M, N and
K from 1 to past the usual tile sizes with ragged remainders (one row, one
column, K = 1, K past 1024, M and N past 512, and one of M, N or K long
in each wide size class to past 65536), every dtype in every size class,
transposed, padded-row (``x[:, :k]``), stepped and broadcast operands, every
bias shape addmm broadcasts (full, row, column, scalar-like; dense,
transposed, padded or expanded), beta and alpha together (zero, one, other,
negative), NaN and inf where torch ignores them, addmm_'s in-place contract,
values that are not small integers (one-sign sums over long K, products
beyond float16's range in bfloat16, tiny and mixed magnitudes), and shapes
drawn afresh each run. A GPU tier adds sizes the interpreter cannot afford.

Errors are judged against the size of the products, twice. Each element
against the larger of |reference| and ``sqrt((A*A) @ (B*B))``, the root sum
of squares of its K terms (what a sum of terms of random sign reaches): an
element that cancels to near zero is judged against its terms, a one-sign
sum against itself, and partial sums rounded to the dtype (as GPU
libraries may round them) against the size they reach.
Then the elements that do not cancel (|reference| at least that size)
again without a scale, so that the systematic-error check keeps its full
strength (a 0.2 % scale error fails in bfloat16 too).
"""

from __future__ import annotations

import pytest
import torch

from gemswatch import gems
from gemswatch.gems.ops import mm as mm_module
from gemswatch.testing.accuracy import assert_close, to_reference
from gemswatch.testing.cases import describe_layout, record, size_class, size_tier, wide_values, with_layout

# Under Triton's interpreter numpy warns about inf/NaN arithmetic in masked
# lanes and in the non-finite cases below.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")

DTYPES = [
    pytest.param(torch.float32, id="f32"),
    pytest.param(torch.float16, id="f16"),
    pytest.param(torch.bfloat16, id="bf16"),
]
GPU = size_tier() == "gpu"
# An element counts as not cancelling once |reference| reaches this many
# times the root sum of squares of its terms. GPU libraries round partial
# sums (cuBLAS's reduced-precision reductions), which can cost an element of
# that size about one unit in its last place; GPU products are large enough
# that the elements twice that size still give a strong bias check.
WHOLE = 2.0 if GPU else 1.0


def _f32_and_a_half(cases: list, ids=str, unpack: bool = False) -> list:
    """Each case in float32 and in one 16-bit dtype, float16 and bfloat16 in
    turn: for layouts and arguments, whose bugs rarely hang on the dtype,
    at two thirds of the cost of all three (every dtype still meets every
    size class in the size tests). ``unpack``: each case is a tuple of
    several arguments."""
    params = []
    for i, case in enumerate(cases):
        values = case if unpack else (case,)
        for d in (DTYPES[0], DTYPES[1 + i % 2]):
            params.append(pytest.param(*values, *d.values, id=f"{ids(case)}-{d.id}"))
    return params


# (M, N, K) by size class. Tiles of 16 to 256 and K steps of 16 to 128 all
# leave a remainder somewhere in these; the interpreter runs a program per
# tile in Python, so the CPU tier keeps one large dimension per case.
# "deep" is past 2**22 multiply-adds in few tiles, "large_*" past 2**24: a
# kernel may take another path for large products, and float32 must keep
# its accuracy there.
SIZES = {
    "one": (1, 1, 1),
    "row": (1, 37, 200),
    "column": (70, 1, 33),
    "k1": (19, 23, 1),
    "tile_edges": (33, 129, 64),
    "deep": (63, 61, 1100),
    "tall": (520, 9, 45),
    "wide": (6, 531, 29),
    # Past 2**24 multiply-adds (where a kernel may split K, or take another
    # path), K ragged modulo every small split count: square-ish, and few
    # tiles over a long K.
    "large_product": (260, 250, 259),
    "large_deep": (64, 67, 3913),
}
# Large both ways, K small (the interpreter pays per tile): M past 512 and
# not a multiple of it with several column tiles, so a grouped tile order
# ends in a partial group of rows; and N past 512 with several row tiles.
TALL_AND_WIDE = {"tall_wide": (520, 65, 5), "wide_tall": (65, 520, 5)}

# Autotuned, split-K and TMA territory on a GPU: few output tiles over long
# K, large squares with ragged edges, deep and shallow.
GPU_SIZES = {
    "square": (1025, 1023, 1031),
    "few_tiles_deep": (16, 1024, 4099),
    "tall_deep": (1024, 16, 4097),
    "large_shallow": (2049, 2047, 65),
}
if GPU:
    SIZES.update(GPU_SIZES)

# Operand layouts: "padded_t" is a transposed view of a padded matrix (unit
# row stride, column stride above the height).
LAYOUT_PAIRS = [
    ("transposed", "contiguous"),
    ("contiguous", "transposed"),
    ("transposed", "transposed"),
    ("padded", "stepped"),
    ("stepped", "padded"),
    ("padded_t", "padded_t"),
    ("expanded", "expanded"),
]
LAYOUTS = sorted({layout for pair in LAYOUT_PAIRS for layout in pair})
LAYOUT_SHAPE = (515, 1030, 260) if GPU else (37, 45, 70)

# Ranges to draw (M, N, K) from, per size class.
DRAWS = {
    "tiles": ((1, 200), (1, 200), (1, 300)),
    "tall": ((513, 640), (1, 24), (1, 130)),
    "wide": ((1, 24), (513, 640), (1, 130)),
    "deep": ((1, 40), (1, 40), (1025, 2100)),
}
if GPU:
    DRAWS.update({"tiles": ((1, 3000),) * 3, "tall": ((2049, 9000), (1, 64), (1, 2048)), "deep": ((1, 256), (1, 256), (4097, 16384))})


# One long dimension per size class of the shared table (medium, large,
# huge), the other two a few: the sizes above keep M and N below 1025 and K
# below 8193 on the CPU tier, where an error confined to long dimensions
# would hide. Float32 of one sign, so no element cancels and a 0.2 % scale
# error shows per element; the interpreter pays per tile of 64 rows or
# columns (about 7 s for 65537 of them), so on the CPU tier a long M or N
# stops at the large class and the huge one is the GPU tier's; a long K
# costs loop steps of one tile and runs in every class everywhere.
LONG = {"medium": 4097, "large": 8193, "huge": 65537}
LONG_SHAPES = [
    pytest.param(shape, id=f"{axis}-{name}")
    for axis in "MNK"
    for name, n in LONG.items()
    if GPU or axis == "K" or name != "huge"
    for shape in [{"M": (n, 3, 5), "N": (3, n, 5), "K": (4, 3, n)}[axis]]
]

def _values(gen: torch.Generator, shape, dtype: torch.dtype, kind: str = "normal") -> torch.Tensor:
    """Random values of one kind (none of them small integers):

    - ``normal``, ``mixed``: as :func:`wide_values` (randn; randn times
      10**uniform(-3, 3), for float16 divided by 100 so that sums of
      products stay in its range);
    - ``one_sign``: uniform in (0, 1), so a long sum grows with K;
    - ``beyond_half``: magnitudes 256 to 2048, so products and their sums
      leave float16's range (bfloat16 and float32 hold them);
    - ``tiny``: products near 1e-12 (float16: 1e-6), below float16's smallest
      normal value.
    """
    shape = tuple(shape)
    if kind == "mixed" and dtype == torch.float16:
        return (wide_values(gen, shape, torch.float64, kind) / 100).to(gems.device, dtype)
    if kind in ("normal", "mixed"):
        return wide_values(gen, shape, dtype, kind, device=gems.device)
    if kind == "one_sign":
        values = torch.rand(shape, generator=gen, dtype=torch.float64)
    elif kind == "beyond_half":
        sign = torch.randint(0, 2, shape, generator=gen, dtype=torch.float64) * 2 - 1
        values = sign * torch.pow(2.0, 8 + 3 * torch.rand(shape, generator=gen, dtype=torch.float64))
    elif kind == "tiny":
        values = torch.randn(shape, generator=gen, dtype=torch.float64) * (1e-3 if dtype == torch.float16 else 1e-6)
    else:
        raise ValueError(f"unknown value kind {kind!r}")
    return values.to(gems.device, dtype)


def _matrix(gen: torch.Generator, shape, dtype: torch.dtype, layout: str = "contiguous", kind: str = "normal") -> torch.Tensor:
    """A (rows, cols) operand of logical ``shape`` in ``layout``."""

    def make(s):
        return _values(gen, s, dtype, kind)

    if layout == "padded_t":
        return with_layout(make, tuple(shape)[::-1], "padded").t()
    return with_layout(make, shape, layout)


def _reference(a, b, bias=None, beta=1.0, alpha=1.0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(beta * bias + alpha * a @ b, the magnitude each element is judged
    against) in float64. As torch does, beta == 0 ignores the bias and
    alpha == 0 the product (NaN and inf in them included)."""
    ra, rb = to_reference(a), to_reference(b)
    M, K = ra.shape
    want = torch.zeros(M, rb.shape[1], dtype=torch.float64)
    scale = None
    if alpha != 0:
        want = want + alpha * (ra @ rb)
        scale = abs(alpha) * (ra.square() @ rb.square()).sqrt()
    if bias is not None and beta != 0:
        want = want + beta * to_reference(bias)
    return want, scale


def _check(out, a, b, context: str, bias=None, beta=1.0, alpha=1.0) -> None:
    """``out`` against the reference of ``a @ b`` (and the bias), naming the
    case on failure; records what the case covered."""
    want, scale = _reference(a, b, bias, beta, alpha)
    M, K = a.shape
    N = b.shape[1]
    record(a, width=K, m=size_class(M), n=size_class(N), b_layout=describe_layout(b))
    try:
        assert_close(out, want, a.dtype, reduce_len=K, scale=scale)
        if scale is not None:
            whole = (want.abs() >= WHOLE * scale) & scale.isfinite()  # the elements that do not cancel
            assert_close(out.detach().cpu()[whole], want[whole], a.dtype, reduce_len=K)
    except AssertionError as e:
        raise AssertionError(f"[{context}] {e}") from None


def _ctx(M, N, K, dtype, **what) -> str:
    extra = "".join(f", {k}={v}" for k, v in what.items())
    return f"{M}x{N}x{K} {str(dtype).removeprefix('torch.')}{extra}"


# ---------------------------------------------------------------- mm


@pytest.mark.mm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", list(SIZES))
def test_mm_sizes(size, dtype):
    M, N, K = SIZES[size]
    gen = torch.Generator().manual_seed(1)
    a, b = _matrix(gen, (M, K), dtype), _matrix(gen, (K, N), dtype)
    _check(gems.mm(a, b), a, b, _ctx(M, N, K, dtype, size=size))


@pytest.mark.mm
@pytest.mark.parametrize("size, dtype", [("tall_wide", torch.float32), ("wide_tall", torch.bfloat16)])
def test_mm_tall_and_wide(size, dtype):
    M, N, K = TALL_AND_WIDE[size]
    gen = torch.Generator().manual_seed(25)
    a, b = _matrix(gen, (M, K), dtype), _matrix(gen, (K, N), dtype, "transposed")
    _check(gems.mm(a, b), a, b, _ctx(M, N, K, dtype, size=size))


@pytest.mark.mm
@pytest.mark.parametrize("layouts, dtype", _f32_and_a_half(LAYOUT_PAIRS, "-".join))
def test_mm_layouts(layouts, dtype):
    M, N, K = LAYOUT_SHAPE
    gen = torch.Generator().manual_seed(2)
    a = _matrix(gen, (M, K), dtype, layouts[0])
    b = _matrix(gen, (K, N), dtype, layouts[1])
    _check(gems.mm(a, b), a, b, _ctx(M, N, K, dtype, layouts=layouts))


# (kind, (M, N, K), dtypes): float16 cannot hold beyond_half's products,
# met in a large product (a path for those must not round through float16).
VALUE_CASES = [
    ("one_sign", (16, 16, 4096), DTYPES),
    ("beyond_half", SIZES["deep"], DTYPES[::2]),
    ("tiny", (33, 20, 70), DTYPES),
    ("mixed", (33, 20, 70), DTYPES),
]


@pytest.mark.mm
@pytest.mark.parametrize(
    "kind, shape, dtype",
    [pytest.param(kind, shape, *d.values, id=f"{kind}-{d.id}") for kind, shape, ds in VALUE_CASES for d in ds],
)
def test_mm_values(kind, shape, dtype):
    M, N, K = shape
    gen = torch.Generator().manual_seed(3)
    a, b = _matrix(gen, (M, K), dtype, kind=kind), _matrix(gen, (K, N), dtype, kind=kind)
    _check(gems.mm(a, b), a, b, _ctx(M, N, K, dtype, values=kind))


def _draw_case(case_rng, size: str):
    """(M, N, K, dtype, layout of a, layout of b) drawn for one size class."""
    M, N, K = (case_rng.randint(lo, hi) for lo, hi in DRAWS[size])
    dtype = case_rng.choice([p.values[0] for p in DTYPES])
    return M, N, K, dtype, case_rng.choice(LAYOUTS), case_rng.choice(LAYOUTS)


@pytest.mark.mm
@pytest.mark.parametrize("size", list(DRAWS))
def test_mm_random(size, case_rng):
    M, N, K, dtype, la, lb = _draw_case(case_rng, size)
    kind = case_rng.choice(["normal", "mixed"])
    gen = torch.Generator().manual_seed(case_rng.getrandbits(31))
    a, b = _matrix(gen, (M, K), dtype, la, kind), _matrix(gen, (K, N), dtype, lb, kind)
    _check(gems.mm(a, b), a, b, _ctx(M, N, K, dtype, layouts=(la, lb), values=kind, drawn=size))


@pytest.mark.mm
@pytest.mark.parametrize("shape", LONG_SHAPES)
def test_mm_long_dims(shape):
    M, N, K = shape
    gen = torch.Generator().manual_seed(28)
    a, b = _matrix(gen, (M, K), torch.float32, kind="one_sign"), _matrix(gen, (K, N), torch.float32, kind="one_sign")
    _check(gems.mm(a, b), a, b, _ctx(M, N, K, torch.float32, values="one_sign"))

@pytest.mark.mm
@pytest.mark.parametrize("shape", [(0, 5, 3), (4, 0, 3), (4, 5, 0)], ids=["M0", "N0", "K0"])
def test_mm_empty(shape):
    M, N, K = shape
    gen = torch.Generator().manual_seed(4)
    a, b = _matrix(gen, (M, K), torch.float32), _matrix(gen, (K, N), torch.float32)
    _check(gems.mm(a, b), a, b, _ctx(M, N, K, torch.float32))


@pytest.mark.mm
def test_mm_float64_is_rejected_or_exact():
    # The bundled mm rejects float64 with a TypeError. A candidate may
    # instead compute it (torch.mm does), but then in float64 in every size
    # class: a float32 computation passed off as float64 (for some sizes
    # only, e.g. past some K) is the defect this catches.
    gen = torch.Generator().manual_seed(5)
    for M, N, K in ((9, 7, 300), (8, 9, 2000), (520, 9, 45), (6, 531, 29), (1, 37, 1100)):
        a, b = _matrix(gen, (M, K), torch.float64), _matrix(gen, (K, N), torch.float64)
        try:
            out = gems.mm(a, b)
        except TypeError:
            continue
        _check(out, a, b, _ctx(M, N, K, torch.float64))


@pytest.mark.mm
def test_mm_rejects_mixed_dtypes():
    a = torch.zeros(2, 3, device=gems.device)
    with pytest.raises(RuntimeError, match="same dtype"):
        gems.mm(a, a.t().to(torch.float16))


@pytest.mark.mm
@pytest.mark.gems_impl
def test_mm_shape_mismatch_names_both_shapes():
    a = torch.zeros(2, 3, device=gems.device)
    b = torch.zeros(4, 5, device=gems.device)
    with pytest.raises(RuntimeError, match=r"\(2, 3\).*\(4, 5\)"):
        gems.mm(a, b)


@pytest.mark.mm
@pytest.mark.gems_impl
def test_mm_rejects_float64_naming_it():
    a = torch.zeros(2, 3, device=gems.device)
    with pytest.raises(TypeError, match="float64"):
        gems.mm(a.double(), a.t().double())


# ---------------------------------------------------------------- addmm

# Bias shapes addmm broadcasts to (M, N), and layouts of the full one.
BIASES = {
    "full": lambda gen, M, N, dt: _matrix(gen, (M, N), dt),
    "full_transposed": lambda gen, M, N, dt: _matrix(gen, (M, N), dt, "transposed"),
    "full_padded": lambda gen, M, N, dt: _matrix(gen, (M, N), dt, "padded"),
    "row_expanded": lambda gen, M, N, dt: _values(gen, (N,), dt).expand(M, N),
    "column_expanded": lambda gen, M, N, dt: _values(gen, (M, 1), dt).expand(M, N),
    "row": lambda gen, M, N, dt: _values(gen, (N,), dt),
    "row_stepped": lambda gen, M, N, dt: _values(gen, (2 * N,), dt)[::2],
    "row_2d": lambda gen, M, N, dt: _values(gen, (1, N), dt),
    "column": lambda gen, M, N, dt: _values(gen, (M, 1), dt),
    "column_padded": lambda gen, M, N, dt: _values(gen, (M, 3), dt)[:, :1],
    "scalar_0d": lambda gen, M, N, dt: _values(gen, (), dt),
    "scalar_1": lambda gen, M, N, dt: _values(gen, (1,), dt),
    "scalar_1x1": lambda gen, M, N, dt: _values(gen, (1, 1), dt),
}


def _addmm_case(gen, M, N, K, dtype, bias: str, la="contiguous", lb="contiguous"):
    bias_t = BIASES[bias](gen, M, N, dtype)
    return bias_t, _matrix(gen, (M, K), dtype, la), _matrix(gen, (K, N), dtype, lb)


@pytest.mark.addmm
@pytest.mark.parametrize("bias, dtype", _f32_and_a_half(list(BIASES)))
def test_addmm_bias(bias, dtype):
    # beta and alpha away from 1: a bias scaled twice or a product left
    # unscaled shows in every bias shape; in a product that is not square
    # and in a square one, where a row and a column bias have as many
    # elements (told apart by shape only).
    gen = torch.Generator().manual_seed(6)
    for M, N, K in ((37, 45, 70), (40, 40, 33)):
        inp, a, b = _addmm_case(gen, M, N, K, dtype, bias)
        out = gems.addmm(inp, a, b, beta=0.75, alpha=-1.25)
        _check(out, a, b, _ctx(M, N, K, dtype, bias=bias), inp, 0.75, -1.25)


# (beta, alpha); None means the argument is left to its default. The
# product is square with a 1-D bias: one value per column, as torch
# broadcasts it (a bias of length M read as a column is wrong only there).
SCALES = [(None, None), (0.5, 2.0), (0, 1.5), (0, None), (-1.0, 0), (2.5, -0.75), (0, 0)]


@pytest.mark.addmm
@pytest.mark.parametrize("beta, alpha, dtype", _f32_and_a_half(SCALES, "{0[0]}-{0[1]}".format, unpack=True))
def test_addmm_scales(beta, alpha, dtype):
    M, N, K = 33, 33, 70
    inp, a, b = _addmm_case(torch.Generator().manual_seed(7), M, N, K, dtype, "row", "transposed")
    kwargs = {k: v for k, v in (("beta", beta), ("alpha", alpha)) if v is not None}
    out = gems.addmm(inp, a, b, **kwargs)
    _check(out, a, b, _ctx(M, N, K, dtype, **kwargs), inp, kwargs.get("beta", 1), kwargs.get("alpha", 1))


# (size, bias): the size classes of mm, each with another bias shape.
# One row (a vector-matrix product) and one column (matrix-vector) with
# beta and alpha away from 1, and a product past 2**24 multiply-adds.
ADDMM_SIZES = [("one", "scalar_0d"), ("row", "row"), ("column", "column"), ("k1", "full"), ("deep", "row"), ("tall", "column"),
               ("wide", "row_2d"), ("large_product", "column_expanded")]
if GPU:
    ADDMM_SIZES += [("square", "full_transposed"), ("few_tiles_deep", "row"), ("large_shallow", "column")]


@pytest.mark.addmm
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size, bias", ADDMM_SIZES)
def test_addmm_sizes(size, bias, dtype):
    M, N, K = SIZES[size]
    inp, a, b = _addmm_case(torch.Generator().manual_seed(8), M, N, K, dtype, bias)
    out = gems.addmm(inp, a, b, beta=0.5, alpha=2.0)
    _check(out, a, b, _ctx(M, N, K, dtype, size=size, bias=bias), inp, 0.5, 2.0)


@pytest.mark.addmm
def test_addmm_tall_and_wide():
    M, N, K = TALL_AND_WIDE["tall_wide"]
    inp, a, b = _addmm_case(torch.Generator().manual_seed(26), M, N, K, torch.float16, "row")
    out = gems.addmm(inp, a, b, beta=0.5, alpha=2.0)
    _check(out, a, b, _ctx(M, N, K, torch.float16, size="tall_wide"), inp, 0.5, 2.0)


@pytest.mark.addmm
@pytest.mark.parametrize("shape", LONG_SHAPES)
def test_addmm_long_dims(shape):
    M, N, K = shape
    gen = torch.Generator().manual_seed(29)
    inp = _values(gen, (N,), torch.float32, "one_sign")
    a, b = _matrix(gen, (M, K), torch.float32, kind="one_sign"), _matrix(gen, (K, N), torch.float32, kind="one_sign")
    out = gems.addmm(inp, a, b, beta=0.5, alpha=2.0)
    _check(out, a, b, _ctx(M, N, K, torch.float32, values="one_sign", bias="row"), inp, 0.5, 2.0)

@pytest.mark.addmm
@pytest.mark.parametrize("draw", range(2))
def test_addmm_random(draw, case_rng):
    size = case_rng.choice(list(DRAWS))
    M, N, K, dtype, la, lb = _draw_case(case_rng, size)
    bias = case_rng.choice(list(BIASES))
    beta, alpha = case_rng.choice([(1.0, 1.0), (0.5, 2.0), (0, -1.5), (-2.0, 0.25)])
    inp, a, b = _addmm_case(torch.Generator().manual_seed(case_rng.getrandbits(31)), M, N, K, dtype, bias, la, lb)
    out = gems.addmm(inp, a, b, beta=beta, alpha=alpha)
    _check(out, a, b, _ctx(M, N, K, dtype, layouts=(la, lb), bias=bias, beta=beta, alpha=alpha, drawn=size), inp, beta, alpha)


def _like_products(gen, shape, a, b) -> torch.Tensor:
    """randn values of the typical size of ``a @ b``'s elements, so that
    neither the bias nor the product hides the other's error."""
    typical = float((to_reference(a).square() @ to_reference(b).square()).sqrt().median())
    return (torch.randn(tuple(shape), generator=gen, dtype=torch.float64) * typical).to(a.device, a.dtype)


@pytest.mark.addmm
@pytest.mark.parametrize(
    "kind, dtype",
    [pytest.param(kind, *d.values, id=f"{kind}-{d.id}") for kind, _, ds in VALUE_CASES[1:] for d in ds],
)
def test_addmm_values(kind, dtype):
    M, N, K = 33, 20, 70
    gen = torch.Generator().manual_seed(22)
    a, b = _matrix(gen, (M, K), dtype, kind=kind), _matrix(gen, (K, N), dtype, kind=kind)
    inp = _like_products(gen, (N,), a, b)
    _check(gems.addmm(inp, a, b, beta=-1.5), a, b, _ctx(M, N, K, dtype, values=kind), inp, -1.5, 1.0)


def _nonfinite(t: torch.Tensor) -> torch.Tensor:
    """``t`` with NaN, inf and -inf written into three of its elements."""
    flat = t.view(-1)  # a contiguous tensor of at least 3 elements
    flat[0], flat[flat.numel() // 2], flat[-1] = float("nan"), float("inf"), float("-inf")
    return t


@pytest.mark.addmm
@pytest.mark.parametrize("dtype", DTYPES)
def test_addmm_beta_zero_ignores_nonfinite_input(dtype):
    # As in torch: with beta == 0 the input is not read, so NaN and inf in
    # it vanish; alpha still scales the product.
    M, N, K = 20, 24, 40
    inp, a, b = _addmm_case(torch.Generator().manual_seed(9), M, N, K, dtype, "full")
    out = gems.addmm(_nonfinite(inp), a, b, beta=0, alpha=-2.0)
    _check(out, a, b, _ctx(M, N, K, dtype, beta=0, alpha=-2.0), inp, 0, -2.0)


@pytest.mark.addmm
def test_addmm_alpha_zero_ignores_nonfinite_matrices():
    # torch's float32 kernels (CPU and CUDA) skip the product when alpha is
    # 0, so inf and NaN in the matrices do not reach the result. (Its 16-bit
    # CPU kernels multiply them out into NaN, so only float32 is held to it.)
    M, N, K = 20, 24, 40
    inp, a, b = _addmm_case(torch.Generator().manual_seed(10), M, N, K, torch.float32, "row")
    _nonfinite(a), _nonfinite(b)
    out = gems.addmm(inp, a, b, beta=0.5, alpha=0)
    _check(out, a, b, _ctx(M, N, K, torch.float32, beta=0.5, alpha=0), inp, 0.5, 0)


@pytest.mark.addmm
def test_addmm_empty_k_is_the_scaled_input():
    gen = torch.Generator().manual_seed(11)
    inp, a, b = _addmm_case(gen, 6, 5, 0, torch.float32, "full")
    _check(gems.addmm(inp, a, b, beta=0.5, alpha=3.0), a, b, _ctx(6, 5, 0, torch.float32), inp, 0.5, 3.0)


@pytest.mark.addmm
@pytest.mark.parametrize("M, N", [(4, 5), (6, 4)])
def test_addmm_refuses_a_bias_of_length_m(M, N):
    # A 1-D bias broadcasts along rows (length N); torch refuses one of
    # length M != N rather than reading it as a column.
    gen = torch.Generator().manual_seed(24)
    bias, a, b = _values(gen, (M,), torch.float32), _matrix(gen, (M, 3), torch.float32), _matrix(gen, (3, N), torch.float32)
    with pytest.raises(RuntimeError):
        gems.addmm(bias, a, b)


@pytest.mark.addmm
@pytest.mark.gems_impl
def test_addmm_bad_bias_names_shapes():
    a, b = torch.zeros(4, 3, device=gems.device), torch.zeros(3, 5, device=gems.device)
    with pytest.raises(RuntimeError, match=r"\(3,\).*\(4, 5\)"):
        gems.addmm(torch.zeros(3, device=gems.device), a, b)


@pytest.mark.addmm
@pytest.mark.gems_impl
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
def test_mm_tma_kernel(monkeypatch, layout, dtype):
    # The descriptor (TMA) kernel normally takes only large products on
    # Hopper; force it here (Triton's interpreter runs descriptors too).
    if gems.device == "cuda" and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("tensor descriptors need compute capability 9.0 or newer")
    monkeypatch.setattr(mm_module, "_use_tma", lambda *args: True)
    M, N, K = 40, 24, 72  # 16-byte aligned rows in every dtype; ragged tiles
    la, lb = ("transposed" if c == "t" else "contiguous" for c in layout)
    inp, a, b = _addmm_case(torch.Generator().manual_seed(12), M, N, K, dtype, "row", la, lb)
    out = gems.addmm(inp, a, b, beta=0.5, alpha=2.0)
    _check(out, a, b, _ctx(M, N, K, dtype, layouts=(la, lb)), inp, 0.5, 2.0)


@pytest.mark.mm
@pytest.mark.gems_impl
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layouts", [("contiguous", "contiguous"), ("contiguous", "transposed"), ("transposed", "contiguous")], ids="-".join)
@pytest.mark.parametrize("splits", [2, 3, 5])
def test_split_k_matches_reference(splits, layouts, dtype):
    # K = 100 in tiles of 16 is 7 K tiles: the splits get 4+3, 3+3+1 and
    # 2+2+2+1+0 of them (an empty split must contribute zeros).
    M, N, K = 20, 33, 100
    bias, a, b = _addmm_case(torch.Generator().manual_seed(13), M, N, K, dtype, "row_expanded", *layouts)
    out = torch.empty(M, N, dtype=dtype, device=gems.device)
    upcast = gems.device == "cpu" and dtype == torch.bfloat16
    common = dict(HAS_BIAS=True, DOT_PRECISION=mm_module._dot_precision(a, upcast), UPCAST=upcast)
    mm_module._split(a, b, out, bias, 2.0, 0.5, common, (16, 16, 16, 2, 4), splits)
    _check(out, a, b, _ctx(M, N, K, dtype, splits=splits), bias, 0.5, 2.0)


# ---------------------------------------------------------------- addmm_


def _inplace(inp, a, b, context: str, **kwargs) -> None:
    """addmm_ must write the result into ``inp`` and return ``inp`` itself."""
    before = inp.clone()
    ptr, stride = inp.data_ptr(), inp.stride()
    out = gems.addmm_(inp, a, b, **kwargs)
    assert out is inp, f"[{context}] addmm_ returned a new tensor, not its input"
    assert inp.data_ptr() == ptr and inp.stride() == stride, f"[{context}] addmm_ moved its input"
    _check(inp, a, b, context, before, kwargs.get("beta", 1), kwargs.get("alpha", 1))


def _inplace_case(gen, M, N, K, dtype, layout="contiguous", la="contiguous", lb="contiguous"):
    return _matrix(gen, (M, N), dtype, layout), _matrix(gen, (M, K), dtype, la), _matrix(gen, (K, N), dtype, lb)


@pytest.mark.addmm_
@pytest.mark.parametrize(
    "beta, alpha, dtype", _f32_and_a_half([(None, None), (0.5, -2.0), (0, None), (0, -1.5), (2.0, 0)], "{0[0]}-{0[1]}".format, unpack=True)
)
def test_addmm_inplace(beta, alpha, dtype):
    M, N, K = 33, 64, 70
    inp, a, b = _inplace_case(torch.Generator().manual_seed(14), M, N, K, dtype, lb="transposed")
    kwargs = {k: v for k, v in (("beta", beta), ("alpha", alpha)) if v is not None}
    _inplace(inp, a, b, _ctx(M, N, K, dtype, **kwargs), **kwargs)


@pytest.mark.addmm_
@pytest.mark.parametrize("layout, dtype", _f32_and_a_half(["transposed", "padded", "stepped", "contiguous"]))
def test_addmm_inplace_layouts(layout, dtype):
    M, N, K = 37, 45, 30
    inp, a, b = _inplace_case(torch.Generator().manual_seed(15), M, N, K, dtype, layout)
    _inplace(inp, a, b, _ctx(M, N, K, dtype, input_layout=layout), beta=0.5)


ADDMM__SIZES = ["one", "row", "column", "k1", "deep", "tall", "large_deep"]
if GPU:
    # Tuned on first use: the tuner's trial runs must leave the input (also
    # the output) as it was; few output tiles try split-K too.
    ADDMM__SIZES += ["square", "few_tiles_deep", "large_shallow"]


@pytest.mark.addmm_
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", ADDMM__SIZES)
def test_addmm_inplace_sizes(size, dtype):
    M, N, K = SIZES[size]
    inp, a, b = _inplace_case(torch.Generator().manual_seed(16), M, N, K, dtype)
    _inplace(inp, a, b, _ctx(M, N, K, dtype, size=size), beta=0.5, alpha=-1.5)


@pytest.mark.addmm_
def test_addmm_inplace_tall_and_wide():
    M, N, K = TALL_AND_WIDE["tall_wide"]
    inp, a, b = _inplace_case(torch.Generator().manual_seed(27), M, N, K, torch.float32)
    _inplace(inp, a, b, _ctx(M, N, K, torch.float32, size="tall_wide"), beta=0.5, alpha=-1.5)


@pytest.mark.addmm_
@pytest.mark.parametrize("shape", LONG_SHAPES)
def test_addmm_inplace_long_dims(shape):
    M, N, K = shape
    gen = torch.Generator().manual_seed(30)
    inp, a, b = (_matrix(gen, s, torch.float32, kind="one_sign") for s in ((M, N), (M, K), (K, N)))
    _inplace(inp, a, b, _ctx(M, N, K, torch.float32, values="one_sign"), beta=0.5, alpha=1.5)

@pytest.mark.addmm_
def test_addmm_inplace_random(case_rng):
    size = case_rng.choice(list(DRAWS))
    M, N, K, dtype, la, lb = _draw_case(case_rng, size)
    layout = case_rng.choice(["contiguous", "transposed", "padded"])
    beta, alpha = case_rng.choice([(1.0, 1.0), (0.5, 2.0), (0, -1.5), (-2.0, 0.25)])
    inp, a, b = _inplace_case(torch.Generator().manual_seed(case_rng.getrandbits(31)), M, N, K, dtype, layout, la, lb)
    _inplace(inp, a, b, _ctx(M, N, K, dtype, layouts=(layout, la, lb), beta=beta, alpha=alpha, drawn=size), beta=beta, alpha=alpha)


@pytest.mark.addmm_
@pytest.mark.parametrize(
    "kind, dtype",
    [pytest.param(kind, *d.values, id=f"{kind}-{d.id}") for kind, _, ds in VALUE_CASES[1:3] for d in ds],
)
def test_addmm_inplace_values(kind, dtype):
    M, N, K = 33, 20, 70
    gen = torch.Generator().manual_seed(23)
    a, b = _matrix(gen, (M, K), dtype, kind=kind), _matrix(gen, (K, N), dtype, kind=kind)
    inp = _like_products(gen, (M, N), a, b)
    _inplace(inp, a, b, _ctx(M, N, K, dtype, values=kind), beta=0.5, alpha=2.0)


@pytest.mark.addmm_
@pytest.mark.parametrize("dtype", DTYPES)
def test_addmm_inplace_beta_zero_ignores_nonfinite_input(dtype):
    M, N, K = 20, 24, 40
    inp, a, b = _inplace_case(torch.Generator().manual_seed(17), M, N, K, dtype)
    _inplace(_nonfinite(inp), a, b, _ctx(M, N, K, dtype, beta=0, alpha=3.0), beta=0, alpha=3.0)


@pytest.mark.addmm_
def test_addmm_inplace_alpha_zero_ignores_nonfinite_matrices():
    # float32 only, as for addmm.
    M, N, K = 20, 24, 40
    inp, a, b = _inplace_case(torch.Generator().manual_seed(18), M, N, K, torch.float32)
    _nonfinite(a), _nonfinite(b)
    _inplace(inp, a, b, _ctx(M, N, K, torch.float32, beta=-0.5, alpha=0), beta=-0.5, alpha=0)


def _aliased(gen, how: str):
    """(input, mat1, mat2) of a 70x70x70 product where the input shares
    memory with the matrices as ``how`` says."""
    n = 70  # past one 64-wide tile each way: tiles read what others write
    other = _matrix(gen, (n, n), torch.float32)
    if how == "mat1=mat2":
        x = _matrix(gen, (n, n), torch.float32)
        return x, x, x
    if how == "mat2":
        x = _matrix(gen, (n, n), torch.float32)
        return x, other, x
    if how == "overlaps_mat1":  # mat1 is half over the input's columns
        wide = _matrix(gen, (n, 2 * n), torch.float32)
        return wide[:, :n], wide[:, n // 2 : n // 2 + n], other
    if how == "overlaps_mat2":  # mat2 is half over the input's rows
        tall = _matrix(gen, (2 * n, n), torch.float32)
        return tall[:n], other, tall[n // 2 : n // 2 + n]
    raise ValueError(f"unknown aliasing {how!r}")


@pytest.mark.addmm_
@pytest.mark.parametrize("how", ["mat1=mat2", "mat2", "overlaps_mat1", "overlaps_mat2"])
def test_addmm_inplace_input_aliases_a_matrix(how):
    # torch computes these (it refuses only an input with overlapping
    # elements); every output tile must come from the values the input and
    # the matrices held before any was written.
    inp, a, b = _aliased(torch.Generator().manual_seed(19), how)
    before, a0, b0 = inp.clone(), a.clone(), b.clone()
    out = gems.addmm_(inp, a, b, beta=0.5, alpha=-1.5)
    # The input itself (the identity of a view that shares its storage with
    # another argument is not kept across an isolated call: its place is).
    assert (out.data_ptr(), out.shape, out.stride()) == (inp.data_ptr(), inp.shape, inp.stride()), f"[{how}] addmm_ did not return its input"
    _check(inp, a0, b0, _ctx(70, 70, 70, torch.float32, aliased=how), before, 0.5, -1.5)


@pytest.mark.addmm_
def test_addmm_inplace_rejects_overlapping_input():
    # An expanded input has one element in several places: torch refuses to
    # write it in place.
    gen = torch.Generator().manual_seed(20)
    inp = _values(gen, (6,), torch.float32).expand(4, 6)
    a, b = _matrix(gen, (4, 3), torch.float32), _matrix(gen, (3, 6), torch.float32)
    with pytest.raises(RuntimeError):
        gems.addmm_(inp, a, b)


@pytest.mark.addmm_
@pytest.mark.gems_impl
def test_addmm_inplace_wrong_shape_names_shapes():
    a, b = torch.zeros(4, 3, device=gems.device), torch.zeros(3, 5, device=gems.device)
    with pytest.raises(RuntimeError, match=r"\(5,\).*\(4, 5\)"):
        gems.addmm_(torch.zeros(5, device=gems.device), a, b)


# ---------------------------------------------------------------- gems internals


@pytest.mark.mm
@pytest.mark.gems_impl
@pytest.mark.parametrize("tf32, dtype, expected", [
    (True, torch.float32, "tf32x3"), (False, torch.float32, "ieee"), (False, torch.bfloat16, "tf32"),
])  # fmt: skip
def test_fp32_products_use_tensor_cores_only_where_they_exist(monkeypatch, tf32, dtype, expected):
    # A pre-Ampere or AMD GPU has no TF32: its fp32 products stay exact.
    import types

    monkeypatch.setattr(mm_module, "interpreted", False)
    monkeypatch.setattr(mm_module, "_has_tf32", lambda index: tf32)
    fake_cuda_matrix = types.SimpleNamespace(dtype=dtype, is_cuda=True, device=torch.device("cuda", 0))
    assert mm_module._dot_precision(fake_cuda_matrix, upcast=False) == expected


@pytest.mark.mm
@pytest.mark.gems_impl
def test_tf32_products_get_k_major_copies_of_large_operands():
    gen = torch.Generator().manual_seed(21)
    a = _matrix(gen, (512, 64), torch.float32, "transposed")  # column-major A
    b = _matrix(gen, (64, 512), torch.float32)  # row-major B
    ka, kb = mm_module._k_major(a, b, "tf32x3")
    assert ka.stride(1) == 1 and kb.stride(0) == 1  # A row-major, B column-major
    assert torch.equal(ka, a) and torch.equal(kb, b)
    same = mm_module._k_major(a, b, "ieee")  # exact products keep the layout
    assert same[0] is a and same[1] is b
    skinny = a[:16], b[:, :16]  # too narrow for a copy to pay
    kept = mm_module._k_major(*skinny, "tf32x3")
    assert kept[0] is skinny[0] and kept[1] is skinny[1]
