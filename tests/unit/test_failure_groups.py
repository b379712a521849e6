"""A correctness stage's failures grouped by test function and dtype, and
its coverage, carried by the verdict and the stage_finished event."""

from __future__ import annotations

from gemswatch.watch.stage.failure_groups import group_failures
from gemswatch.watch.stage.result import Cases, Outcome, StageResult
from gemswatch.watch.stage.verdict import decide


def rec(case, result, dtype=None, covered=(), **failure):
    test = case.split("[")[0]
    out = {"nodeid": f"tests/test_softmax.py::{test}[auto]", "params": {}, "opname": ["softmax"], "result": result,
           "reason": None, "test": test, "case": case, "candidate_calls": {"gemswatch.gems.softmax": 1},
           "covered": [{"dtype": d, "size_class": "small", "layout": "contiguous"} for d in covered]}
    if dtype is not None:
        out["params"] = {"dtype": f"torch.{dtype}"}
    if result == "failed":
        out["reason"] = failure.pop("reason", "AssertionError: 3 of 781 elements differ")
        out["failure"] = {"error": "AssertionError", **({"dtype": dtype} if dtype else {}), **failure}
    return out


RECORDS = [
    # test_widths loops over dtypes inside each case: the failure names its dtype
    rec("test_widths[tiny]", "passed", covered=["float32", "bfloat16"]),
    rec("test_widths[small]", "failed", covered=["float32", "bfloat16"], dtype="bfloat16", shape=[4, 781],
        index=[2, 5], rel_err=3e-2, abs_err=1e-3),
    rec("test_widths[medium]", "failed", covered=["float32", "bfloat16"], dtype="bfloat16", shape=[4, 4097],
        index=[0, 9], rel_err=5e-3, abs_err=2e-4),
    rec("test_widths[large]", "passed", covered=["float32"]),
    # the dtype is a parameter
    rec("test_library[float16]", "failed", dtype="float16", reason="IndexError: out of range"),
    rec("test_library[float32]", "passed", dtype="float32"),
    rec("test_skipped[float16]", "skipped", dtype="float16"),
]


def test_failures_group_by_test_and_dtype_with_counts_and_the_worst_case():
    groups = group_failures(RECORDS)
    assert [(g.test, g.dtype, g.failed, g.of) for g in groups] == [
        ("test_widths", "bfloat16", 2, 3),  # of the 3 test_widths cases that ran on bfloat16 (large did not)
        ("test_library", "float16", 1, 1),  # the skipped float16 case did not run
    ]
    widths = groups[0]
    assert widths.cases == ("test_widths[small]", "test_widths[medium]")
    assert widths.shapes == ((4, 781), (4, 4097))
    assert (widths.worst_case, widths.worst_rel_err, widths.worst_shape, widths.worst_index) == (
        "test_widths[small]", 3e-2, (4, 781), (2, 5))
    library = groups[1]
    assert library.error == "IndexError: out of range" and library.worst_rel_err is None and library.shapes == ()


def test_an_upstream_report_without_the_new_fields_still_groups_by_function_and_dtype_parameter():
    upstream = [
        {"nodeid": "tests/test_x.py::test_accuracy_softmax[dtype0-shape1]", "params": {"dtype": "torch.float16"},
         "result": "failed", "reason": "AssertionError: Tensor-likes are not close!"},
        {"nodeid": "tests/test_x.py::test_accuracy_softmax[dtype0-shape2]", "params": {"dtype": "torch.float16"},
         "result": "passed"},
        {"nodeid": "tests/test_x.py::test_accuracy_softmax[dtype1-shape1]", "params": {"dtype": "torch.float32"},
         "result": "passed"},
    ]
    [group] = group_failures(upstream)
    assert (group.test, group.dtype, group.failed, group.of) == ("test_accuracy_softmax", "float16", 1, 2)
    assert group.cases == ("test_accuracy_softmax[dtype0-shape1]",)


def test_the_verdict_and_the_event_carry_the_groups_and_a_readable_first_case():
    report = {"schema_version": "gemswatch.correctness/v1", "status": "failed", "seed": 7, "records": RECORDS}
    v = decide("correctness", Outcome(returncode=1), report, ["softmax"])
    assert v.status == "failed" and [g.test for g in v.failure_groups] == ["test_widths", "test_library"]
    assert v.first_failure == "tests/test_softmax.py::test_widths[auto]"  # the id pytest knows stays
    assert v.message.startswith("tests/test_softmax.py::test_widths[small]: AssertionError")
    groups = tuple(g.to_dict() for g in v.failure_groups)
    fields = StageResult("correctness", v.status, cases=Cases(), failure_groups=groups).event_fields()
    assert fields["failure_groups"][0]["worst_shape"] == [4, 781] and fields["failure_groups"][0]["of"] == 3
    assert "failure_groups" not in StageResult("correctness", "passed").event_fields()


def test_the_coverage_of_the_report_goes_with_the_verdict_and_the_event():
    coverage = {"softmax": {"cases": 3, "size_class": ["small", "tiny"], "dtype": ["bfloat16", "float32"],
                            "layout": ["contiguous"], "dtypes_by_size_class": {"small": ["bfloat16"]}}}
    passed = [r for r in RECORDS if r["result"] == "passed"]
    report = {"schema_version": "gemswatch.correctness/v1", "status": "passed", "records": passed, "coverage": coverage}
    v = decide("correctness", Outcome(returncode=0), report, ["softmax"])
    assert v.status == "passed" and v.coverage == coverage
    assert StageResult("correctness", "passed", coverage=v.coverage).event_fields()["coverage"] == coverage
    assert decide("correctness", Outcome(returncode=0), {**report, "coverage": "junk"}, ["softmax"]).coverage == {}
