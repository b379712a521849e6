"""The accuracy helper every correctness test relies on."""

from __future__ import annotations

import pytest
import torch

from gemswatch.testing.accuracy import assert_close, tolerance


def test_values_within_tolerance_pass():
    want = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    assert_close((want * (1 + 1e-7)).float(), want)


def test_the_reported_element_is_the_one_outside_its_tolerance():
    # 100.00012 has the largest absolute error but is within rtol; 0.0011 vs 0.001 is not.
    want = torch.tensor([100.0, 0.001], dtype=torch.float64)
    got = torch.tensor([100.00012, 0.0011], dtype=torch.float32)
    with pytest.raises(AssertionError, match=r"^1 of 2 elements differ .* worst at index \(1,\): got 0\.00109999"):
        assert_close(got, want)


def test_nan_is_a_mismatch_unless_allowed():
    want = torch.tensor([float("nan"), 1.0], dtype=torch.float64)
    got = torch.tensor([float("nan"), 1.0])
    with pytest.raises(AssertionError, match="worst at index \\(0,\\): got nan"):
        assert_close(got, want)
    assert_close(got, want, equal_nan=True)


def test_shape_and_dtype_mismatches_are_named():
    want = torch.zeros(2, 3, dtype=torch.float64)
    with pytest.raises(AssertionError, match=r"shape mismatch: got \(3, 2\), expected \(2, 3\)"):
        assert_close(torch.zeros(3, 2), want)
    with pytest.raises(AssertionError, match="dtype mismatch: got torch.float32, expected torch.float16"):
        assert_close(torch.zeros(2, 3), want, torch.float16)


def test_tolerance_grows_with_the_reduction_length():
    assert tolerance(torch.float16) == (1e-3, 1e-5)
    rtol, atol = tolerance(torch.float16, reduce_len=100)
    assert rtol == pytest.approx(1e-2) and atol == pytest.approx(1e-4)
