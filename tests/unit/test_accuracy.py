"""The accuracy rule every correctness test relies on, and the case helpers."""

from __future__ import annotations

import random

import pytest
import torch

from gemswatch.testing import accuracy
from gemswatch.testing.accuracy import TOLERANCES, assert_close, tolerance
from gemswatch.testing.cases import (
    around_powers,
    class_widths,
    describe_layout,
    record,
    size_class,
    take_records,
    wide_values,
    with_layout,
)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
IDS = ["fp32", "fp16", "bf16"]


def _fails(got, want, **kw) -> str | None:
    try:
        assert_close(got, want, **kw)
    except AssertionError as e:
        return str(e)
    return None


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _honest(want: torch.Tensor, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # An exact kernel's result: float32 math off by a few float32 ulps, then
    # one rounding to the result dtype.
    noise = torch.empty(want.shape, dtype=torch.float64).uniform_(-4e-7, 4e-7, generator=gen)
    return (want * (1 + noise)).to(torch.float32).to(dtype)


# -- what must fail -----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("n", [300, 1000, 4096])
def test_a_scale_error_of_0_2_percent_fails_on_ordinary_outputs(dtype, n, monkeypatch):
    # Rounded to nearest, as on a GPU (the interpreter's case is below).
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    for seed in range(5):
        want = torch.randn(n, generator=_gen(seed), dtype=torch.float64)
        assert _fails((want * 1.002).to(dtype), want), (dtype, n, seed)
        assert _fails((want * 0.998).to(dtype), want), (dtype, n, seed)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_a_scale_error_of_0_2_percent_fails_on_small_outputs(dtype, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    # softmax over rows of 65536: every output near 1.5e-5, float16's
    # subnormals; an absolute atol of 1e-5 would pass anything here.
    logits = torch.randn(2, 65536, generator=_gen(3), dtype=torch.float64)
    want = torch.softmax(logits, -1)
    assert float(want.median()) < 2e-5
    message = _fails((want * 1.002).to(dtype), want, reduce_len=65536)
    assert message, dtype
    assert _fails(want.to(dtype), want, reduce_len=65536) is None


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("n", [7, 1000, 65536])
def test_a_5_percent_error_on_a_few_elements_fails(dtype, n):
    want = torch.randn(n, generator=_gen(4), dtype=torch.float64)
    got = want.clone()
    ordinary = (want.abs() > 0.5).nonzero().reshape(-1)  # of ordinary size: not swallowed by the sum's slack
    picked = ordinary[torch.randperm(len(ordinary), generator=_gen(5))[:3]]
    got[picked] *= 1.05
    message = _fails(got.to(dtype), want, reduce_len=n)
    assert message and message.startswith(f"{len(picked)} of {n} elements differ"), message


def test_a_bias_failure_names_the_rule_and_the_bound(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    want = torch.randn(4000, generator=_gen(6), dtype=torch.float64)
    message = _fails((want * 1.002).to(torch.bfloat16), want)
    assert message.startswith("systematic error: the result is off by +0.002"), message
    assert "rule for torch.bfloat16" in message and "allowed" in message


def test_an_error_is_judged_against_the_given_scale():
    # A sum that cancels to near zero: its error is judged against sum(|x|).
    want = torch.tensor([1e-6, -2e-6], dtype=torch.float64)
    got = want + 1e-7
    assert _fails(got.float(), want)
    assert_close(got.float(), want, scale=torch.tensor([1.0, 1.0]))
    assert _fails(got.float(), want, scale=torch.tensor([1.0, 1e-5]))


# -- what must pass -----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_an_honestly_rounded_result_passes(dtype):
    rng = random.Random(7)
    for seed in range(40):
        n = rng.choice([1, 2, 3, 17, 100, 1000, 4097, 100_000]) if seed else 100_000
        gen = _gen(seed)
        magnitude = 10.0 ** rng.uniform(-6, 3)
        want = torch.randn(n, generator=gen, dtype=torch.float64) * magnitude
        assert_close(_honest(want, dtype, gen), want)
        # Positive outputs (probabilities) as well: no sign to cancel a bias.
        probs = torch.softmax(torch.randn(n, generator=gen, dtype=torch.float64), -1)
        assert_close(_honest(probs, dtype, gen), probs, reduce_len=n)


def test_an_honest_bfloat16_result_of_the_cpu_interpreter_passes(monkeypatch):
    # Triton's interpreter truncates float32 to bfloat16: a bias of about
    # -0.3 % that is the interpreter's, not the kernel's.
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    want = torch.softmax(torch.randn(4096, generator=_gen(8), dtype=torch.float64), -1)
    truncated = (want.float().view(torch.int32) & -65536).view(torch.float32).to(torch.bfloat16)
    assert_close(truncated, want)
    # ... and a scale error in a truncating kernel still fails.
    scaled = ((want * 1.002).float().view(torch.int32) & -65536).view(torch.float32).to(torch.bfloat16)
    assert _fails(scaled, want)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert _fails(truncated, want), "on a GPU a bfloat16 result rounds to nearest"


def test_the_reported_element_is_the_one_outside_its_tolerance():
    # 100.00012 has the largest absolute error but is within rtol; 0.011 vs 0.01 is not.
    want = torch.tensor([100.0, 0.01], dtype=torch.float64)
    got = torch.tensor([100.00012, 0.011], dtype=torch.float32)
    with pytest.raises(AssertionError, match=r"^1 of 2 elements differ; worst at index \(1,\): got 0\.01099"):
        assert_close(got, want)


def test_infinities_must_match_and_nan_is_a_mismatch_unless_allowed():
    want = torch.tensor([float("nan"), 1.0], dtype=torch.float64)
    got = torch.tensor([float("nan"), 1.0])
    with pytest.raises(AssertionError, match="worst at index \\(0,\\): got nan"):
        assert_close(got, want)
    assert_close(got, want, equal_nan=True)
    inf = torch.tensor([float("-inf"), 2.0], dtype=torch.float64)
    assert_close(inf.float(), inf)
    assert _fails(torch.tensor([float("inf"), 2.0]), inf)
    assert _fails(torch.tensor([-3e38, 2.0]), inf)


def test_shape_dtype_and_exact_dtypes():
    want = torch.zeros(2, 3, dtype=torch.float64)
    with pytest.raises(AssertionError, match=r"shape mismatch: got \(3, 2\), expected \(2, 3\)"):
        assert_close(torch.zeros(3, 2), want)
    with pytest.raises(AssertionError, match="dtype mismatch: got torch.float32, expected torch.float16"):
        assert_close(torch.zeros(2, 3), want, torch.float16)
    ints = torch.tensor([1, 2, 3])
    assert_close(ints, ints.double(), torch.int64)
    with pytest.raises(AssertionError, match="1 of 3 elements differ .*must be equal"):
        assert_close(torch.tensor([1, 2, 4]), ints.double(), torch.int64)
    assert_close(torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.float64))


def test_the_table_has_one_rule_per_float_dtype_and_slack_grows_with_length():
    assert set(TOLERANCES) == {torch.float32, torch.float16, torch.bfloat16, torch.float64}
    rtol, frac = tolerance(torch.float16)
    assert rtol == pytest.approx(TOLERANCES[torch.float16].rtol + TOLERANCES[torch.float16].acc)
    rtol_long, frac_long = tolerance(torch.float16, reduce_len=10_000)
    assert frac_long == pytest.approx(100 * frac) and rtol_long > rtol
    # The float16 rounding slack does not grow: a 5 % error stays visible.
    assert tolerance(torch.bfloat16, reduce_len=1 << 20)[0] < 0.02
    assert "bias within" in accuracy.describe_rule(torch.bfloat16, 123)


# -- case helpers -------------------------------------------------------------


def test_around_powers_and_size_classes():
    assert around_powers(1, 17) == [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17]
    assert around_powers(1000, 1100) == [1023, 1024, 1025]
    assert [size_class(n) for n in (0, 1, 16, 17, 1024, 1025, 8193, 65536, 65537)] == [
        "empty", "tiny", "tiny", "small", "small", "medium", "large", "large", "huge",
    ]
    assert max(class_widths("large", "cpu")) == 65536
    assert min(class_widths("huge", "cpu")) == 65537 and max(class_widths("huge", "gpu")) > max(class_widths("huge", "cpu"))


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "stepped", "padded", "expanded", "permuted"])
def test_with_layout_gives_the_shape_in_that_layout(layout):
    x = with_layout(lambda s: torch.randn(s, dtype=torch.float64), (3, 4, 5), layout)
    assert tuple(x.shape) == (3, 4, 5)
    assert describe_layout(x) == layout


def test_describe_layout_of_edge_tensors():
    assert describe_layout(torch.tensor(1.0)) == "0-d"
    assert describe_layout(torch.zeros(0, 4)) == "empty"
    assert describe_layout(torch.zeros(1, 4)[:, ::2]) == "stepped"


@pytest.mark.parametrize("kind", ["normal", "large", "tiny", "beyond_half", "mixed"])
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_wide_values_are_finite_and_of_their_kind(kind, dtype):
    if kind == "beyond_half" and dtype == torch.float16:
        pytest.skip("float16 cannot hold them")
    x = wide_values(_gen(9), (64, 33), dtype, kind, device="cpu")
    assert x.dtype == dtype and x.isfinite().all()
    big = float(x.abs().max())
    if kind == "large":
        assert big > 1e3 and torch.exp(x.float()).isinf().any()
    elif kind == "tiny":
        assert big < 1e-4
    elif kind == "beyond_half":
        assert float(x.abs().min()) > torch.finfo(torch.float16).max
    else:
        assert (x != x.round()).float().mean() > 0.5


def test_records_are_taken_once():
    take_records()
    record(torch.zeros(4, 1025)[:, :1000], width=1000, dim="-1")
    assert take_records() == [{"size_class": "small", "dtype": "float32", "layout": "padded", "dim": "-1"}]
    assert take_records() == []


def test_rounded_terms_allow_the_rounding_of_larger_terms():
    # y = a - b with |a|, |b| >> |y|, b rounded to bfloat16 first (as a half
    # log_softmax rounds its log-sum-exp): off by half an ulp of b.
    a = torch.full((64,), 10.0, dtype=torch.float64)
    b = 10.0 - torch.linspace(0.01, 0.1, 64, dtype=torch.float64) + 0.013
    want = a - b
    got = (a - b.to(torch.bfloat16).double()).to(torch.bfloat16)
    scale = a.abs() + b.abs()
    assert _fails(got, want, scale=scale)
    assert_close(got, want, scale=scale, rounded_terms=True)
