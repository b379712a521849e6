"""The integrity checks inside real pytest sessions (pytester, in process):
per-case invocation and the call guard in the correctness plugin, the
candidate's worker process (the correctness plugin's default), the
load-time patch check, and the replay and patch checks of the benchmark
preflight and timing modes. The operator module is plain torch, so a
session takes milliseconds."""

from __future__ import annotations

import json

import pytest
import torch

import gemswatch.gems  # noqa: F401  (triton's extension must not be imported twice)
import gemswatch.testing.benchmark.plugin  # noqa: F401
import gemswatch.testing.correctness  # noqa: F401

pytest_plugins = ["pytester"]

CONFTEST = """
pytest_plugins = ["gemswatch.testing.correctness", "gemswatch.testing.upstream_spellings"]


def pytest_configure(config):
    config.addinivalue_line("markers", "softmax: tests of softmax")
    config.addinivalue_line("markers", "log_softmax: tests of log_softmax")
"""

TORCHOPS = """
import torch


def softmax(x, dim=-1):
    return torch.softmax(x, dim)


def log_softmax(x, dim=-1):
    return torch.log_softmax(x, dim)
"""

TESTS = """
import pytest
import torch

import torchops

OPS = [pytest.param("softmax", marks=pytest.mark.softmax), pytest.param("log_softmax", marks=pytest.mark.log_softmax)]


@pytest.mark.parametrize("op", OPS)
def test_op(op):
    x = torch.randn(3, 5)
    out = getattr(torchops, op)(x, -1)
    assert torch.allclose(out, getattr(torch, op)(x, -1))
"""

GOOD = """
import torch


def my_softmax(x, dim=-1):
    return torch.softmax(x, dim)
"""


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(conftest=CONFTEST, torchops=TORCHOPS, test_ops=TESTS)
    return pytester


def run(pytester, candidate: str, *extra):
    (pytester.path / "cand.py").write_text(candidate)
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--override-module", "torchops", "--override", "softmax:cand.py:my_softmax",
        "--record", "json", "--output", "r.json", *extra,
    )
    path = pytester.path / "r.json"
    return result, (json.loads(path.read_text()) if path.exists() else None)


# The checks of a candidate that runs in the judging process (preflight and
# benchmark sessions, or a correctness session with isolation off).
IN_PROCESS = ("--candidate-isolation", "off")


def results(report):
    return {r["nodeid"].split("::", 1)[1]: (r["result"], r["reason"]) for r in report["records"]}


def test_honest_candidate_passes_and_other_operators_are_not_flagged(suite):
    result, report = run(suite, GOOD)
    assert result.ret == 0 and report["status"] == "passed" and report["integrity"] == []
    rows = {r["nodeid"].split("::", 1)[1]: r for r in report["records"]}
    assert rows["test_op[softmax]"]["candidate_calls"] == {"torchops.softmax": 1}
    # the log_softmax case of the same file never calls the softmax candidate: fine
    assert rows["test_op[log_softmax]"]["result"] == "passed"


def test_a_case_of_the_operator_that_skips_the_candidate_fails(suite):
    suite.makepyfile(test_more="""
        import pytest

        @pytest.mark.softmax
        def test_forgets_to_call():
            assert True

        def test_unmarked():
            assert True
    """)
    result, report = run(suite, GOOD)
    assert result.ret == 1
    res = results(report)
    assert res["test_unmarked"][0] == "passed" and res["test_op[softmax]"][0] == "passed"
    outcome, reason = res["test_forgets_to_call"]
    assert outcome == "failed"
    assert "integrity check 'invocation' failed: this case tests softmax (marker 'softmax') but never called" in reason


THREE_MORE_CASES = """
import pytest, torch, torchops

@pytest.mark.softmax
@pytest.mark.parametrize("n", [3, 4, 5])
def test_again(n):
    torchops.softmax(torch.randn(n), -1)
"""

# A candidate that, once called, puts a function of its own in its place.
UNHOOKS = GOOD + """
import torchops

def my_softmax(x, dim=-1):
    torchops.softmax = lambda x, dim=-1: {replacement}
    return torch.softmax(x, dim)
"""


def test_unhooking_candidate_fails_the_later_cases(suite):
    suite.makepyfile(test_more=THREE_MORE_CASES)
    result, report = run(suite, UNHOOKS.format(replacement="torch.softmax(x, dim)"), *IN_PROCESS)
    res = results(report)
    failed = [k for k, (outcome, reason) in res.items() if outcome == "failed" and "'invocation'" in reason]
    assert len(failed) == 3  # every softmax case after the first


def test_a_swallowed_violation_still_fails_the_case(suite):
    suite.makepyfile(test_more="""
        import pytest, torch, torchops

        @pytest.mark.softmax
        def test_swallows():
            try:
                torchops.softmax(torch.randn(4), -1)
            except Exception:
                pass
    """)
    result, report = run(suite, """
import torch

def my_softmax(x, dim=-1):
    out = torch.softmax(x, dim)
    x.zero_()
    return out
""")
    outcome, reason = results(report)["test_swallows"]
    assert outcome == "failed" and "integrity check 'input-mutation' failed" in reason
    assert report["integrity"] and all("'input-mutation'" in v for v in report["integrity"])


def test_a_candidate_that_patches_torch_when_loaded_is_a_usage_error(suite):
    result, report = run(suite, GOOD + "\ntorch.allclose = lambda *a, **k: True\n", *IN_PROCESS)
    assert result.ret == 4 and report is None
    result.stderr.fnmatch_lines(["*integrity check 'patched' failed: loading the candidate *cand.py replaced torch.allclose*"])
    import torch

    assert torch.allclose(torch.zeros(1), torch.ones(1)) is False  # put back


def test_a_candidate_that_patches_the_accuracy_helper_fails(suite):
    result, report = run(suite, """
import torch
from gemswatch.testing import accuracy

def my_softmax(x, dim=-1):
    accuracy.assert_close = lambda *a, **k: None
    return torch.softmax(x, dim)
""", *IN_PROCESS)
    outcome, reason = results(report)["test_op[softmax]"]
    assert outcome == "failed"
    assert "a call of torchops.softmax replaced gemswatch.testing.accuracy.assert_close" in reason


# -- the candidate's worker process (correctness, by default) -----------------------


def test_a_candidate_runs_in_a_worker_of_its_own(suite):
    result, report = run(suite, GOOD + """
import os

def my_softmax(x, dim=-1):
    assert "_pytest" not in __import__("sys").modules or os.getpid() != int(os.environ["JUDGE_PID"])
    return torch.softmax(x, dim) + (0 if os.getpid() != int(os.environ["JUDGE_PID"]) else 1)
""")
    assert result.ret == 0 and report["status"] == "passed", result.outlines[-20:]


@pytest.fixture(autouse=True)
def _judge_pid(monkeypatch):
    import os

    monkeypatch.setenv("JUDGE_PID", str(os.getpid()))


def test_what_a_candidate_patches_in_its_own_process_cannot_change_the_verdict(suite):
    result, report = run(suite, """
import torch
from gemswatch.testing import accuracy

torch.allclose = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)
accuracy.assert_close = lambda *a, **k: None


def my_softmax(x, dim=-1):
    return torch.zeros_like(x)
""")
    assert result.ret == 1 and report["status"] == "failed"
    assert results(report)["test_op[softmax]"][0] == "failed"
    import torch

    assert torch.allclose(torch.zeros(1), torch.ones(1)) is False  # the judge's torch was never touched


def test_a_candidate_cannot_unhook_itself_from_the_judge(suite):
    suite.makepyfile(test_more=THREE_MORE_CASES)
    result, report = run(suite, UNHOOKS.format(replacement="torch.zeros_like(x)"))
    assert result.ret == 0, result.outlines[-20:]
    calls = [r["candidate_calls"]["torchops.softmax"] for r in report["records"] if "softmax" in r["opname"]]
    assert calls == [1, 1, 1, 1]  # every case called the candidate, counted by the judge


@pytest.mark.parametrize(
    "body, check",
    [
        ("import pytest\n    pytest.skip('too hard')", "raised pytest's Skipped (too hard): a skip, xfail or exit decided by the candidate fails the case"),
        ("return torch.softmax(x, dim).as_subclass(type('Sub', (torch.Tensor,), {}))", "integrity check 'output-type' failed"),
        ("from torch.overrides import TorchFunctionMode\n    class Spy(TorchFunctionMode):\n        def __torch_function__(self, f, t, a=(), k=None):\n            return f(*a, **(k or {}))\n    Spy().__enter__()\n    return torch.softmax(x, dim)", "integrity check 'torch-mode' failed"),
        ("raise IndexError('dim 5 is out of range')", "IndexError: dim 5 is out of range"),
    ],
    ids=["skip", "subclass", "mode", "builtin-error"],
)
def test_what_the_judge_does_with_what_a_worker_answers(suite, body, check):
    result, report = run(suite, f"""
import torch


def my_softmax(x, dim=-1):
    {body}
""")
    outcome, reason = results(report)["test_op[softmax]"]
    assert outcome == "failed" and check in reason, reason


def test_a_write_around_a_sliced_input_is_seen(suite):
    suite.makepyfile(test_more="""
        import pytest, torch, torchops

        @pytest.mark.softmax
        def test_sliced():
            x = torch.randn(6, 9)[1:, 2:5]
            torchops.softmax(x, -1)
    """)
    result, report = run(suite, """
import torch


def my_softmax(x, dim=-1):
    base = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage())
    if x.storage_offset():
        base[0] = 7.0
    return torch.softmax(x, dim)
""")
    outcome, reason = results(report)["test_sliced"]
    assert outcome == "failed" and "integrity check 'input-mutation' failed: softmax wrote the memory around its input args[0]" in reason


def test_a_worker_that_dies_makes_the_session_crashed(suite):
    result, report = run(suite, """
import os, signal, torch


def my_softmax(x, dim=-1):
    os.kill(os.getpid(), signal.SIGSEGV)
""")
    assert result.ret == 1
    assert report["status"] == "crashed" and report["message"] == "the candidate's worker process died (killed by SIGSEGV)"
    assert "died (killed by SIGSEGV)" in results(report)["test_op[softmax]"][1]


# -- the benchmark plugin ---------------------------------------------------------

BENCH_CONFTEST = 'pytest_plugins = ["gemswatch.testing.benchmark.plugin", "gemswatch.testing.upstream_spellings"]\n'

BENCHMARK = """
import torch
from gemswatch.testing.benchmark import Benchmark, CasePlan

CASES = {"core": [CasePlan({"x": [2, 8]}), CasePlan({"x": [3, 5]})], "comprehensive": []}


def build(case, device):
    return (torch.randn(case.shape["x"], dtype=case.dtype, device=device),), {"dim": -1}


SOFTMAX = Benchmark(op="softmax", baseline=torch.softmax, cases=CASES, build=build, dtypes=(torch.float32,))


def test_softmax(bench):
    bench.run(SOFTMAX)
"""

CACHED = """
import torch

_cache = {}


def my_softmax(x, dim=-1, dtype=None):
    key = (tuple(x.shape), x.dtype)
    if key not in _cache:
        _cache[key] = torch.softmax(x, dim)
    return _cache[key].clone()
"""


@pytest.fixture
def bench_suite(pytester):
    pytester.makepyfile(conftest=BENCH_CONFTEST, test_perf=BENCHMARK)
    return pytester


def run_bench(pytester, candidate: str, *mode, subprocess: bool = False):
    (pytester.path / "cand.py").write_text(candidate)
    run = pytester.runpytest_subprocess if subprocess else pytester.runpytest_inprocess
    result = run(
        "-p", "no:cacheprovider", "--override", "softmax:cand.py:my_softmax", "--level", "core",
        "--record", "json", "--output", "b.json", *mode,
    )
    return result, json.loads((pytester.path / "b.json").read_text())


def test_preflight_catches_a_replayed_result(bench_suite):
    result, report = run_bench(bench_suite, GOOD.replace("dim=-1)", "dim=-1, dtype=None)"), "--preflight-only")
    assert result.ret == 0 and all(r["status"] == "passed" for r in report["records"])
    result, report = run_bench(bench_suite, CACHED, "--preflight-only")
    assert result.ret == 1
    assert all("integrity check 'cached-output' failed" in r["error"] for r in report["records"])
    assert [r["count"] for r in report["records"]] == [1, 1]  # the check's own calls are not the count


def test_timing_catches_a_replayed_result(bench_suite):
    result, report = run_bench(bench_suite, CACHED, "--warmup", "1", "--iter", "2")
    (bench,) = report["benchmarks"]
    # Its timed calls see fresh values and return the first call's result.
    assert all("integrity check 'timed-output' failed" in c["error"] for c in bench["cases"])
    assert bench["candidate_source"] is None and result.ret == 1


def test_timing_checks_the_results_of_the_timed_calls(bench_suite):
    # Right on its first (checked) call, on the replay check's calls and on
    # the timer's warm-up, which it tells apart from the timed repetitions
    # by counting; garbage, fast, afterwards.
    result, report = run_bench(bench_suite, """
import torch

_calls = {}


def my_softmax(x, dim=-1, dtype=None):
    key = tuple(x.shape)
    _calls[key] = _calls.get(key, 0) + 1
    if _calls[key] <= 12:
        return torch.softmax(x, dim)
    return torch.empty_like(x)
""", "--warmup", "1", "--iter", "30")  # enough repetitions that most come after its twelfth call
    (bench,) = report["benchmarks"]
    assert bench["candidate_source"] is None and result.ret == 1
    assert all("integrity check 'timed-output' failed: the timed calls of softmax returned results" in c["error"] for c in bench["cases"])


SLOW_CLOCK = """
import time

import torch

_real = time.perf_counter
_start = _real()
time.perf_counter = lambda: _start + (_real() - _start) / 1000  # its own process's clock, slowed down


def my_softmax(x, dim=-1, dtype=None):
    time.sleep(0.01)
    return torch.softmax(x, dim)
"""

FAST_WINDOWS = """
import time

import torch
from gemswatch.testing.benchmark import timing

timing.WallClockTimer._rep = lambda self, fn, spin, setup=None: (setup and setup(), fn(), 1e-6)[-1]


def my_softmax(x, dim=-1, dtype=None):
    time.sleep(0.01)
    return torch.softmax(x, dim)
"""


# The sleep is host time: on a GPU it hides behind the timer's spin and the
# windows honestly hold only the kernel (the corpus covers the GPU's case).
host_clock_only = pytest.mark.skipif(torch.cuda.is_available(), reason="the wall-clock timer's case")


@host_clock_only
@pytest.mark.parametrize("candidate", [SLOW_CLOCK, FAST_WINDOWS], ids=["slowed-clock", "patched-timer"])
def test_a_timer_tampered_with_in_the_worker_is_caught_by_the_judges_clock(bench_suite, candidate):
    result, report = run_bench(bench_suite, candidate, "--warmup", "1", "--iter", "100")
    (bench,) = report["benchmarks"]
    assert result.ret == 1 and bench["candidate_source"] is None
    for case in bench["cases"]:
        assert "integrity check 'timer' failed: the candidate's" in case["error"], case["error"]
        assert "but the judge's clock saw" in case["error"]


@host_clock_only
def test_an_honest_slow_candidate_is_timed_in_its_worker(bench_suite):
    # The same sleep, nothing tampered with: timed in the worker, within the
    # judge's allowance, about 10 ms a call.
    result, report = run_bench(bench_suite, SLOW_CLOCK.replace("time.perf_counter = ", "_unused = "),
                               "--warmup", "1", "--iter", "100")
    (bench,) = report["benchmarks"]
    assert result.ret == 0, [c["error"] for c in bench["cases"]]
    assert all(9.9 < c["latency"] < 60 for c in bench["cases"]), bench["cases"]
    assert bench["candidate_source"] == "override"


# The worker's own reply, rewritten: the windows keep their total (which the
# judge's clock checks) but hold it in one repetition, so their median shrinks.
SKEWED_WINDOWS = """
import time

import torch
from gemswatch.testing.isolation import timed

_reps = timed.TimedCase.reps


def _skewed(self, n, seed, first):
    reply = _reps(self, n, seed, first)
    total, k = sum(reply["windows"]), len(reply["windows"])
    reply["windows"] = [1e-5] * (k - 1) + [total - 1e-5 * (k - 1)]
    return reply


timed.TimedCase.reps = _skewed


def my_softmax(x, dim=-1, dtype=None):
    time.sleep(0.01)
    return torch.softmax(x, dim)
"""

# It claims a repetition takes a second, so that the judge would time one,
# inside the slack of a request, and reports a microsecond for it.
LONG_ROUND = """
import time

import torch
from gemswatch.testing.isolation import timed

_start, _reps = timed.TimedCase.start, timed.TimedCase.reps


def _claims_long(self):
    return {**_start(self), "round_ms": 1e3}


def _reports_quick(self, n, seed, first):
    reply = _reps(self, n, seed, first)
    reply["windows"] = [1e-3] * len(reply["windows"])
    return reply


timed.TimedCase.start, timed.TimedCase.reps = _claims_long, _reports_quick


def my_softmax(x, dim=-1, dtype=None):
    time.sleep(0.004)
    return torch.softmax(x, dim)
"""


@host_clock_only
def test_windows_skewed_to_shrink_their_median_earn_at_most_half_the_time(bench_suite):
    result, report = run_bench(bench_suite, SKEWED_WINDOWS, "--warmup", "1", "--iter", "100")
    (bench,) = report["benchmarks"]
    assert result.ret == 0, [c["error"] for c in bench["cases"]]
    assert all(c["latency"] > 4.9 for c in bench["cases"]), bench["cases"]  # of 10 ms calls


@host_clock_only
def test_a_worker_that_claims_long_repetitions_is_still_timed_often_enough_to_be_caught(bench_suite):
    result, report = run_bench(bench_suite, LONG_ROUND, "--warmup", "1", "--iter", "100")
    (bench,) = report["benchmarks"]
    assert result.ret == 1 and bench["candidate_source"] is None
    for case in bench["cases"]:
        assert "integrity check 'timer' failed: the candidate's" in case["error"], case["error"]


@pytest.mark.parametrize("change", ["os.sched_setaffinity(judge, {min(os.sched_getaffinity(judge))})",
                                    "os.setpriority(os.PRIO_PROCESS, judge, 19)"], ids=["cpus", "nice"])
def test_a_candidate_that_changes_the_judges_scheduling_fails_before_a_baseline_is_timed(bench_suite, change):
    # The judge in a process of its own: the candidate's change must not reach this one.
    result, report = run_bench(bench_suite, f"""
import os

import torch

judge = os.getppid()  # the worker's parent: the judge
{change}


def my_softmax(x, dim=-1, dtype=None):
    return torch.softmax(x, dim)
""", "--warmup", "1", "--iter", "5", subprocess=True)
    (bench,) = report["benchmarks"]
    assert result.ret == 1
    assert all("integrity check 'judge-scheduling' failed: the judge's CPU scheduling changed" in c["error"]
               for c in bench["cases"]), bench["cases"]


def test_the_speed_of_light_floor_rejects_an_impossible_time():
    from gemswatch.testing.benchmark.timed_checks import check_speed_of_light
    from gemswatch.testing.integrity import IntegrityError

    check_speed_of_light("softmax", 0.010, 8 << 20, copy_gbps=4000)  # 839 GB/s: possible
    check_speed_of_light("softmax", 0.001, 8 << 20, copy_gbps=None)  # no copy bandwidth measured (CPU): no floor
    with pytest.raises(IntegrityError, match=r"integrity check 'speed-of-light' failed: softmax timed 0.001 ms for 8388608 bytes, below"):
        check_speed_of_light("softmax", 0.001, 8 << 20, copy_gbps=4000)  # 8.4 TB/s on a 4 TB/s device


def test_the_compute_floor_rejects_an_impossible_matrix_product_time():
    from gemswatch.testing.benchmark.timed_checks import check_speed_of_light
    from gemswatch.testing.integrity import IntegrityError

    flops = 2 * 4096**3  # 137 GFLOP
    check_speed_of_light("mm", 0.2, 0, None, flops, peak_tflops=700)  # 687 TFLOP/s: within 1.5 x 700
    check_speed_of_light("mm", 0.001, 0, None, flops, peak_tflops=None)  # no peak measured (CPU): no floor
    with pytest.raises(IntegrityError, match=r"integrity check 'speed-of-light' failed: mm timed 0.1 ms for 1.374e\+11 FLOPs"):
        check_speed_of_light("mm", 0.1, 0, None, flops, peak_tflops=700)  # 1374 TFLOP/s


def test_a_timer_patched_in_the_worker_does_not_reach_the_judge(bench_suite):
    result, report = run_bench(bench_suite, """
import torch
from gemswatch.testing.benchmark import timing


def my_softmax(x, dim=-1, dtype=None):
    timing.synchronize = lambda device: None
    return torch.softmax(x, dim)
""", "--preflight-only")
    assert result.ret == 0 and all(r["status"] == "passed" for r in report["records"])


def test_in_process_preflight_catches_a_patched_timer(bench_suite):
    result, report = run_bench(bench_suite, """
import torch
from gemswatch.testing.benchmark import timing


def my_softmax(x, dim=-1, dtype=None):
    timing.synchronize = lambda device: None
    return torch.softmax(x, dim)
""", "--preflight-only", "--candidate-isolation", "off")
    errors = [r["error"] for r in report["records"]]
    assert all("replaced gemswatch.testing.benchmark.timing.synchronize" in e for e in errors), errors


def test_preflight_names_the_invocation_check(bench_suite):
    result, report = run_bench(bench_suite, """
import torch
import gemswatch.gems as gems


_depth = [0]


def my_softmax(x, dim=-1, dtype=None):
    _depth[0] += 1
    try:
        if _depth[0] == 1 and x.shape[0] == 3:
            return gems.softmax(x, dim)  # the override: the candidate once more
        return torch.softmax(x, dim)
    finally:
        _depth[0] -= 1
""", "--preflight-only", "--candidate-isolation", "off")  # in its worker, gems.softmax is not the override
    assert report["records"][0]["status"] == "passed"
    assert "integrity check 'invocation' failed: one invocation of softmax ran the candidate" in report["records"][1]["error"]


def test_gems_impl_cases_are_skipped_only_for_an_overridden_operator(pytester):
    pytester.makepyfile(
        conftest=CONFTEST + '    config.addinivalue_line("markers", "gems_impl: the library kernel\'s own behaviour")\n',
        torchops=TORCHOPS,
        test_impl="""
        import pytest
        import torch

        import torchops

        @pytest.mark.softmax
        def test_contract():
            assert torchops.softmax(torch.zeros(2), -1).shape == (2,)

        @pytest.mark.softmax
        @pytest.mark.gems_impl
        def test_library_wording():
            with pytest.raises(IndexError, match="library wording"):
                torchops.softmax(torch.zeros(2), 5)

        @pytest.mark.log_softmax
        @pytest.mark.gems_impl
        def test_other_operator():
            assert torchops.log_softmax(torch.zeros(2), -1).shape == (2,)
        """,
    )
    result, report = run(pytester, GOOD)
    rows = results(report)
    assert rows["test_contract"][0] == "passed"
    assert rows["test_library_wording"][0] == "skipped" and "softmax is overridden" in rows["test_library_wording"][1]
    assert rows["test_other_operator"][0] == "passed"  # log_softmax is not overridden
    assert result.ret == 0


def test_a_worker_started_as_a_fresh_interpreter_serves_the_same(tmp_path, monkeypatch):
    # The path taken when forking is unsafe (a CUDA context or a native thread pool in the judge).
    import torch

    from gemswatch.testing.isolation import judge

    monkeypatch.setattr(judge, "_native_threads", lambda: True)
    (tmp_path / "cand.py").write_text(GOOD)
    source = judge.WorkerSource()
    try:
        assert source.worker._fresh is not None
        softmax = source.load(tmp_path / "cand.py", "cand.py").function("my_softmax")
        x = torch.randn(3, 5)
        assert torch.equal(softmax(x, -1), torch.softmax(x, -1))
    finally:
        source.close()
    assert source.worker._fresh.poll() is not None and source.died is None
