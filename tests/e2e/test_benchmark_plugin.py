"""pytest sessions of the benchmark plugin, run in-process with pytester.

Each test writes a small benchmark project (a thin conftest loading the
plugin, one benchmark file, candidate files) and runs pytest on it. Most
candidates wrap torch so the sessions stay fast on the CPU interpreter.
"""

from __future__ import annotations

import json
import math
import sys
import types
from contextlib import contextmanager

import pytest

# Imported here so in-process runs find them loaded: pytester drops modules a
# run imported, and triton's extension cannot be imported a second time.
import gemswatch.gems
import gemswatch.testing.benchmark.plugin  # noqa: F401
from gemswatch.testing.benchmark.case_extras import CASE_FIELDS

pytest_plugins = ["pytester"]

DEVICE = gemswatch.gems.device
INTERPRETED = gemswatch.gems.interpreted
BACKEND = "cpu" if DEVICE == "cpu" else "nvidia"
TIMER = "wall_clock(median)" if DEVICE == "cpu" else "cuda_events(median, clean_l2_flush, host_overhead_hidden, off_stream_work_added)"

PROBE = "gw_bench_probe"

CONFTEST = 'pytest_plugins = ["gemswatch.testing.benchmark.plugin", "gemswatch.testing.upstream_spellings"]\n'

BENCHMARKS = """
import sys
import torch
from gemswatch.testing.benchmark import Benchmark, CasePlan, Judged

CASES = {"core": [CasePlan({"x": [2, 8]}), CasePlan({"x": [3, 5]})],
         "comprehensive": [CasePlan({"x": [4, 16]})]}
DTYPES = (torch.float32, torch.float16)


def build(case, device):
    return (torch.randn(case.shape["x"], dtype=case.dtype, device=device),), {"dim": -1}


SOFTMAX = Benchmark(op="softmax", baseline=torch.softmax, cases=CASES, build=build, dtypes=DTYPES,
                    accuracy=lambda args, kwargs: Judged(reduce_len=args[0].shape[-1]))
LOG_SOFTMAX = Benchmark(op="log_softmax", baseline=torch.log_softmax, cases=CASES, build=build, dtypes=DTYPES)


def test_softmax(bench):
    bench.run(SOFTMAX)


def test_log_softmax(bench):
    bench.run(LOG_SOFTMAX)
"""

CANDIDATES = {
    "good.py": """
import torch

def my_softmax(x, dim=-1, dtype=None):
    return torch.softmax(x, dim)
""",
    "bad.py": """
def my_softmax(x, dim=-1, dtype=None):
    raise RuntimeError("boom from candidate")
""",
    # Passes its first call, then fails: while being timed in the first case.
    "tires.py": """
import torch

_calls = [0]

def my_softmax(x, dim=-1, dtype=None):
    _calls[0] += 1
    if _calls[0] > 1:
        raise RuntimeError("tired")
    return torch.softmax(x, dim)
""",
    # Calls the operator it replaces once more: one invocation, two candidate calls.
    "twice.py": """
import torch
import gemswatch.gems as gems

_depth = [0]

def my_softmax(x, dim=-1, dtype=None):
    _depth[0] += 1
    try:
        if _depth[0] == 1:
            gems.softmax(x, dim)
        return torch.softmax(x, dim)
    finally:
        _depth[0] -= 1
""",
    # Right, except 0.2 % off on one of the benchmark's shapes (a path only large inputs take, say).
    "off_on_one_shape.py": """
import torch

def my_softmax(x, dim=-1, dtype=None):
    out = torch.softmax(x.double(), dim)
    return (out * 1.002 if tuple(x.shape) == (3, 5) else out).to(x.dtype)
""",
    # Right on its first three calls (preflight's and the replay check's), then
    # computes float32 inputs in float16: a thousandth off, well inside the
    # timed-output distance.
    "halves_when_timed.py": """
import torch

_calls = [0]

def my_softmax(x, dim=-1, dtype=None):
    _calls[0] += 1
    work = x.half() if _calls[0] > 3 and x.dtype == torch.float32 else x
    return torch.softmax(work.double(), dim).to(work.dtype).to(x.dtype)
""",
    "logged.py": f"""
import sys
import torch

def my_softmax(x, dim=-1, dtype=None):
    probe = sys.modules["{PROBE}"]
    probe.events.append("call")
    if probe.fail:
        raise RuntimeError("candidate failed inside the scope")
    return torch.softmax(x, dim)
""",
}


@pytest.fixture
def probe(monkeypatch):
    """A module the candidates and capture plugins of a run share."""
    module = types.ModuleType(PROBE)
    module.events = []
    module.fail = False
    monkeypatch.setitem(sys.modules, PROBE, module)
    return module


@pytest.fixture
def project(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_probe_perf=BENCHMARKS)
    for name, text in CANDIDATES.items():
        pytester.path.joinpath(name).write_text(text)
    return pytester


def run(pytester, *args, plugins=()):
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:warnings", *args, plugins=list(plugins))


def lit(text):
    """``text`` as an fnmatch pattern that matches it literally."""
    return text.replace("[", "[[]")


def load(pytester, name):
    return json.loads(pytester.path.joinpath(name).read_text())


def case_ids(pytester, *args):
    result = run(pytester, "--list-cases", "--output", "cases.json", *args)
    assert result.ret == 0
    return [c["case_id"] for b in load(pytester, "cases.json")["benchmarks"] for c in b["cases"]]


OVERRIDE = ["--override", "softmax:good.py:my_softmax"]

# -- option validation (protocol order; each a one-line usage error, exit 4) ----------

USAGE_ERRORS = [
    (["--reference-only", *OVERRIDE], "--reference-only cannot be combined with --override"),
    (["--reference-only", "--override-config", "x.yaml"], "--reference-only cannot be combined with --override-config"),
    (["--reference-only", "--preflight-only", "--profile-only"],
     "--reference-only cannot be combined with --profile-only, --preflight-only"),
    (["--reference-only", "--list-cases"], "--reference-only cannot be combined with --list-cases"),
    (["--reference-only", "--query"], "--reference-only cannot be combined with --query"),
    (["--reference-only", "--parallel", "2"], "--reference-only cannot be combined with --parallel"),
    (["--preflight-only", "--profile-only"], "--preflight-only cannot be combined with --profile-only"),
    (["--preflight-only", "--list-cases"], "--preflight-only cannot be combined with --list-cases"),
    (["--preflight-only", "--query"], "--preflight-only cannot be combined with --query"),
    (["--preflight-only", "--parallel", "2"], "--preflight-only does not support --parallel 2"),
    (["--list-cases", "--case-id", "a"], "--list-cases lists every case; it cannot be combined with --case-id"),
    (["--query", "--case-id", "a"], "--query cannot be combined with --case-id"),
    (["--case-id", "a", "--case-id", "b", "--case-id", "a"], "--case-id given more than once: a"),
    (["--profile-only"], "--profile-only needs exactly one --case-id (got 0)"),
    (["--profile-only", "--case-id", "a", "--case-id", "b"], "--profile-only needs exactly one --case-id (got 2)"),
    (["--profile-only", "--case-id", "a", "--profile-warmup", "-1"], "--profile-warmup must be >= 0"),
    (["--profile-only", "--case-id", "a", "--profile-iterations", "0"], "--profile-iterations >= 1 (got 10 and 0)"),
    (["--warmup", "-1"], "--warmup must be >= 0 and --iter > 0 ms"),
    (["--iter", "0"], "--warmup must be >= 0 and --iter > 0 ms"),
    (["--parallel", "-1"], "--parallel must be >= 0"),
    (["--record", "json", "--output", "missing/r.json"], "folder"),
    (["--override", "softmax:nowhere.py:f"], "nowhere.py"),
]


@pytest.mark.parametrize("args, message", USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS])
def test_usage_errors(project, args, message):
    result = run(project, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0], result.stderr.str()


def test_bad_option_value_is_a_usage_error(project):
    result = run(project, "--dtypes", "float64")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "argument --dtypes: invalid choice: 'float64'" in result.stderr.str()


def test_reference_only_rejects_tests_directory(project):
    project.mkpydir("tests").joinpath("test_acc.py").write_text("def test_a():\n    pass\n")
    result = run(project, "--reference-only", "tests/test_acc.py", "test_probe_perf.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "correctness test under tests/" in result.stderr.str()


# -- list-cases and query ------------------------------------------------------------


def test_list_cases_writes_the_case_list_without_building_inputs(project):
    project.makepyfile(test_probe_perf=BENCHMARKS.replace(
        "def build(case, device):", "def build(case, device):\n    raise AssertionError('built inputs')"))
    result = run(project, "--list-cases", "--level", "core", "--output", "cases.json")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*Listed 4 benchmark cases for softmax.", "*list report written to*cases.json"])
    report = load(project, "cases.json")
    assert report["schema_version"] == "flaggems.benchmark-case-list/v2"
    first = report["benchmarks"][0]
    assert list(first) == ["schema_version", "op_name", "nodeid", "phase", "level", "cases"]
    assert (first["op_name"], first["nodeid"], first["phase"], first["level"]) == (
        "softmax", "test_probe_perf.py::test_softmax", "timing", "core")
    assert [(c["dtype"], c["ordinal"], c["shape"]) for c in first["cases"]] == [
        ("float32", 0, {"x": [2, 8]}), ("float32", 1, {"x": [3, 5]}),
        ("float16", 0, {"x": [2, 8]}), ("float16", 1, {"x": [3, 5]})]


def test_case_ids_are_stable_unique_and_honour_filters(project):
    ids = case_ids(project, "--level", "core")
    assert ids == case_ids(project, "--level", "core")
    assert len(ids) == len(set(ids)) == 8
    assert case_ids(project, "--level", "core", "--dtypes", "float16") == [i for i in ids if "-float16-" in i]
    # Default level: comprehensive (one shape per dtype here).
    assert len(case_ids(project)) == 4


def test_one_test_running_two_benchmarks_gets_distinct_ids(project):
    project.makepyfile(test_probe_perf=BENCHMARKS + """
SOFTMAX_AGAIN = Benchmark(op="softmax", baseline=torch.softmax, cases=CASES, build=build, dtypes=DTYPES)


def test_both(bench):
    bench.run(SOFTMAX)
    bench.run(LOG_SOFTMAX)


def test_same_twice(bench):
    bench.run(SOFTMAX)
    bench.run(SOFTMAX_AGAIN)
""")
    result = run(project, "--list-cases", "--level", "core", "--output", "cases.json")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["E*planned twice in test_probe_perf.py::test_same_twice*"])
    both = [b for b in load(project, "cases.json")["benchmarks"] if b["nodeid"].endswith("test_both")]
    ids = [c["case_id"] for b in both for c in b["cases"]]
    assert len(ids) == len(set(ids)) == 8


def test_query_prints_planned_shapes_and_runs_nothing(project):
    result = run(project, "--query", "-k", "test_softmax", "--dtypes", "float32", *OVERRIDE)
    assert result.ret == 0  # the override is never called, and that is fine here
    result.stdout.fnmatch_lines(["*gems benchmark query*", lit("softmax [comprehensive] float32 shape={'x': [4, 16]}*")])


@pytest.mark.parametrize("args", [["--list-cases"], ["--query"], ["--dtypes", "int32"],
                                  ["--preflight-only", "--dtypes", "int32"]])
def test_uncalled_override_does_not_fail_modes_that_run_no_candidate(project, args):
    result = run(project, *args, "--override", "log_softmax:good.py:my_softmax", "--output", "r.json")
    expected = 1 if "--preflight-only" in args else 0  # preflight: no record is a failure of its own
    assert result.ret == expected
    assert "UNCALLED" not in result.stdout.str()


@pytest.mark.parametrize("mode", [[], ["--preflight-only"]])
def test_uncalled_override_fails_modes_that_run_candidates(project, mode):
    result = run(project, *mode, "--level", "core", "--dtypes", "float32", "--warmup", "0", "--iter", "1",
                 "-k", "test_softmax", "--override", "log_softmax:good.py:my_softmax", "-rs")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "*UNCALLED: gemswatch.gems.log_softmax: candidate my_softmax*never called*",
        "*softmax: no candidate for it in this session (candidates given for: log_softmax)*",
    ])


def test_misspelled_operator_fails_the_session(project):
    result = run(project, "--preflight-only", "--level", "core", "--override", "sofmax:good.py:my_softmax",
                 "--output", "pre.json")
    assert result.ret == 1
    assert "did you mean 'softmax'" in result.stdout.str()
    report = load(project, "pre.json")
    assert report["status"] == "failed" and any("UNCALLED" in p for p in report["problems"])


# -- preflight ----------------------------------------------------------------------


def test_preflight_with_candidate_writes_default_report(project):
    result = run(project, "--preflight-only", "--level", "core", *OVERRIDE)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*preflight report written to*preflight_result.json (default path; choose one with --output)"])
    report = load(project, "preflight_result.json")
    assert list(report)[0] == "schema_version" and report["schema_version"] == "flaggems.preflight/v1"
    assert report["status"] == "passed" and report["exit_status"] == 0
    ids = case_ids(project, "--level", "core", "-k", "test_softmax")
    assert [r["case_id"] for r in report["records"]] == ids  # log_softmax has no candidate: skipped
    for r in report["records"]:
        assert r == {"operator": "softmax", "nodeid": "test_probe_perf.py::test_softmax", "case_id": r["case_id"],
                     "dtype": r["dtype"], "shape": r["shape"], "params": r["params"],
                     "override": True, "count": 1, "status": "passed"}
        assert r["dtype"] in ("float16", "float32", "bfloat16") and isinstance(r["shape"], dict)  # shown, not a hash


def test_preflight_raising_candidate_records_every_case(project):
    result = run(project, "--preflight-only", "--level", "core", "--override", "softmax:bad.py:my_softmax",
                 "--output", "pre.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*softmax: 4 of 4 preflight cases failed; first: softmax-float32-*boom from candidate*"])
    records = load(project, "pre.json")["records"]
    assert len(records) == 4
    for r in records:
        assert (r["status"], r["override"], r["count"]) == ("failed", True, 1)
        # The candidate's own line, where it raised:
        assert r["error"] == f'RuntimeError: boom from candidate (at {project.path / "bad.py"}:3 in my_softmax: raise RuntimeError("boom from candidate"))'



def test_preflight_judges_every_benchmark_case_by_the_accuracy_rule(project):
    result = run(project, "--preflight-only", "--level", "core", "--dtypes", "float32",
                 "--override", "softmax:off_on_one_shape.py:my_softmax", "--output", "pre.json", "-k", "test_softmax")
    assert result.ret == 1
    records = {r["shape"]["x"][0]: r for r in load(project, "pre.json")["records"]}
    assert records[2]["status"] == "passed"
    assert records[3]["status"] == "failed" and "elements" in records[3]["error"], records[3]["error"]


def test_timed_repetitions_are_judged_by_the_accuracy_rule(project):
    result = run(project, *FAST, "--override", "softmax:halves_when_timed.py:my_softmax", "-k", "test_softmax")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*integrity check 'timed-output' failed*outside the accuracy rule*"])


def test_preflight_count_is_measured(project):
    result = run(project, "--preflight-only", "--level", "core", "--dtypes", "float32",
                 "--override", "softmax:twice.py:my_softmax", "--output", "pre.json",
                 "--candidate-isolation", "off")  # in its own worker, the operator it calls is the library's
    assert result.ret == 1
    for r in load(project, "pre.json")["records"]:
        assert (r["status"], r["count"]) == ("failed", 2)
        assert "ran the candidate 2 times; expected exactly 1" in r["error"]


def test_preflight_without_override_checks_gems(project):
    result = run(project, "--preflight-only", "--level", "core", "--dtypes", "float32", "--output", "pre.json")
    assert result.ret == 0
    records = load(project, "pre.json")["records"]
    assert {(r["operator"], r["override"], r["count"], r["status"]) for r in records} == {
        ("softmax", False, 1, "passed"), ("log_softmax", False, 1, "passed")}
    assert len(records) == 4


def test_preflight_replays_selected_cases(project):
    ids = case_ids(project, "--level", "core", "-k", "test_softmax")
    result = run(project, "--preflight-only", "--level", "core", *OVERRIDE, "--case-id", ids[2], "--output", "pre.json")
    assert result.ret == 0
    assert [r["case_id"] for r in load(project, "pre.json")["records"]] == [ids[2]]


@pytest.mark.parametrize("extra", [[], ["-k", "nothing_matches"]])
def test_unknown_case_id_fails(project, extra):
    result = run(project, "--preflight-only", "--level", "core", *OVERRIDE, "--case-id", "softmax-float32-0",
                 "--output", "pre.json", *extra)
    assert result.ret == 1  # also when nothing was collected (5 becomes 1)
    result.stdout.fnmatch_lines([lit("*case selection failed: unknown=['softmax-float32-0']; not_executed=[]; ids depend on*")])
    assert load(project, "pre.json")["records"] == []


def test_selected_case_that_failed_is_not_executed(project):
    ids = case_ids(project, "--level", "core", "-k", "test_softmax")
    result = run(project, "--preflight-only", "--level", "core", "--override", "softmax:bad.py:my_softmax",
                 "--case-id", ids[0], "--output", "pre.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines([lit(f"*case selection failed: unknown=[]; not_executed=['{ids[0]}']")])


def test_preflight_fails_when_every_benchmark_is_skipped(project):
    result = run(project, "--preflight-only", "--dtypes", "int32", "--output", "pre.json")
    assert result.ret == 1
    result.assert_outcomes(skipped=2)
    report = load(project, "pre.json")
    assert report["records"] == [] and report["status"] == "failed"
    assert report["problems"] == ["preflight checked no case (empty plan, all skipped or deselected)"]


def test_empty_plan_fails(project):
    project.makepyfile(test_probe_perf=BENCHMARKS.replace('"comprehensive": [CasePlan({"x": [4, 16]})]',
                                                          '"comprehensive": []'))
    result = run(project, "--preflight-only", *OVERRIDE)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*softmax: the benchmark plans no case at level comprehensive*"])


# -- profile-only ---------------------------------------------------------------------


class CapturePlugin:
    """Records entering and leaving its scope (and what it was given)."""

    def __init__(self, probe):
        self.probe = probe
        self.seen = []

    @pytest.hookimpl
    @contextmanager
    def pytest_flaggems_profile_scope(self, backend, case_id):
        self.seen.append((backend, case_id))
        self.probe.events.append("enter")
        try:
            yield
        except BaseException as e:
            self.probe.events.append(f"exit:{type(e).__name__}")
            raise
        else:
            self.probe.events.append("exit")


def test_profile_only_runs_warmup_then_captured_calls_in_scope(project, probe):
    case = case_ids(project, "--level", "core", "-k", "test_softmax")[1]
    capture = CapturePlugin(probe)
    result = run(project, "--profile-only", "--level", "core", "--case-id", case, "--profile-warmup", "2",
                 "--profile-iterations", "3", "--override", "softmax:logged.py:my_softmax", plugins=[capture])
    assert result.ret == 0
    result.assert_outcomes(passed=1, skipped=1)
    assert capture.seen == [(BACKEND, case)]
    assert probe.events == ["call", "call", "enter", "call", "call", "call", "exit"]
    result.stdout.fnmatch_lines([f"*Profiled {case} (softmax): 2 warmup and 3 captured calls inside the provider scope."])


def test_profile_candidate_exception_exits_the_scope(project, probe):
    case = case_ids(project, "--level", "core", "-k", "test_softmax")[0]
    probe.fail = True
    result = run(project, "--profile-only", "--level", "core", "--case-id", case, "--profile-warmup", "0",
                 "--override", "softmax:logged.py:my_softmax", plugins=[CapturePlugin(probe)])
    assert result.ret == 1
    assert probe.events == ["enter", "call", "exit:RuntimeError"]
    result.stdout.fnmatch_lines(["*candidate failed inside the scope*", lit(f"*not_executed=['{case}']")])


def test_profile_without_provider_replays(project, probe):
    case = case_ids(project, "--level", "core", "-k", "test_softmax")[0]
    result = run(project, "--profile-only", "--level", "core", "--case-id", case,
                 "--override", "softmax:logged.py:my_softmax")
    assert result.ret == 0
    assert probe.events == ["call"] * 11  # 10 warmup calls (default) and 1 iteration


def test_profile_provider_must_return_a_context_manager(project):
    class Wrong:
        @pytest.hookimpl
        def pytest_flaggems_profile_scope(self, backend, case_id):
            return "not a scope"

    case = case_ids(project, "--level", "core", "-k", "test_softmax")[0]
    result = run(project, "--profile-only", "--level", "core", "--case-id", case, *OVERRIDE, plugins=[Wrong()])
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*returned str, not a context manager*"])


# -- reference-only -------------------------------------------------------------------

REFERENCE_FAILURES = BENCHMARKS + """

def capability_baseline(x, dim):
    if x.shape[0] == 2:
        raise NotImplementedError("no kernel for this layout")
    if x.dtype == torch.float16:
        raise RuntimeError('"softmax_lastdim" not implemented for \\'Half\\'')
    return torch.softmax(x, dim)


def broken_baseline(x, dim):
    raise ValueError("unexpected")


def test_capability(bench):
    bench.run(Benchmark(op="softmax", baseline=capability_baseline, cases=CASES, build=build, dtypes=DTYPES))


def test_broken(bench):
    bench.run(Benchmark(op="softmax", baseline=broken_baseline, cases=CASES, build=build, dtypes=DTYPES))
"""


def test_reference_only_defaults_to_core_and_writes_report(project):
    result = run(project, "--reference-only", "-k", "test_softmax")
    assert result.ret == 0
    report = load(project, "reference_result.json")
    assert list(report) == ["schema_version", "phase", "status", "records"]
    assert (report["schema_version"], report["phase"], report["status"]) == ("flaggems.reference/v2", "timing", "PASSED")
    assert len(report["records"]) == 4  # core: 2 shapes x 2 dtypes
    r = report["records"][0]
    assert set(r) == {"case_id", "ordinal", "dtype", "shape", "params", "nodeid", "operator", "status", "reason",
                      "latency_ms"}
    assert r["status"] == "PASSED" and r["latency_ms"] >= 0 and r["operator"] == "softmax"


def test_reference_only_classifies_and_stops_on_unknown(project):
    project.makepyfile(test_probe_perf=REFERENCE_FAILURES)
    result = run(project, "--reference-only", "-k", "capability or broken", "--output", "ref.json")
    assert result.ret == 1
    report = load(project, "ref.json")
    assert report["status"] == "FAILED"
    by_node = {}
    for r in report["records"]:
        by_node.setdefault(r["nodeid"].split("::")[1], []).append(r)
    capability = [(r["status"], r.get("failure", {}).get("category")) for r in by_node["test_capability"]
                  if "case_id" in r]
    assert capability == [("FAILED", "NOT_IMPLEMENTED"), ("PASSED", None),
                          ("FAILED", "NOT_IMPLEMENTED"), ("FAILED", "DTYPE_UNSUPPORTED")]
    broken = by_node["test_broken"]
    assert [(r["status"], r.get("failure", {}).get("category")) for r in broken if "case_id" in r] == [
        ("FAILED", "UNKNOWN"), ("NOT_RUN", None), ("NOT_RUN", None), ("NOT_RUN", None)]
    assert broken[0]["failure"]["stage"] == "benchmark_reference"
    phases = [(r["status"], r["pytest_phase"]) for r in report["records"] if "pytest_phase" in r]
    assert phases == [("FAILED", "call"), ("FAILED", "call")]
    result.stdout.fnmatch_lines(["*3 reference cases failed*", "*reference-only status FAILED*"])


def test_reference_only_all_skipped_and_no_cases(project):
    result = run(project, "--reference-only", "--dtypes", "int32")
    assert result.ret == 0  # ALL_SKIP is not a failure of the reference run
    assert load(project, "reference_result.json")["status"] == "ALL_SKIP"  # SKIP records from pytest
    result = run(project, "--reference-only", "-k", "nothing_matches")
    assert result.ret == 5
    assert load(project, "reference_result.json")["status"] == "NO_CASES"


# -- timing ----------------------------------------------------------------------------

INPLACE = BENCHMARKS + """

def baseline_inplace(x):
    return x.add_(1.0)


def build_zeros(case, device):
    return (torch.zeros(case.shape["x"], dtype=case.dtype, device=device),), {}


def test_inplace(bench):
    bench.run(Benchmark(op="probe_inplace_", baseline=baseline_inplace, cases=CASES, build=build_zeros,
                        dtypes=(torch.float32,)))
"""

INPLACE_CANDIDATE = f"""
import sys

def run(x):
    sys.modules["{PROBE}"].events.append(float(x.abs().sum()))
    return x.add_(1.0)
"""

FAST = ["--level", "core", "--dtypes", "float32", "--warmup", "0", "--iter", "1"]


def test_the_warmup_defaults_to_the_devices(project):
    # Under the interpreter a fifth of a second per timed function; a second on a GPU.
    result = run(project, "--level", "core", "--dtypes", "float32", "--iter", "1", *OVERRIDE,
                 "--record", "json", "--output", "w.json", "-k", "test_softmax")
    assert result.ret == 0
    assert load(project, "w.json")["warmup_ms"] == (200 if INTERPRETED else 1000)


def test_timing_report_fields(project):
    project.path.joinpath("bench.json").write_text(json.dumps({"stale-op": {"details": []}}))
    result = run(project, *FAST, *OVERRIDE, "--record", "json", "--output", "bench.json", "-k", "test_softmax")
    assert result.ret == 0
    report = load(project, "bench.json")
    assert "stale-op" not in report  # replaced, not merged
    assert list(report)[:5] == ["schema_version", "device", "interpreted", "level", "timer"]
    assert (report["schema_version"], report["device"], report["interpreted"], report["level"], report["timer"]) == (
        "gemswatch.benchmark/v1", DEVICE, INTERPRETED, "core", TIMER)
    (entry,) = report["benchmarks"]
    assert (entry["operator"], entry["nodeid"], entry["candidate_source"]) == (
        "softmax", "test_probe_perf.py::test_softmax", "override")
    assert len(entry["cases"]) == 2
    for case in entry["cases"]:
        assert list(case) == ["case_id", "dtype", "shape", "params", "latency_base", "latency", "speedup", "gbps",
                              "pct_of_copy", "tflops", "candidate_source", "error", *CASE_FIELDS]
        assert case["latency_base"] > 0 and case["latency"] > 0 and case["gbps"] > 0 and case["tflops"] is None
        # Stored unrounded: exactly the ratios of the stored latencies.
        assert case["speedup"] == case["latency_base"] / case["latency"]
        assert case["latency_gems"] > 0 and case["speedup_gems"] == case["latency_gems"] / case["latency"]
        assert case["candidate_source"] == "override" and case["error"] is None
        assert case["bytes"] == 2 * 4 * math.prod(case["shape"]["x"]) and case["flops"] is None
        assert case["determinism"] == "PASS" and case["determinism_detail"] is None
        if INTERPRETED:  # the honest headline there: the interpreted gems kernel
            assert (case["headline_vs"], case["headline_speedup"]) == ("gems", case["speedup_gems"])
            assert case["latency_compile"] is None and case["pct_of_roofline"] is None
            assert case["peak_mem_bytes"] is None and case["peak_mem_base_bytes"] is None
    # What the watcher makes of this report: the same figures, unrounded, in its event.
    from gemswatch.watch.stage.result import Outcome, StageResult
    from gemswatch.watch.stage.verdict import decide

    verdict = decide("benchmark", Outcome(0), report, ["softmax"])
    event = StageResult("benchmark", verdict.status, speedup=verdict.speedup, per_case=tuple(verdict.per_case), message=verdict.message,
                        headline_speedup=verdict.headline_speedup, headline_vs=verdict.headline_vs).event_fields()
    by_case = {c["case_id"]: c for c in entry["cases"]}
    assert len(event["per_case"]) == 2
    for row in event["per_case"]:
        case = by_case[row["case"]]
        assert (row["speedup"], row["headline_speedup"], row["gems_ms"], row["determinism"]) == (
            case["speedup"], case["headline_speedup"], case["latency_gems"], case["determinism"])
    assert event["headline_speedup"] == pytest.approx(entry["geomean_headline"], rel=1e-12)
    assert event["headline_vs"] == entry["headline_vs"]
    if INTERPRETED:
        assert event["message"] == report["caveat"]
        assert report["headline_vs"] == "gems" and "interpreted gems kernel" in report["caveat"]
        assert report["torch_compile"]["status"] == "off" and "--torch-compile on" in report["torch_compile"]["reason"]
        result.stdout.fnmatch_lines(["*softmax: *x against the interpreted gems kernel (the only ratio that means "
                                     "anything under the CPU interpreter)*"])
    summary = report["operators"]["softmax"]
    assert summary["cases"] == 2 and summary["candidate_source"] == "override"
    assert summary["geomean_speedup"] == pytest.approx(entry["geomean_speedup"])
    where = f"{TIMER}, {DEVICE}" + (", Triton interpreter" if INTERPRETED else "")
    result.stdout.fnmatch_lines([lit(f"*softmax: * against *; geomean speedup * against torch eager over 2 cases ({where})")])


# Three calls on the same inputs: bitwise equal, off by about an ulp, or off by far more.
DETERMINISM_CANDIDATES = {
    "steady.py": """
import torch

def run(x, dim=-1, dtype=None):
    return torch.log_softmax(x, dim)
""",
    "jitter.py": """
import torch

def run(x, dim=-1, dtype=None):
    y = torch.softmax(x, dim)
    return y * (1 + (torch.rand_like(y) - 0.5) * 2.0**-22)  # an ulp or so, as atomics reorder sums
""",
    "wild.py": """
import torch

def run(x, dim=-1, dtype=None):
    y = torch.log_softmax(x, dim)
    return y * (1 + (torch.rand_like(y) - 0.5) * 1e-2)
""",
}


def _determinism(project, *overrides):
    for name, text in DETERMINISM_CANDIDATES.items():
        project.path.joinpath(name).write_text(text)
    args = [a for o in overrides for a in ("--override", o)]
    result = run(project, *FAST, *args, "--record", "json", "--output", "bench.json")
    return result, {b["operator"]: [(c["determinism"], c["determinism_detail"]) for c in b["cases"]]
                    for b in load(project, "bench.json")["benchmarks"]}


def test_repeated_calls_give_a_determinism_verdict_per_case(project):
    result, verdicts = _determinism(project, "softmax:jitter.py:run", "log_softmax:steady.py:run")
    assert result.ret == 0
    assert verdicts["log_softmax"] == [("PASS", None)] * 2
    assert [v for v, _ in verdicts["softmax"]] == ["NON_DETERMINISTIC"] * 2
    assert all("within the accuracy rule" in d for _, d in verdicts["softmax"])


def test_repeated_calls_beyond_the_accuracy_rule_fail(project):
    # (log_softmax's benchmark here declares no accuracy rule, so the noise,
    # well inside the timed-output distance, reaches the determinism check.)
    _, verdicts = _determinism(project, "log_softmax:wild.py:run")
    assert [v for v, _ in verdicts["log_softmax"]] == ["FAIL"] * 2
    assert all(d.startswith("call 2, output 0: ") for _, d in verdicts["log_softmax"])


def test_timing_without_override_has_no_candidate_source(project):
    result = run(project, *FAST, "--record", "json", "--output", "bench.json", "-k", "test_log_softmax")
    assert result.ret == 0
    (entry,) = load(project, "bench.json")["benchmarks"]
    assert entry["candidate_source"] is None and {c["candidate_source"] for c in entry["cases"]} == {None}


def test_timing_gives_candidate_fresh_inputs(project, probe):
    project.makepyfile(test_probe_perf=INPLACE)
    project.path.joinpath("inplace.py").write_text(INPLACE_CANDIDATE)
    # In process: the probe that records what the candidate saw is this process's.
    result = run(project, *FAST, "--override", "probe_inplace_:inplace.py:run", "-k", "test_inplace",
                 "--record", "json", "--output", "bench.json", "--candidate-isolation", "off")
    assert result.ret == 0
    # The baseline added 1 in place many times before, and so did the
    # candidate's own earlier calls: the first call and each timed repetition
    # still see the case's values (zeros, which the pool's refills keep).
    # The only other values are the replay check's refilled calls, one a case.
    assert probe.events[0] == 0.0 and len(probe.events) > 4
    assert len([e for e in probe.events if e != 0.0]) == 2
    assert load(project, "bench.json")["operators"]["probe_inplace_"]["candidate_source"] == "override"


MEMO_CANDIDATE = f"""
import sys
import weakref

import torch

_memo = {{}}


def run(x, dim=-1):
    # "The same input again" (the same live tensor, unchanged): skip the work.
    # The tensor is kept by weak reference: memory of a dead one that the
    # allocator hands to a later case is another input, not the same again.
    key = (x.data_ptr(), x._version)
    events = sys.modules["{PROBE}"].events
    held = _memo.get(key)
    if held is not None and held[0]() is x:
        events.append("hit")
        return held[1]
    events.append("miss")
    _memo[key] = (weakref.ref(x), torch.softmax(x, dim))
    return _memo[key][1]
"""


def test_timed_repetitions_never_see_one_input_twice(project, probe):
    project.path.joinpath("memo.py").write_text(MEMO_CANDIDATE)
    result = run(project, *FAST, "--override", "softmax:memo.py:run", "-k", "test_softmax",
                 "--record", "json", "--output", "bench.json", "--candidate-isolation", "off")
    assert result.ret == 0
    assert probe.events.count("miss") > 4 and "hit" not in probe.events


def test_timing_raising_candidate_records_every_case(project):
    result = run(project, *FAST, "--override", "softmax:bad.py:my_softmax", "--record", "json", "--output", "bench.json")
    assert result.ret == 1
    report = load(project, "bench.json")
    assert report["status"] == "failed"
    (entry,) = report["benchmarks"]
    assert [c["error"].split(" (at ")[0] for c in entry["cases"]] == ["RuntimeError: boom from candidate"] * 2
    assert all(f'(at {project.path / "bad.py"}:3 in my_softmax' in c["error"] for c in entry["cases"])
    assert all(c["latency"] is None and c["latency_base"] > 0 for c in entry["cases"])
    assert entry["geomean_speedup"] is None and entry["candidate_source"] is None


def test_a_candidate_failing_while_timed_keeps_the_baseline_time(project):
    result = run(project, *FAST, "--override", "softmax:tires.py:my_softmax", "-k", "test_softmax",
                 "--record", "json", "--output", "bench.json")
    assert result.ret == 1
    (entry,) = load(project, "bench.json")["benchmarks"]
    assert [c["error"].split(" (at ")[0] for c in entry["cases"]] == ["RuntimeError: tired"] * 2
    assert all(c["latency"] is None and c["latency_base"] > 0 for c in entry["cases"])


def test_record_log_writes_a_text_table(project):
    result = run(project, *FAST, "--record", "log", "-k", "test_softmax", *OVERRIDE)
    assert result.ret == 0
    text = project.path.joinpath("benchmark_result.log").read_text()
    assert text.startswith(f"# gemswatch.benchmark/v1 device={DEVICE} interpreted={INTERPRETED} level=core")
    assert text.count("\nsoftmax ") == 2


def test_plugin_object_works_with_nested_conftests(project):
    # pytest narrows hook calls to the conftests of a path through pluggy's
    # subset_hook_caller, which keeps plugins in sets: they must be hashable.
    sub = project.mkpydir("sub")
    sub.joinpath("conftest.py").write_text("def pytest_runtest_setup(item):\n    pass\n")
    sub.joinpath("test_more_perf.py").write_text(BENCHMARKS)
    result = run(project, "--list-cases", "--output", "cases.json", "sub/test_more_perf.py", "test_probe_perf.py")
    assert result.ret == 0
    assert len(load(project, "cases.json")["benchmarks"]) == 4
