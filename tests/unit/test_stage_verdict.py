"""Status decisions: exit code + report -> one status word (gemswatch.watch.status)."""

from __future__ import annotations

import signal

import pytest

from gemswatch.watch.status import (
    ALL_SKIPPED,
    CRASHED,
    ERROR,
    FAILED,
    NOT_RUN,
    PASSED,
    SUPERSEDED,
    TIMEOUT,
    UNCALLED,
    gates,
    overall_status,
)
from gemswatch.watch.stage.result import Outcome
from gemswatch.watch.stage.verdict import decide

OPS = ["softmax"]


def ours(records, status="passed", uncalled=()):
    return {
        "schema_version": "gemswatch.correctness/v1",
        "status": status,
        "summary": {},
        "overrides": [],
        "uncalled": list(uncalled),
        "records": records,
    }


def rec(nodeid, result="passed", calls=1, reason=None, message=None):
    r = {"nodeid": nodeid, "params": {}, "result": result, "reason": reason, "candidate_calls": {"gemswatch.gems.softmax": calls}}
    if message:
        r["message"] = message
    return r


def pre(records):
    return {"schema_version": "flaggems.preflight/v1", "records": records}


def pcase(status="passed", override=True, count=1, op="softmax", error=None):
    r = {"operator": op, "nodeid": "b.py::t", "case_id": f"c{count}{status}", "override": override, "count": count, "status": status}
    if error:
        r["error"] = error
    return r


def bench(cases, op="softmax"):
    return {
        "schema_version": "gemswatch.benchmark/v1",
        "device": "cpu",
        "interpreted": True,
        "level": "core",
        "benchmarks": [{"operator": op, "nodeid": "b.py::t", "candidate_source": "override", "cases": cases}],
        "operators": {},
    }


def bcase(speedup=2.0, source="override", error=None):
    return {"case_id": "x", "latency_base": 1.0, "latency": 0.5, "speedup": speedup, "candidate_source": source, "error": error}


# -- process outcomes win over any report -----------------------------------


def test_cancelled_is_superseded():
    v = decide("correctness", Outcome(-2, cancelled=True, cancel_reason="superseded by x"), None, OPS)
    assert (v.status, v.message) == (SUPERSEDED, "superseded by x")


def test_timeout():
    v = decide("preflight", Outcome(-9, timed_out=True, timeout_s=5), None, OPS)
    assert v.status == TIMEOUT and "5 s" in v.message


def test_killed_by_signal_is_crashed_with_its_name():
    v = decide("correctness", Outcome(-signal.SIGSEGV), ours([rec("t")]), OPS)
    assert v.status == CRASHED and "SIGSEGV" in v.message


def test_usage_error_is_error_with_the_line():
    log = "some noise\nERROR: --override: cannot import candidate c.py: SyntaxError at line 3\n\n"
    v = decide("preflight", Outcome(4), None, OPS, log)
    assert v.status == ERROR
    assert v.message == "--override: cannot import candidate c.py: SyntaxError at line 3"


def test_conftest_import_error_exit_4():
    log = "ImportError while loading conftest '/p/tests/conftest.py'.\nE   ModuleNotFoundError: No module named 'x'\n"
    v = decide("correctness", Outcome(4), None, OPS, log)
    assert v.status == ERROR and "No module named 'x'" in v.message


def test_exit_5_is_never_passed():
    v = decide("correctness", Outcome(5), None, OPS, "no tests ran in 0.01s")
    assert v.status == ERROR and "exit 5" in v.message


def test_collection_error_exit_2_is_error():
    log = "ERROR tests/test_x.py - NameError: name 'y' is not defined\nInterrupted: 1 error during collection\n"
    v = decide("correctness", Outcome(2), None, OPS, log)
    assert v.status == ERROR and "collection" in v.message


def test_upstream_override_failure_exit_3_is_error():
    log = "✗ Failed to override softmax\nINTERNALERROR> SystemExit: 1\n"
    assert decide("correctness", Outcome(3), None, OPS, log).status == ERROR


def test_internal_error_otherwise_crashed():
    assert decide("correctness", Outcome(3), None, OPS, "INTERNALERROR> boom").status == CRASHED


@pytest.mark.parametrize("rc", [0, 1])
def test_missing_report_is_crashed(rc):
    v = decide("correctness", Outcome(rc), None, OPS, "", report_error="no report file")
    assert v.status == CRASHED and "without a valid report" in v.message


def test_odd_exit_code_is_crashed():
    assert decide("correctness", Outcome(70), ours([rec("t")]), OPS).status == CRASHED


def test_spawn_error_is_error():
    assert decide("correctness", Outcome(None, spawn_error="python9: not found"), None, OPS).status == ERROR


# -- correctness ----------------------------------------------------------------


def test_correctness_passed_counts_calls():
    v = decide("correctness", Outcome(0), ours([rec("a", calls=2), rec("b", calls=3), rec("c", "skipped", 0)]), OPS)
    assert v.status == PASSED
    assert v.cases.to_dict() == {"passed": 2, "failed": 0, "skipped": 1, "total": 3}
    assert v.candidate_calls == {"softmax": 5}


def test_correctness_failed_names_first_failure():
    r = [rec("a"), rec("t::b[fp16]", "failed", message="Mismatch 3/100, worst at (0, 2): 1.5 vs 1.0\nmore"), rec("c", "failed")]
    v = decide("correctness", Outcome(1), ours(r, "failed"), OPS)
    assert v.status == FAILED
    assert v.first_failure == "t::b[fp16]"
    assert v.message == "t::b[fp16]: Mismatch 3/100, worst at (0, 2): 1.5 vs 1.0"
    assert "more" in v.detail


def test_report_beats_exit_code_zero():
    """A report that shows a failure is a failure even with exit 0."""
    assert decide("correctness", Outcome(0), ours([rec("a", "failed")]), OPS).status == FAILED


def test_all_skipped():
    v = decide("correctness", Outcome(0), ours([rec("a", "skipped", 0, reason="needs cuda")], "all_skipped"), OPS)
    assert v.status == ALL_SKIPPED and "needs cuda" in v.message


def test_zero_calls_is_uncalled_even_with_exit_0():
    v = decide("correctness", Outcome(0), ours([rec("a", calls=0), rec("b", calls=0)]), OPS)
    assert v.status == UNCALLED and "never called" in v.message


def test_declared_uncalled():
    v = decide("correctness", Outcome(1), ours([rec("a")], "uncalled", ["gemswatch.gems.softmax"]), OPS)
    assert v.status == UNCALLED


def test_empty_records_is_not_passed():
    v = decide("correctness", Outcome(0), ours([], "no_tests"), OPS)
    assert v.status == ERROR


def test_exit_1_without_failing_case_is_failed():
    v = decide("correctness", Outcome(1), ours([rec("a")]), OPS, "E   teardown exploded\n")
    assert v.status == FAILED and "teardown exploded" in v.message


def test_setup_error_counts_as_failure():
    v = decide("correctness", Outcome(1), ours([rec("a", "error", reason="fixture 'x' not found")]), OPS)
    assert v.status == FAILED and "fixture" in v.message


def test_upstream_correctness_format():
    report = {
        "tests/test_r.py::test_softmax[a]": {"params": {}, "result": "passed", "opname": ["softmax"], "reason": None, "candidate_calls": {"flag_gems.softmax": 4}},
        "tests/test_r.py::test_softmax[b]": {"params": {}, "result": "passed", "opname": ["softmax"], "reason": None, "candidate_calls": {"flag_gems.softmax": 1}},
    }
    v = decide("correctness", Outcome(0), report, OPS)
    assert v.status == PASSED and v.candidate_calls == {"softmax": 5}


def test_upstream_unused_assertion_after_passing_report():
    report = {"t::a": {"params": {}, "result": "passed", "opname": [], "reason": None, "candidate_calls": {"flag_gems.softmax": 0}}}
    v = decide("correctness", Outcome(1), report, OPS, "AssertionError: operator softmax ... never invoked")
    assert v.status == UNCALLED


def test_upstream_setup_error_result_none():
    report = {"t::a": {"params": {}, "result": None, "opname": [], "reason": None}}
    assert decide("correctness", Outcome(1), report, OPS).status == FAILED


def test_unknown_schema_is_crashed():
    assert decide("correctness", Outcome(0), {"schema_version": "x/v9"}, OPS).status == CRASHED


def test_calls_of_another_op_do_not_count():
    r = [{"nodeid": "a", "result": "passed", "candidate_calls": {"gemswatch.gems.log_softmax": 3}}]
    assert decide("correctness", Outcome(0), ours(r), OPS).status == UNCALLED


# -- preflight ------------------------------------------------------------------


def test_preflight_passed():
    v = decide("preflight", Outcome(0), pre([pcase(), pcase()]), OPS)
    assert v.status == PASSED and v.cases.passed == 2 and v.candidate_calls == {"softmax": 2}


def test_preflight_failed_case():
    v = decide("preflight", Outcome(1), pre([pcase(), pcase("failed", error="RuntimeError: boom\ntrace")]), OPS)
    assert v.status == FAILED and "RuntimeError: boom" in v.message and v.cases.failed == 1


def test_a_failed_matrix_product_case_is_named_by_its_sizes():
    # The mm family's benchmark shapes are sizes (M, N, K), not tensor dims.
    case = {**pcase("failed", op="mm", error="AssertionError: 3 of 8 elements differ"), "dtype": "float16",
            "shape": {"M": 1, "N": 37, "K": 200}, "params": {}}
    v = decide("preflight", Outcome(1), pre([pcase(op="mm"), case]), ["mm"])
    assert v.status == FAILED
    assert v.message.startswith("mm float16 M=1 N=37 K=200: AssertionError: 3 of 8 elements differ"), v.message


def test_preflight_override_false_is_uncalled():
    assert decide("preflight", Outcome(0), pre([pcase(override=False)]), OPS).status == UNCALLED


def test_preflight_count_zero_is_uncalled():
    assert decide("preflight", Outcome(0), pre([pcase(count=0)]), OPS).status == UNCALLED


def test_preflight_other_operator_only_is_uncalled():
    assert decide("preflight", Outcome(0), pre([pcase(op="log_softmax")]), OPS).status == UNCALLED


def test_preflight_empty_is_failed():
    assert decide("preflight", Outcome(1), pre([]), OPS).status == FAILED


def test_preflight_missing_records_key():
    assert decide("preflight", Outcome(0), {"schema_version": "flaggems.preflight/v1"}, OPS).status == CRASHED


# -- benchmark ------------------------------------------------------------------


def test_benchmark_geomean():
    v = decide("benchmark", Outcome(0), bench([bcase(2.0), bcase(8.0)]), OPS)
    assert v.status == PASSED
    assert v.speedup == pytest.approx(4.0)
    assert v.speedups == {"softmax": pytest.approx(4.0)}


def test_benchmark_not_override_is_uncalled():
    assert decide("benchmark", Outcome(0), bench([bcase(source=None)]), OPS).status == UNCALLED


def test_benchmark_case_error_is_failed():
    v = decide("benchmark", Outcome(1), bench([bcase(), bcase(error="did not invoke")]), OPS)
    assert v.status == FAILED and "did not invoke" in v.message


def test_benchmark_no_cases_is_failed():
    assert decide("benchmark", Outcome(0), bench([]), OPS).status == FAILED


def test_benchmark_upstream_format():
    report = {
        "softmax": {
            "details": [{"op_name": "softmax", "dtype": "torch.float16", "result": [{"speedup": 1.5, "candidate_source": "override"}]}],
            "result": "passed",
            "reason": None,
            "test_case": "b.py::test_softmax",
        }
    }
    v = decide("benchmark", Outcome(0), report, OPS)
    assert v.status == PASSED and v.speedup == pytest.approx(1.5)


# -- gating and run status ------------------------------------------------------


@pytest.mark.parametrize(
    "status,gated",
    [(PASSED, False), (ALL_SKIPPED, False), (NOT_RUN, False), (FAILED, True), (ERROR, True), (UNCALLED, True), (CRASHED, True), (TIMEOUT, True)],
)
def test_gates(status, gated):
    assert gates(status) is gated


def test_overall_status():
    assert overall_status([PASSED, PASSED]) == PASSED
    assert overall_status([PASSED, ALL_SKIPPED, PASSED]) == ALL_SKIPPED
    assert overall_status([ERROR, NOT_RUN]) == ERROR
    assert overall_status([PASSED, FAILED, NOT_RUN]) == FAILED
    assert overall_status([]) == NOT_RUN


def test_the_seed_of_a_correctness_report_is_kept_whatever_the_verdict():
    report = {**ours([rec("a", calls=2)]), "seed": 987}
    assert decide("correctness", Outcome(0), report, OPS).seed == 987
    failed = {**ours([rec("t::b", "failed", message="boom")], "failed"), "seed": 5}
    assert decide("correctness", Outcome(1), failed, OPS).seed == 5
    assert decide("correctness", Outcome(0), ours([rec("a", calls=2)]), OPS).seed is None  # an older report


def test_the_reasons_cases_were_skipped_are_counted():
    r = [rec("a", calls=1), rec("b", "skipped", 0, reason="gems_impl: the library's own behaviour\nmore"),
         rec("c", "skipped", 0, reason="gems_impl: the library's own behaviour"), rec("d", "skipped", 0)]
    v = decide("correctness", Outcome(0), ours(r), OPS)
    assert v.skips == {"gems_impl: the library's own behaviour": 2, "no reason given": 1}


def test_a_stage_the_oom_killer_took_says_it_ran_out_of_memory():
    v = decide("correctness", Outcome(-9, oom_killed=True), None, OPS, "")
    assert v.status == CRASHED and "out-of-memory killer" in v.message and "ran out of memory" in v.message
    assert decide("correctness", Outcome(-9), None, OPS, "").message == "killed by SIGKILL"


@pytest.mark.parametrize("version", ["v1", "v2", "v1-container"])
def test_oom_kills_are_read_from_the_memory_cgroup(tmp_path, version):
    from gemswatch.watch.stage.reaper import oom_kills

    cgroup = tmp_path / "cgroup"
    if version == "v2":
        cgroup.write_text("0::/user.slice/me\n")
        events = tmp_path / "user.slice" / "me" / "memory.events"
        body = "low 0\nhigh 0\nmax 2\noom 1\noom_kill 3\n"
    else:
        cgroup.write_text("4:memory:/box/abc\n0::/\n")
        events = tmp_path / "memory" / ("box/abc" if version == "v1" else "") / "memory.oom_control"
        body = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
    events.parent.mkdir(parents=True, exist_ok=True)
    events.write_text(body)
    assert oom_kills(str(cgroup), str(tmp_path)) == 3
    assert oom_kills(str(tmp_path / "missing"), str(tmp_path)) is None


def test_a_failing_benchmark_case_is_shown_by_its_shape_not_its_hash():
    failing = {"operator": "softmax", "case_id": "softmax-float16-5854eff95aec815b", "dtype": "float16",
               "shape": {"x": [1, 5]}, "params": {"dim": -1}, "override": True, "count": 1, "status": "failed",
               "error": "RuntimeError: boom"}
    v = decide("preflight", Outcome(1), pre([failing]), OPS)
    assert v.message == "softmax float16 x=[1, 5] dim=-1: RuntimeError: boom"
    assert v.first_failure == "softmax-float16-5854eff95aec815b"  # the id --case-id replays


def test_the_headline_ratio_leads_the_verdict_and_orders_the_cases():
    # Under the interpreter the headline is against the interpreted gems
    # kernel: a case 2x faster than torch but 0.5x the gems kernel is the worst.
    cases = [
        bcase(2.0) | {"case_id": "a", "headline_speedup": 0.5, "headline_vs": "gems", "speedup_gems": 0.5,
                      "latency_gems": 0.25, "determinism": "PASS", "peak_mem_bytes": None},
        bcase(0.5) | {"case_id": "b", "headline_speedup": 8.0, "headline_vs": "gems", "speedup_gems": 8.0,
                      "latency_gems": 4.0, "determinism": "NON_DETERMINISTIC", "peak_mem_bytes": 4096},
    ]
    report = bench(cases) | {"caveat": "CPU interpreter: only the ratio against the interpreted gems kernel means anything"}
    v = decide("benchmark", Outcome(0), report, OPS)
    assert v.status == PASSED and v.speedup == pytest.approx(1.0)
    assert v.headline_speedup == pytest.approx(2.0) and v.headline_vs == "gems"
    assert v.message == report["caveat"]
    assert [r["case"] for r in v.per_case] == ["a", "b"]
    worst, best = v.per_case
    assert (worst["headline_speedup"], worst["gems_ms"], worst["determinism"], worst["headline_vs"]) == (0.5, 0.25, "PASS", "gems")
    assert best["peak_mem_bytes"] == 4096 and isinstance(best["peak_mem_bytes"], int)
    assert best["compile_ms"] is None and best["pct_of_roofline"] is None


def test_a_benchmark_event_carries_its_headline_unrounded():
    from gemswatch.watch.stage.result import StageResult

    fields = StageResult("benchmark", PASSED, speedup=0.0012345678, headline_speedup=1.23456789,
                         headline_vs="gems").event_fields()
    assert (fields["speedup"], fields["headline_speedup"], fields["headline_vs"]) == (0.0012345678, 1.23456789, "gems")
    assert "headline_speedup" not in StageResult("correctness", PASSED).event_fields()


def test_the_sessions_own_lines_are_never_the_reason():
    # An isolated session opens its log with the worker's sandbox and ends it
    # with where the candidate calls spent their time; a crash's reason is
    # the last line before those.
    from gemswatch.watch.stage.pytest_log import first_failure_line, usage_error

    log = ("gemswatch: candidate sandbox: Landlock ABI 7, writes only to /tmp/x\n"
           "Fatal Python error: Segmentation fault\n"
           "gemswatch: candidate calls: 3, 0.20 s of round trips (the worker says 0.18 s in the candidate)\n"
           "gemswatch: stage clock, s after configure: worker started 0.01, candidate loaded 0.90\n")
    assert first_failure_line(log) == "Fatal Python error: Segmentation fault"
    assert usage_error(log) == "Fatal Python error: Segmentation fault"
