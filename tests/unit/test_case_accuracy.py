"""A benchmark case's result judged by the accuracy rule, with torch eager as the floor."""

from __future__ import annotations

import pytest
import torch

from gemswatch.testing.accuracy import AccuracyError
from gemswatch.testing.benchmark.case_accuracy import Judged, check_case_accuracy, product


def _softmax_rule(args, kwargs):
    return Judged(reduce_len=args[0].shape[-1])


def _x(dtype=torch.float32):
    return (torch.randn(64, 300, generator=torch.Generator().manual_seed(3)).to(dtype),)


def test_a_right_result_passes_and_a_0_2_percent_error_fails():
    (x,) = _x()
    check_case_accuracy("softmax", _softmax_rule, torch.softmax, torch.softmax(x, -1), (x,), {"dim": -1})
    with pytest.raises(AccuracyError, match="elements differ.*torch eager on the same inputs"):
        check_case_accuracy("softmax", _softmax_rule, torch.softmax, torch.softmax(x, -1) * 1.002, (x,), {"dim": -1})


def test_float16_arithmetic_on_float32_inputs_fails():
    (x,) = _x()
    got = torch.softmax(x.half(), -1).float()
    with pytest.raises(AccuracyError):
        check_case_accuracy("softmax", _softmax_rule, torch.softmax, got, (x,), {"dim": -1})


def test_outside_the_rule_but_as_good_as_eager_passes():
    # A baseline coarser than the rule (here: one that rounds to float16
    # inside): a candidate that matches it is not failed for the rule's sake,
    # one twice as far off as it is.
    def coarse(x, dim):
        return torch.softmax(x.to(torch.float16).to(x.dtype), dim)

    (x,) = _x()
    check_case_accuracy("softmax", _softmax_rule, coarse, coarse(x, -1), (x,), {"dim": -1})
    far = coarse(x, -1) + 3 * (coarse(x, -1) - torch.softmax(x.double(), -1).float())
    with pytest.raises(AccuracyError):
        check_case_accuracy("softmax", _softmax_rule, coarse, far, (x,), {"dim": -1})


def test_an_eager_that_overflows_vouches_for_nothing():
    def overflowing(x, dim):
        return torch.full_like(torch.softmax(x, dim), float("inf"))

    (x,) = _x()
    with pytest.raises(AccuracyError):
        check_case_accuracy("softmax", _softmax_rule, overflowing, torch.zeros_like(x), (x,), {"dim": -1})


def test_wrong_dtype_or_shape_is_named():
    (x,) = _x()
    with pytest.raises(AccuracyError, match="returned torch.float64 .* torch returns torch.float32"):
        check_case_accuracy("softmax", _softmax_rule, torch.softmax, torch.softmax(x.double(), -1), (x,), {"dim": -1})


def test_the_inputs_are_left_as_they_are_for_an_inplace_op():
    g = torch.Generator().manual_seed(5)
    c, a, b = (torch.randn(s, generator=g) for s in ((8, 6), (8, 40), (40, 6)))
    before = c.clone()
    got = c.clone().addmm_(a, b)
    check_case_accuracy("addmm_", lambda args, kw: product(args[1], args[2]), torch.Tensor.addmm_, got, (c, a, b), {})
    assert torch.equal(c, before)
