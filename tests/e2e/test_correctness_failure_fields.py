"""The correctness report's per-case fields that let failures be grouped:
``test``, a readable ``case`` id, and ``failure`` (the error's type, what the
case was on, and assert_close's shape, worst index and errors).

One in-process pytester session (no override, no candidate: these fields do
not depend on one), under a second.
"""

from __future__ import annotations

import json

import pytest

from gemswatch.testing.case_ids import readable_case, readable_value

pytest_plugins = ["pytester"]

SUITE = """
import pytest
import torch

from gemswatch.testing.accuracy import assert_close
from gemswatch.testing.cases import record


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scaled(dtype):
    for n in (8, 781):
        x = torch.ones(4, n, dtype=dtype)
        record(x, width=n)
        got = x.clone()
        if n == 781 and dtype == torch.bfloat16:
            got[2, 5] = 1.5
        try:
            assert_close(got, x.double())
        except AssertionError as e:
            raise AssertionError(f"{e} [case: shape {tuple(x.shape)}]") from None  # as the suites re-raise


def test_raises():
    record(torch.ones(3, dtype=torch.float16))
    raise IndexError("out of range")


def test_passes():
    pass
"""


def test_records_name_their_test_a_readable_case_and_what_a_failure_was_on(pytester):
    pytester.makeconftest('pytest_plugins = ["gemswatch.testing.correctness", "gemswatch.testing.upstream_spellings"]\n')
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--record", "json", "--output", "r.json")
    assert result.ret == 1
    report = {r["case"]: r for r in json.loads((pytester.path / "r.json").read_text())["records"]}

    assert set(report) == {"test_scaled[float32]", "test_scaled[bfloat16]", "test_raises", "test_passes"}
    rec = report["test_scaled[bfloat16]"]
    assert rec["nodeid"].endswith("test_scaled[dtype1]") and rec["test"] == "test_scaled"  # the old id is kept
    assert "failure" not in report["test_scaled[float32]"] and "failure" not in report["test_passes"]

    # a wrong result keeps its dtype, shape, worst index and errors
    failure = report["test_scaled[bfloat16]"]["failure"]
    assert failure["error"] == "AssertionError"
    assert failure["dtype"] == "bfloat16" and failure["shape"] == [4, 781] and failure["index"] == [2, 5]
    assert failure["size_class"] == "small" and failure["layout"] == "contiguous"
    assert failure["rel_err"] == pytest.approx(0.5) and failure["abs_err"] == pytest.approx(0.5)
    assert failure["mismatched"] == 1 and failure["elements"] == 4 * 781

    # any other error keeps its type and what the case was on
    failure = report["test_raises"]["failure"]
    assert failure == {"error": "IndexError", "dtype": "float16", "size_class": "tiny", "layout": "contiguous"}


def test_readable_values_and_ids():
    import enum

    import torch

    class Mode(enum.Enum):
        FAST = 1

    assert readable_value(torch.float16) == "float16" and readable_value(torch.add) == "add"
    assert readable_value((4, 781)) == "(4,781)" and readable_value(Mode.FAST) == "FAST"
    assert readable_case("test_x[src0-dst0-softmax]", {"src": torch.float16, "dst": torch.float32, "op": "softmax"}) == (
        "test_x[float16-float32-softmax]"
    )
    # a value that prints like an id, or ids given by the test, stay as they are
    assert readable_case("test_y[f16-norm1]", {"dtype": torch.float16, "norm": torch.nn.functional.layer_norm}) == (
        "test_y[f16-layer_norm]"
    )
    assert readable_case("test_z", {}) == "test_z"
