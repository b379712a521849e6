"""Unit tests of the benchmark harness's pure parts: case model and ids,
input copies, timers, reference failure categories and statuses, reports."""

from __future__ import annotations

import json
import math

import pytest
import torch

from gemswatch.testing.benchmark import Benchmark, CasePlan, grid
from gemswatch.testing.benchmark.cases import CASE_LIST_SCHEMA, CaseList, dtype_name, make_case_id, plan_cases
from gemswatch.testing.benchmark.reference import reference_failure, reference_status
from gemswatch.testing.benchmark.reports import (
    benchmark_log,
    benchmark_report,
    case_list_report,
    preflight_report,
    write_json_atomic,
)
from gemswatch.testing.benchmark.runner import geomean
from gemswatch.testing.benchmark.timing import WallClockTimer, clone_inputs, make_timer, tensor_bytes

CASES = {"core": [CasePlan({"x": [2, 8]}, {"dim": -1}), CasePlan({"x": [3, 5]}, {"dim": 0})]}


def _build(case, device):
    return (torch.zeros(case.shape["x"], dtype=case.dtype, device=device),), dict(case.params)


def _bench(op="softmax", cases=CASES, **kw):
    return Benchmark(op=op, baseline=torch.softmax, cases=cases, build=_build, **kw)


# -- case ids -------------------------------------------------------------------


def test_case_id_is_stable_and_names_operator_and_dtype():
    a = make_case_id("b/test_x.py::test_a", "softmax", "core", torch.float16, {"x": [2, 8]}, {"dim": -1})
    b = make_case_id("b/test_x.py::test_a", "softmax", "core", torch.float16, {"x": (2, 8)}, {"dim": -1})
    assert a == b
    assert a.startswith("softmax-float16-") and len(a.rsplit("-", 1)[1]) == 16


@pytest.mark.parametrize(
    "change",
    [
        {"nodeid": "b/test_x.py::test_b"},
        {"operator": "log_softmax"},
        {"level": "comprehensive"},
        {"dtype": torch.float32},
        {"shape": {"x": [2, 9]}},
        {"params": {"dim": 0}},
    ],
)
def test_case_id_changes_with_every_defining_field(change):
    base = dict(nodeid="b/test_x.py::test_a", operator="softmax", level="core", dtype=torch.float16,
                shape={"x": [2, 8]}, params={"dim": -1})
    assert make_case_id(**base) != make_case_id(**(base | change))


def test_two_benchmarks_in_one_test_get_distinct_ids():
    nodeid = "benchmark/test_softmax_perf.py::test_both"
    a = _bench("softmax").plan(nodeid, "core", None)
    b = _bench("log_softmax").plan(nodeid, "core", None)
    assert not {s.case_id for s in a} & {s.case_id for s in b}


def test_plan_orders_by_dtype_and_counts_ordinals_per_dtype():
    specs = _bench().plan("n::t", "core", None)
    assert [(dtype_name(s.dtype), s.ordinal) for s in specs] == [
        ("float16", 0), ("float16", 1), ("float32", 0), ("float32", 1), ("bfloat16", 0), ("bfloat16", 1)]
    assert specs[0].to_dict() == {"case_id": specs[0].case_id, "ordinal": 0, "dtype": "float16",
                                  "shape": {"x": [2, 8]}, "params": {"dim": -1}}


def test_dtype_filter_keeps_benchmark_order():
    bench = _bench()
    assert bench.dtypes_for((torch.bfloat16, torch.float16)) == [torch.float16, torch.bfloat16]
    assert bench.dtypes_for((torch.int32,)) == []


def test_duplicate_plan_is_an_error():
    dup = {"core": [CasePlan({"x": [2, 8]}), CasePlan({"x": [2, 8]})]}
    with pytest.raises(ValueError, match="planned twice"):
        _bench(cases=dup).plan("n::t", "core", None)


def test_planner_function_and_unknown_level():
    bench = _bench(cases=lambda level, dtype: [CasePlan({"n": 4 if dtype == torch.float32 else 8})])
    assert [s.shape for s in bench.plan("n::t", "comprehensive", (torch.float32,))] == [{"n": 4}]
    with pytest.raises(ValueError, match="unknown levels"):
        _bench(cases={"fast": []})
    with pytest.raises(ValueError, match="unknown benchmark level"):
        plan_cases("softmax", "n::t", "fast", [torch.float32], lambda level, dtype: [])


def test_case_plan_values_must_be_json():
    assert CasePlan({"x": (1, 2)}, {"dtype": torch.float16}).params == {"dtype": "float16"}
    with pytest.raises(TypeError, match="JSON values"):
        CasePlan({"x": object()})


def test_grid_and_case_list_dict():
    plans = grid([{"x": [1]}, {"x": [2]}], [{"a": 1}, {"a": 2}])
    assert [(p.shape["x"][0], p.params["a"]) for p in plans] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    specs = _bench().plan("n::t", "core", (torch.float32,))
    listed = case_list_report([CaseList("softmax", "n::t", "core", specs)])
    assert list(listed) == ["schema_version", "benchmarks"]
    assert listed["schema_version"] == CASE_LIST_SCHEMA == "flaggems.benchmark-case-list/v2"
    entry = listed["benchmarks"][0]
    assert (entry["op_name"], entry["phase"], entry["level"], entry["nodeid"]) == ("softmax", "timing", "core", "n::t")


def test_build_must_return_args_and_kwargs():
    bad = Benchmark(op="softmax", baseline=torch.softmax, cases=CASES, build=lambda c, d: torch.zeros(1))
    spec = bad.plan("n::t", "core", (torch.float32,))[0]
    with pytest.raises(TypeError, match=r"must return \(args_tuple, kwargs_dict\)"):
        bad.inputs(spec, "cpu")


def test_inputs_are_seeded_by_case():
    bench = Benchmark(op="softmax", baseline=torch.softmax, cases=CASES,
                      build=lambda c, d: ((torch.randn(c.shape["x"]),), {}))
    spec = bench.plan("n::t", "core", (torch.float32,))[0]
    assert torch.equal(bench.inputs(spec, "cpu")[0][0], bench.inputs(spec, "cpu")[0][0])


# -- inputs and timers ----------------------------------------------------------


def test_clone_inputs_is_independent_and_keeps_strides():
    base = torch.arange(24.0).reshape(4, 6)
    view = base[:, ::2]
    args, kwargs = clone_inputs((view, 3), {"w": base.t(), "n": [base]})
    assert args[0].stride() == view.stride() and torch.equal(args[0], view)
    assert kwargs["w"].stride() == base.t().stride() and torch.equal(kwargs["w"], base.t())
    args[0].add_(100)
    kwargs["n"][0].zero_()
    assert torch.equal(view, base[:, ::2]) and base.sum() == sum(range(24))
    assert args[1] == 3


def test_tensor_bytes_walks_nested_values():
    assert tensor_bytes((torch.zeros(4), [torch.zeros(2, dtype=torch.float16)]), {"a": torch.zeros(1)}, 3) == 24


def test_wall_clock_timer_uses_the_budgets():
    calls = []
    timer = WallClockTimer("cpu", warmup_ms=0, iter_ms=1e-9)
    latency = timer(lambda: calls.append(1))
    assert latency >= 0 and len(calls) == 2  # one estimate call, one measured
    assert make_timer("cpu", 1, 1).name == "wall_clock(median)"
    assert make_timer("cuda", 1, 1).name.startswith("cuda_events")


def test_geomean():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([None, -1.0, math.inf]) is None


# -- reference ------------------------------------------------------------------


def _raise(error):
    try:
        raise error
    except BaseException as e:  # noqa: BLE001
        return e


def test_reference_failure_categories():
    try:
        torch.no_such_op_here  # noqa: B018
    except AttributeError as e:
        missing = e
    assert reference_failure(missing)["category"] == "API_MISSING"
    dtype = _raise(RuntimeError('"softmax_cpu" not implemented for \'Half\''))
    assert reference_failure(dtype, "benchmark_reference") | {"traceback": ""} == {
        "category": "DTYPE_UNSUPPORTED", "type": "RuntimeError", "message": str(dtype), "traceback": "",
        "stage": "benchmark_reference"}
    assert reference_failure(_raise(NotImplementedError("no")))["category"] == "NOT_IMPLEMENTED"
    assert reference_failure(_raise(NotImplementedError("x not implemented for 'Float8_e4m3fn'")))["category"] == "DTYPE_UNSUPPORTED"
    assert reference_failure(_raise(ValueError("not implemented for 'Half'")))["category"] == "UNKNOWN"
    assert reference_failure(_raise(AttributeError("x")))["category"] == "UNKNOWN"


@pytest.mark.parametrize(
    "statuses, exitstatus, expected",
    [
        ([], None, "NO_CASES"),
        (["PASSED"], 0, "PASSED"),
        (["PASSED", "SKIP"], 0, "PASSED"),
        (["SKIP"], 0, "ALL_SKIP"),
        (["PASSED", "FAILED"], 1, "FAILED"),
        (["PASSED", "NOT_RUN"], 0, "FAILED"),
        (["PASSED", "UNSUPPORTED"], 0, "UNSUPPORTED"),
        (["PASSED"], 1, "FAILED"),
        (["PASSED"], 2, "FAILED"),
        (["PASSED"], 5, "PASSED"),
    ],
)
def test_reference_status(statuses, exitstatus, expected):
    records = [{"nodeid": f"n{i}", "status": s} for i, s in enumerate(statuses)]
    assert reference_status(records, exitstatus) == expected


def test_reference_status_counts_cases_of_a_skipped_test_as_skipped():
    records = [{"nodeid": "a", "case_id": "c", "status": "NOT_RUN"},
               {"nodeid": "a", "status": "SKIP", "pytest_phase": "call"}]
    assert reference_status(records) == "ALL_SKIP"


# -- reports ------------------------------------------------------------------


def test_reports_start_with_schema_and_replace_the_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"stale": {"details": [1]}}))
    write_json_atomic(path, preflight_report([], "failed", 1, ["x"]))
    data = json.loads(path.read_text())
    assert list(data)[0] == "schema_version" and data["schema_version"] == "flaggems.preflight/v1"
    assert "stale" not in data
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left behind


def test_benchmark_report_and_log():
    case = {"case_id": "mm-float16-0", "dtype": "float16", "shape": {"M": 1}, "params": {}, "latency_base": 2.0,
            "latency": 1.0, "speedup": 2.0, "gbps": None, "tflops": 0.5, "candidate_source": "override", "error": None,
            "speedup_gems": 4.0, "headline_speedup": 4.0, "headline_vs": "gems"}
    failed = case | {"case_id": "mm-float16-1", "latency": None, "speedup": None, "candidate_source": None,
                     "error": "RuntimeError: x"}
    report = benchmark_report(
        [{"operator": "mm", "nodeid": "n", "candidate_source": None, "geomean_speedup": 2.0, "cases": [case, failed]}],
        device="cpu", interpreted=True, level="core", timer="wall_clock(median)", warmup_ms=1, iter_ms=1,
        status="failed", exit_status=1, problems=[])
    assert list(report)[:5] == ["schema_version", "device", "interpreted", "level", "timer"]
    assert report["operators"] == {"mm": {
        "geomean_speedup": 2.0, "cases": 2, "failed": 1, "candidate_source": "override",
        "geomean_speedup_compile": None, "geomean_speedup_best": None, "geomean_speedup_gems": 4.0,
        "geomean_headline": 4.0, "headline_vs": "gems"}}
    # Under the interpreter the report says which ratio means anything, and heads with it.
    assert report["headline_vs"] == "gems" and "only the ratio against the interpreted gems kernel" in report["caveat"]
    text = benchmark_log(report)
    assert "mm-float16-1" in text and "ERROR RuntimeError: x" in text and "geomean speedup 2.000" in text
    assert "headline 4.000 against gems" in text and report["caveat"] in text


# -- per-case figures, determinism, memory claims, the compile baseline ----------


def test_figures_head_with_gems_under_the_interpreter_and_the_best_baseline_on_a_gpu():
    from gemswatch.testing.benchmark.figures import CaseTimes, case_figures

    times = CaseTimes(latency=2.0, eager=1.0, compiled=0.5, gems=6.0)
    cpu = case_figures(times, interpreted=True, moved_bytes=0, flops=None, copy_gbps=None, peak_tflops=None)
    assert (cpu["headline_vs"], cpu["headline_speedup"], cpu["speedup_gems"]) == ("gems", 3.0, 3.0)
    assert cpu["pct_of_roofline"] is None and cpu["roofline_bound"] is None
    gpu = case_figures(times, interpreted=False, moved_bytes=8 * 10**9, flops=None, copy_gbps=8000.0, peak_tflops=None)
    assert (gpu["headline_vs"], gpu["headline_speedup"], gpu["speedup_compile"]) == ("best", 0.25, 0.25)
    # 8 GB at 8000 GB/s is 1 ms of a 2 ms call: half the roofline, memory-bound.
    assert gpu["gbps"] == pytest.approx(4000.0) and gpu["pct_of_roofline"] == pytest.approx(50.0)
    assert gpu["roofline_bound"] == "memory"
    eager_only = case_figures(CaseTimes(2.0, 1.0), interpreted=False, moved_bytes=1, flops=4e12,
                              copy_gbps=1e3, peak_tflops=4000.0)
    assert (eager_only["headline_vs"], eager_only["headline_speedup"]) == ("eager", 0.5)
    assert eager_only["roofline_bound"] == "compute" and eager_only["pct_of_roofline"] == pytest.approx(50.0)
    assert eager_only["tflops"] == pytest.approx(2000.0)


def test_repeated_results_are_judged_bitwise_then_by_the_accuracy_rule():
    from gemswatch.testing.benchmark.determinism import compare_runs

    x = torch.linspace(0.1, 1.0, 64)
    assert compare_runs([x, x.clone(), x.clone()]) == ("PASS", None)
    nan = torch.tensor([float("nan"), -0.0])
    assert compare_runs([nan, nan.clone()])[0] == "PASS"
    ulp = torch.nextafter(x, torch.full_like(x, 2.0))
    verdict, detail = compare_runs([x, x.clone(), ulp])
    assert verdict == "NON_DETERMINISTIC" and detail.startswith("call 3, output 0")
    assert compare_runs([x, x * 1.01])[0] == "FAIL"
    assert compare_runs([(x, 1), (x.clone(), 2)]) == ("FAIL", "call 2, output 1: 2 against 1")
    assert compare_runs([x, x[:3]])[0] == "FAIL"
    assert compare_runs([torch.arange(4), torch.arange(4) + 1])[0] == "FAIL"  # integers must be equal


@pytest.mark.parametrize("claim", [None, True, 1.5e3, -1, 99, 10**13])
def test_a_peak_memory_claim_outside_what_the_judge_knows_is_rejected(claim):
    from gemswatch.testing.benchmark.memory import check_claimed_peak
    from gemswatch.testing.integrity import IntegrityError

    assert check_claimed_peak("softmax", 4096, 100, 10**12) == 4096
    with pytest.raises(IntegrityError, match="reported-memory"):
        check_claimed_peak("softmax", claim, 100, 10**12)


def test_the_compile_baseline_is_off_the_cpu_by_default_and_a_failure_turns_it_off_once(monkeypatch):
    from gemswatch.testing.benchmark import compiled as module
    from gemswatch.testing.benchmark.cases import CaseSpec
    from gemswatch.testing.benchmark.compiled import CompiledBaselines

    assert CompiledBaselines.for_session("auto", "cpu").status == "off"
    assert CompiledBaselines.for_session("off", "cuda").status == "off"
    assert CompiledBaselines.for_session("auto", "cuda").status == "on"
    made = []

    def fake_compile(fn, dynamic):
        made.append(fn.__code__)

        def compiled(*args, **kwargs):
            if len(made) > 2:
                raise RuntimeError("no C++ compiler")
            return fn(*args, **kwargs)
        return compiled

    monkeypatch.setattr(module.torch, "compile", fake_compile)
    cb = CompiledBaselines.for_session("on", "cpu")
    spec = lambda shape: CaseSpec("softmax-float32-x", "softmax", "n", "core", 0, torch.float32, {"x": shape}, {})  # noqa: E731
    x = torch.ones(3)
    first, took = cb.get("softmax", torch.softmax, spec([3]), (x, -1), {}, lambda: None)
    assert first is not None and took >= 0
    assert cb.get("softmax", torch.softmax, spec([3]), (x, -1), {}, lambda: None) == (first, None)  # cached
    assert cb.get("softmax", torch.softmax, spec([4]), (x, -1), {}, lambda: None)[0] is not None
    assert made[0] is not made[1]  # a code object per signature: no shared recompile limit
    assert cb.get("softmax", torch.softmax, spec([5]), (x, -1), {}, lambda: None) == (None, None)
    assert cb.status == "unavailable" and "no C++ compiler" in cb.reason
    assert cb.get("softmax", torch.softmax, spec([6]), (x, -1), {}, lambda: None) == (None, None)
    assert len(made) == 3  # not tried again
