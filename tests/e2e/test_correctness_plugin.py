"""End-to-end tests of the correctness plugin (gemswatch.testing.correctness)
through pytester: overrides applied once per session and restored after it,
per-case candidate call counts and the report, an uncalled candidate failing
the session, usage errors, ``--list-overrides``, and concurrent sessions
overriding the same operator with different candidates.

Each test writes a tiny operator module ``fakeops`` and candidates into the
pytester folder and points ``--override-module fakeops`` at it, so sessions
take milliseconds. A few tests run the real ``gemswatch.gems``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import pytest

from gemswatch.testing import _atomic as atomic_module
from gemswatch.testing.correctness import SCHEMA
from gemswatch.testing.session_overrides import write_json_atomic

pytest_plugins = ["pytester"]

CONFTEST = """
import pathlib

pytest_plugins = ["gemswatch.testing.correctness", "gemswatch.testing.upstream_spellings"]


def pytest_configure(config):
    config.addinivalue_line("markers", "softmax: tests of the softmax operator")


def pytest_sessionfinish(session):
    import fakeops

    pathlib.Path("at_sessionfinish.txt").write_text(getattr(fakeops.softmax, "__name__", "?"))
"""

FAKEOPS = """
def softmax(x, dim=-1):
    return ("orig", x)


def rms_norm(x):
    return ("orig-rms", x)


nothing = None
"""

VARIANT_A = """
import pathlib

# Every execution of this file leaves a mark: the override must load it once.
with open(pathlib.Path(__file__).with_suffix(".imports"), "a") as f:
    f.write("imported\\n")


def my_softmax(x, dim=-1):
    return ("a", x)


def my_rms(x):
    return ("a-rms", x)
"""

VARIANT_B = """
def my_softmax(x, dim=-1):
    return ("b", x)
"""

CALLS_SOFTMAX = """
import pathlib

import fakeops


def test_calls_softmax():
    pathlib.Path("ran.txt").write_text("yes")
    assert fakeops.softmax(1)[1] == 1
"""

TIMEOUT = 60


@pytest.fixture
def suite(pytester, monkeypatch):
    pytester.makepyfile(conftest=CONFTEST, fakeops=FAKEOPS)
    cands = pytester.mkdir("cands")
    monkeypatch.setenv("GEMSWATCH_CANDIDATE_WRITABLE", str(cands))  # variant_a's import marks
    (cands / "variant_a.py").write_text(VARIANT_A)
    (cands / "variant_b.py").write_text(VARIANT_B)
    return pytester


@pytest.fixture
def fakeops(suite, monkeypatch):
    """The suite's fakeops module, imported here first so that the in-process
    session overrides this very object and we can look at it afterwards."""
    spec = importlib.util.spec_from_file_location("fakeops", suite.path / "fakeops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "fakeops", module)
    return module


def run(pytester, *args):
    """A session in this process (pytest.main), targeting fakeops."""
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "--override-module", "fakeops", *args)


def report(pytester, name="r.json"):
    return json.loads((pytester.path / name).read_text())


def records(data):
    return {r["nodeid"].split("::", 1)[1]: r for r in data["records"]}


def one_line_with(lines, word):
    hits = [line for line in lines if word in line]
    assert len(hits) == 1, lines
    return hits[0]


# ---------------------------------------------------------------------------
# Applied once at configure, restored at unconfigure
# ---------------------------------------------------------------------------


def test_override_applied_once_per_session_at_configure_restored_at_unconfigure(suite, fakeops):
    original = fakeops.softmax
    suite.makepyfile(
        test_collect="""
        import fakeops

        AT_COLLECTION = fakeops.softmax.__name__  # collection runs after configure


        def test_collected_with_candidate():
            assert AT_COLLECTION == "my_softmax"
            assert fakeops.softmax(1) == ("a", 1)
        """,
        test_second="""
        import fakeops


        def test_same_candidate_in_another_module():
            assert fakeops.softmax(2) == ("a", 2)
        """,
    )
    result = run(suite, "--override", "softmax:cands/variant_a.py:my_softmax")
    assert result.ret == 0, result.outlines
    result.assert_outcomes(passed=2)
    assert (suite.path / "cands" / "variant_a.imports").read_text() == "imported\n"
    assert (suite.path / "at_sessionfinish.txt").read_text() == "my_softmax"  # still installed
    assert fakeops.softmax is original  # restored by unconfigure
    header = one_line_with(result.outlines, "override:")
    assert header == f"override: fakeops.softmax <- {suite.path / 'cands' / 'variant_a.py'}:my_softmax"


def test_without_override_nothing_is_installed(suite, fakeops):
    suite.makepyfile(test_plain=CALLS_SOFTMAX.replace("[1] == 1", " == ('orig', 1)"))
    result = run(suite, "--record", "json", "--output", "r.json")
    assert result.ret == 0
    data = report(suite)
    assert data["status"] == "passed" and data["overrides"] == [] and data["uncalled"] == []
    assert records(data)["test_calls_softmax"]["candidate_calls"] == {}
    assert not any("override:" in line for line in result.outlines)


def test_config_file_relative_paths_and_command_line_precedence(suite, fakeops):
    cfg = suite.mkdir("cfg")
    (cfg / "ov.yaml").write_text(
        "overrides:\n"
        "  softmax: ../cands/variant_b.py:my_softmax\n"
        "  rms_norm:\n"
        "    file: ../cands/variant_a.py\n"
        "    function: my_rms\n"
    )
    suite.makepyfile(
        test_cfg="""
        import fakeops


        def test_both():
            assert fakeops.softmax(1) == ("a", 1)  # --override beat the config
            assert fakeops.rms_norm(1) == ("a-rms", 1)  # config entry, relative to cfg/
        """
    )
    result = run(
        suite,
        "--override-config", "cfg/ov.yaml",
        "--override", "softmax=cands/variant_a.py:my_softmax",
        "--record", "json", "--output", "r.json",
    )
    assert result.ret == 0, result.outlines
    overrides = {o["operator"]: o for o in report(suite)["overrides"]}
    assert overrides["softmax"]["file"] == str(suite.path / "cands" / "variant_a.py")
    assert overrides["rms_norm"] == {
        "operator": "rms_norm",
        "target": "fakeops.rms_norm",
        "file": str(suite.path / "cands" / "variant_a.py"),
        "function": "my_rms",
        "calls": 1,
    }
    assert fakeops.softmax(0) == ("orig", 0) and fakeops.rms_norm(0) == ("orig-rms", 0)


def test_session_restores_none_and_removes_new_attributes(suite, fakeops):
    # --override and --override-config restore alike: an attribute that was
    # None is None again, one that did not exist is removed.
    (suite.path / "ov.json").write_text(json.dumps({"overrides": {"nothing": "cands/variant_a.py:my_softmax"}}))
    suite.makepyfile(
        test_new="""
        import fakeops


        def test_injected_and_none():
            assert fakeops.nothing(1) == ("a", 1)
            assert fakeops.sparse_op(2) == ("b", 2)
        """
    )
    result = run(suite, "--override-config", "ov.json", "--override", "sparse_op:cands/variant_b.py:my_softmax")
    assert result.ret == 0, result.outlines
    assert "nothing" in vars(fakeops) and fakeops.nothing is None
    assert not hasattr(fakeops, "sparse_op")


# ---------------------------------------------------------------------------
# Per-case candidate_calls and the report
# ---------------------------------------------------------------------------

PER_CASE = """
import pytest

import fakeops


@pytest.fixture
def warm():
    fakeops.softmax(0)  # setup: not part of the call phase
    yield
    fakeops.softmax(0)  # teardown: neither


def test_twice(warm):
    fakeops.softmax(1)
    fakeops.softmax(2)


def test_none():
    pass


@pytest.mark.parametrize("n", [1, 3])
def test_n(n):
    for _ in range(n):
        fakeops.softmax(n)


@pytest.mark.skip(reason="not on this device")
def test_skipped():
    fakeops.softmax(1)


def test_fails():
    fakeops.softmax(1)
    assert False, "numbers differ"


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


def test_setup_error(broken):
    pass


@pytest.mark.softmax
def test_marked():
    fakeops.softmax(1)
"""


def test_candidate_calls_per_case_around_the_call_phase(suite):
    suite.makepyfile(test_cases=PER_CASE)
    result = run(
        suite, "--override", "softmax:cands/variant_a.py:my_softmax", "--record", "json", "--output", "out/r.json"
    )
    assert result.ret == 1
    data = report(suite, "out/r.json")
    assert list(data)[0] == "schema_version"
    assert data["schema_version"] == SCHEMA == "gemswatch.correctness/v1"
    assert data["status"] == "failed" and data["exit_code"] == 1
    assert data["summary"] == {"passed": 5, "failed": 1, "skipped": 1, "errors": 1, "total": 8}
    recs = records(data)
    key = "fakeops.softmax"
    assert recs["test_twice"]["candidate_calls"] == {key: 2}
    assert recs["test_none"]["candidate_calls"] == {key: 0}
    assert recs["test_n[1]"]["candidate_calls"] == {key: 1} and recs["test_n[1]"]["params"] == {"n": 1}
    assert recs["test_n[3]"]["candidate_calls"] == {key: 3} and recs["test_n[3]"]["params"] == {"n": 3}
    assert recs["test_fails"]["candidate_calls"] == {key: 1}  # measured even when the test raises
    assert recs["test_fails"]["result"] == "failed" and "numbers differ" in recs["test_fails"]["reason"]
    assert recs["test_skipped"]["result"] == "skipped" and recs["test_skipped"]["reason"] == "not on this device"
    assert "candidate_calls" not in recs["test_skipped"]  # never reached the call phase
    assert recs["test_setup_error"]["result"] == "error" and "fixture broke" in recs["test_setup_error"]["reason"]
    assert "candidate_calls" not in recs["test_setup_error"]
    assert recs["test_marked"]["opname"] == ["softmax"] and recs["test_n[1]"]["opname"] == []
    assert recs["test_twice"]["result"] == "passed" and recs["test_twice"]["reason"] is None
    for rec in recs.values():
        assert {"nodeid", "params", "result", "reason"} <= set(rec)
    # Session total includes the fixture's setup/teardown calls (2) on top of the call phases (8).
    assert data["overrides"] == [
        {
            "operator": "softmax",
            "target": key,
            "file": str(suite.path / "cands" / "variant_a.py"),
            "function": "my_softmax",
            "calls": 10,
        }
    ]
    assert data["uncalled"] == []


def test_report_is_only_written_with_record_json(suite):
    suite.makepyfile(test_one=CALLS_SOFTMAX)
    result = run(suite, "--override", "softmax:cands/variant_a.py:my_softmax", "--output", "r.json")
    assert result.ret == 0
    assert not (suite.path / "r.json").exists()
    assert not (suite.path / "accuracy_result.json").exists()


def test_report_default_path(suite):
    suite.makepyfile(test_one=CALLS_SOFTMAX)
    assert run(suite, "--record", "json").ret == 0
    assert report(suite, "accuracy_result.json")["status"] == "passed"


def test_report_is_replaced_not_merged(suite):
    suite.makepyfile(
        test_report_cases="""
        import fakeops


        def test_first():
            fakeops.softmax(1)


        def test_second():
            fakeops.softmax(2)
        """
    )
    (suite.path / "r.json").write_text(json.dumps({"stale": True, "records": [{"nodeid": "old::test"}]}))
    args = ("--override", "softmax:cands/variant_a.py:my_softmax", "--record", "json", "--output", "r.json")
    assert run(suite, *args).ret == 0
    first = report(suite)
    assert "stale" not in first and sorted(records(first)) == ["test_first", "test_second"]
    assert run(suite, *args, "-k", "test_first").ret == 0
    second = report(suite)
    assert sorted(records(second)) == ["test_first"]
    assert second["summary"]["total"] == 1 and second["overrides"][0]["calls"] == 1
    assert sorted(p.name for p in suite.path.iterdir() if p.name.startswith((".r.json", "r.json"))) == ["r.json"]


def test_write_json_atomic_keeps_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    write_json_atomic(target, {"schema_version": "x", "n": 1})
    assert json.loads(target.read_text()) == {"schema_version": "x", "n": 1}

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(atomic_module.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_json_atomic(target, {"schema_version": "x", "n": 2})
    assert json.loads(target.read_text()) == {"schema_version": "x", "n": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # the temp file is gone


# ---------------------------------------------------------------------------
# All skipped, uncalled, no tests
# ---------------------------------------------------------------------------

ALL_SKIPPED = """
import sys

import pytest

import fakeops


@pytest.mark.skip(reason="needs a GPU")
def test_marked_skip():
    fakeops.softmax(1)


@pytest.mark.skipif(True, reason="dtype unsupported")
def test_skipif():
    fakeops.softmax(1)


def test_skip_inside():
    pytest.skip("shape not supported")
    fakeops.softmax(1)
"""


def test_all_skipped_session_is_not_an_unused_error(suite, fakeops):
    suite.makepyfile(test_skips=ALL_SKIPPED)
    result = run(suite, "--override", "softmax:cands/variant_a.py:my_softmax", "--record", "json", "--output", "r.json")
    assert result.ret == 0, result.outlines
    result.assert_outcomes(skipped=3)
    data = report(suite)
    assert data["status"] == "all_skipped" and data["exit_code"] == 0
    assert data["summary"]["skipped"] == 3 and data["summary"]["total"] == 3
    assert not any("UNCALLED" in line for line in result.outlines + result.errlines)
    one_line_with(result.outlines, "all tests skipped")
    assert fakeops.softmax(0) == ("orig", 0)


@pytest.mark.parametrize(
    "spec, target, hint",
    [
        ("sofmax:cands/variant_a.py:my_softmax", "fakeops.sofmax", "did you mean 'softmax'"),
        ("rms_norm:cands/variant_a.py:my_rms", "fakeops.rms_norm", "fakeops.rms_norm"),
    ],
    ids=["misspelled-op", "op-never-called"],
)
def test_uncalled_candidate_fails_with_one_line_naming_the_operator(suite, fakeops, spec, target, hint):
    suite.makepyfile(test_one=CALLS_SOFTMAX)
    result = run(suite, "--override", spec, "--record", "json", "--output", "r.json")
    assert result.ret == 1
    result.assert_outcomes(passed=1)
    line = one_line_with(result.outlines, "UNCALLED")
    assert target in line and hint in line and "cands/variant_a.py" in line
    output = "\n".join(result.outlines + result.errlines)
    assert "Traceback" not in output and "INTERNALERROR" not in output
    data = report(suite)
    assert data["status"] == "uncalled" and data["exit_code"] == 1
    assert data["uncalled"] == [target]
    assert target in data["message"]
    assert data["summary"]["passed"] == 1
    assert not hasattr(fakeops, "sofmax") and fakeops.rms_norm(0) == ("orig-rms", 0)


def test_uncalled_with_failing_tests_still_says_uncalled(suite):
    suite.makepyfile(test_fail="def test_fail():\n    assert 0\n")
    result = run(suite, "--override", "softmax:cands/variant_a.py:my_softmax")
    assert result.ret == 1
    one_line_with(result.outlines, "UNCALLED")


def test_misspelled_op_is_announced_as_new_attribute(suite):
    suite.makepyfile(test_one=CALLS_SOFTMAX)
    result = run(suite, "--override", "sofmax:cands/variant_a.py:my_softmax")
    line = one_line_with(result.errlines, "did not exist")
    assert "fakeops.sofmax" in line


def test_pytest_main_returns_an_exit_code_for_uncalled(suite):
    # pytest.main() in-process returns 1 instead of raising AssertionError.
    suite.makepyfile(test_one=CALLS_SOFTMAX)
    reprec = suite.inline_run(
        "-p", "no:cacheprovider", "--override-module", "fakeops", "--override", "sofmax:cands/variant_a.py:my_softmax"
    )
    assert reprec.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.parametrize(
    "spec, code, word",
    [("sofmax:cands/variant_a.py:my_softmax", 1, "UNCALLED"), ("softmax:cands/missing.py", 4, "ERROR: --override:")],
    ids=["uncalled", "usage-error"],
)
def test_exit_codes_of_a_real_pytest_process(suite, spec, code, word):
    suite.makepyfile(test_one=CALLS_SOFTMAX)
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "--override-module", "fakeops", "--override", spec,
                                        timeout=TIMEOUT)
    assert result.ret == code
    one_line_with(result.outlines + result.errlines, word)
    output = "\n".join(result.outlines + result.errlines)
    assert "Traceback" not in output and "INTERNALERROR" not in output


def test_no_tests_selected(suite):
    suite.makepyfile(test_one=CALLS_SOFTMAX)
    result = run(
        suite, "--override", "softmax:cands/variant_a.py:my_softmax", "-k", "nothing_matches",
        "--record", "json", "--output", "r.json",
    )
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    data = report(suite)
    assert data["status"] == "no_tests" and data["records"] == []
    assert not any("UNCALLED" in line for line in result.outlines)


# ---------------------------------------------------------------------------
# Usage errors: exit 4, one line, the session does not run
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--override", "softmax"], "invalid override spec 'softmax'"),
        (["--override", "softmax:cands/missing.py:my_softmax"], "cands/missing.py (resolved to"),
        (["--override", "softmax:cands/variant_b.py:my_softmx"], "did you mean 'my_softmax'"),
        (["--override", "softmax:cands/imports_missing.py:my_softmax"], "ModuleNotFoundError"),
        (["--override", "softmax:cands/syntax.py:my_softmax"], "SyntaxError at line 2"),
        (["--override-config", "cfg/typo.yaml"], "no 'overrides' mapping"),
        (["--override-config", "cfg/ov.toml"], "must end in .yaml, .yml or .json"),
        (["--override-config", "cfg/absent.yaml"], "override config not found"),
        (["--override-module", "gemswatch_no_such_ops", "--override", "softmax:cands/variant_b.py:my_softmax"],
         "cannot import target module 'gemswatch_no_such_ops'"),
    ],
    ids=["bad-spec", "missing-file", "missing-function", "import-fails", "syntax-error", "config-typo",
         "config-suffix", "config-missing", "bad-module"],
)
def test_bad_override_is_a_usage_error_and_nothing_runs(suite, fakeops, args, fragment):
    (suite.path / "cands" / "imports_missing.py").write_text("import gemswatch_nope_xyz\n")
    (suite.path / "cands" / "syntax.py").write_text("def my_softmax(x):\n    return (x\n")
    cfg = suite.mkdir("cfg")
    (cfg / "typo.yaml").write_text("override:\n  softmax: ../cands/variant_b.py:my_softmax\n")
    (cfg / "ov.toml").write_text("")
    suite.makepyfile(test_one=CALLS_SOFTMAX)
    result = run(
        suite,
        "--override", "rms_norm:cands/variant_a.py:my_rms",  # valid, must not be installed either
        *args,
        "--record", "json", "--output", "r.json",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.strip()]
    assert len(errors) == 1, result.errlines
    assert errors[0].startswith("ERROR: ") and fragment in errors[0]
    assert not (suite.path / "ran.txt").exists()
    assert not (suite.path / "r.json").exists()
    assert fakeops.rms_norm(0) == ("orig-rms", 0) and fakeops.softmax(0) == ("orig", 0)
    assert "Traceback" not in "\n".join(result.outlines + result.errlines)


# ---------------------------------------------------------------------------
# --list-overrides: print the active overrides and exit without running
# ---------------------------------------------------------------------------


def test_list_overrides_prints_and_exits_zero_without_running(suite, fakeops):
    suite.makepyfile(test_one=CALLS_SOFTMAX)
    result = run(
        suite,
        "--override", "softmax:cands/variant_a.py:my_softmax",
        "--override", "sofmax=cands/variant_b.py:my_softmax",
        "--list-overrides",
        "--record", "json", "--output", "r.json",
    )
    assert result.ret == 0
    assert f"fakeops.softmax <- {suite.path / 'cands' / 'variant_a.py'}:my_softmax" in result.outlines
    assert f"fakeops.sofmax <- {suite.path / 'cands' / 'variant_b.py'}:my_softmax  (new attribute)" in result.outlines
    assert not (suite.path / "ran.txt").exists()
    assert not (suite.path / "r.json").exists()
    assert not any("UNCALLED" in line for line in result.outlines)
    assert fakeops.softmax(0) == ("orig", 0) and not hasattr(fakeops, "sofmax")


def test_list_overrides_without_overrides(suite):
    suite.makepyfile(test_one=CALLS_SOFTMAX)
    result = run(suite, "--list-overrides")
    assert result.ret == 0
    assert "no active overrides" in result.outlines
    assert not (suite.path / "ran.txt").exists()


def test_list_overrides_with_a_bad_spec_is_still_a_usage_error(suite):
    result = run(suite, "--override", "softmax:cands/missing.py", "--list-overrides")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


# ---------------------------------------------------------------------------
# Concurrent processes, same operator, different candidates
# ---------------------------------------------------------------------------

CONCURRENT_TEST = """
import os
import pathlib
import time

import fakeops

EXPECTED = {"a": ("a", 1), "b": ("b", 1), "orig": ("orig", 1)}


def test_softmax_variant():
    me = os.environ["GW_EXPECT"]
    pathlib.Path(f"started_{me}").touch()
    # Rendezvous: all three sessions are alive at the same time.
    deadline = time.monotonic() + 30
    while not all(pathlib.Path(f"started_{other}").exists() for other in EXPECTED):
        assert time.monotonic() < deadline, "the other sessions never started"
        time.sleep(0.02)
    assert fakeops.softmax(1) == EXPECTED[me]
"""


def test_concurrent_sessions_override_the_same_operator_independently(suite):
    suite.makepyfile(test_concurrent=CONCURRENT_TEST)
    runs = {
        "a": ["--override", "softmax:cands/variant_a.py:my_softmax"],
        "b": ["--override", "softmax:cands/variant_b.py:my_softmax"],
        "orig": [],
    }
    procs = {}
    for name, extra in runs.items():
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--override-module", "fakeops",
               *extra, "--record", "json", "--output", f"report_{name}.json"]
        env = dict(os.environ, GW_EXPECT=name)
        procs[name] = subprocess.Popen(
            cmd, cwd=suite.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    deadline = time.monotonic() + TIMEOUT
    outputs = {}
    for name, proc in procs.items():
        try:
            outputs[name] = proc.communicate(timeout=max(1, deadline - time.monotonic()))[0]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for name, proc in procs.items():
        assert proc.returncode == 0, outputs[name]
    key = "fakeops.softmax"
    for name in ("a", "b"):
        data = report(suite, f"report_{name}.json")
        assert data["status"] == "passed"
        assert [o["file"] for o in data["overrides"]] == [str(suite.path / "cands" / f"variant_{name}.py")]
        assert data["records"][0]["candidate_calls"] == {key: 1}
    baseline = report(suite, "report_orig.json")
    assert baseline["status"] == "passed" and baseline["overrides"] == []
    assert baseline["records"][0]["candidate_calls"] == {}


# ---------------------------------------------------------------------------
# The real operator library
# ---------------------------------------------------------------------------

GEMS_CANDIDATE = """
import torch


def my_softmax(input, dim=-1, dtype=None):
    x = input.double()
    e = (x - x.amax(dim=dim, keepdim=True)).exp()
    return (e / e.sum(dim=dim, keepdim=True)).to(dtype or input.dtype)
"""

GEMS_TEST = """
import torch

from gemswatch import gems


def test_softmax_rows():
    x = torch.randn(3, 7, device=gems.device)
    assert torch.allclose(gems.softmax(x, dim=-1), torch.softmax(x, dim=-1), rtol=1.3e-6, atol=1e-5)
"""


@pytest.fixture(scope="module")
def gems():
    """Import gems and run one kernel outside pytester's sys.modules snapshots:
    modules first imported inside an in-process session are dropped after it,
    and torch/triton extension modules cannot be imported twice."""
    try:
        from gemswatch import gems
    except Exception as e:  # the operator library is built in parallel
        pytest.skip(f"gemswatch.gems cannot be imported: {type(e).__name__}: {e}")
    import torch

    x = torch.randn(3, 7, device=gems.device)
    torch.testing.assert_close(gems.softmax(x, dim=-1), torch.softmax(x, dim=-1))  # imports lazily, too
    return gems


@pytest.fixture
def gems_suite(gems, pytester):
    pytester.makepyfile(conftest='pytest_plugins = ["gemswatch.testing.correctness", "gemswatch.testing.upstream_spellings"]\n', test_gems_softmax=GEMS_TEST)
    (pytester.mkdir("candidates") / "softmax_v2.py").write_text(GEMS_CANDIDATE)
    return pytester


def test_real_gems_override_counts_calls(gems, gems_suite):
    original = gems.softmax
    result = gems_suite.runpytest_inprocess(
        "-p", "no:cacheprovider", "--override", "softmax:./candidates/softmax_v2.py:my_softmax",
        "--record", "json", "--output", "r.json",
    )
    assert result.ret == 0, result.outlines
    data = report(gems_suite)
    assert data["records"][0]["candidate_calls"] == {"gemswatch.gems.softmax": 1}
    assert gems.softmax is original


def test_real_gems_misspelled_op_fails_with_one_line(gems_suite):
    result = gems_suite.runpytest_inprocess(
        "-p", "no:cacheprovider", "--override", "sofmax:./candidates/softmax_v2.py:my_softmax"
    )
    assert result.ret == 1
    line = one_line_with(result.outlines, "UNCALLED")
    assert "gemswatch.gems.sofmax" in line and "did you mean 'softmax'" in line


# ---------------------------------------------------------------------------
# The case seed and the coverage notes
# ---------------------------------------------------------------------------

DRAWS = """
import pathlib

import pytest
import torch

import fakeops
from gemswatch.testing.cases import record


@pytest.mark.softmax
@pytest.mark.parametrize("draw", range(2))
def test_draw(draw, case_rng):
    with open("drawn.txt", "a") as f:
        f.write(f"{draw}:{case_rng.randrange(1 << 30)}\\n")
    record(torch.zeros(3, case_rng.choice([5, 5000])).t(), width=3)
    record(torch.zeros(2, 40, dtype=torch.bfloat16), width=40)
    assert fakeops.softmax(1)[1] == 1
"""


def _draws(pytester) -> list[str]:
    path = pytester.path / "drawn.txt"
    text = path.read_text()
    path.unlink()
    return text.split()


def test_the_seed_is_named_after_the_cases_ran_and_in_the_report_and_replays_the_draws(suite):
    suite.makepyfile(test_draws=DRAWS)
    result = run(suite, "--seed", "1234", "--record", "json", "--output", "r.json")
    assert result.ret == 0
    # After the cases, never before them: a candidate could read its log.
    lines = result.stdout.lines
    seed_at = next(i for i, line in enumerate(lines) if "gemswatch: case seed 1234 (replay with --seed 1234)" in line)
    assert seed_at > next(i for i, line in enumerate(lines) if line.startswith("test_draws.py"))
    assert report(suite)["seed"] == 1234
    first = _draws(suite)
    assert len(set(first)) == 2  # each test its own stream
    assert run(suite, "--seed", "1234").ret == 0
    assert _draws(suite) == first
    assert run(suite, "--seed", "99").ret == 0
    assert _draws(suite) != first


def test_without_a_seed_each_session_draws_a_fresh_one(suite):
    suite.makepyfile(test_draws=DRAWS)
    seeds = set()
    for _ in range(2):
        assert run(suite, "--record", "json", "--output", "r.json").ret == 0
        seeds.add(report(suite)["seed"])
        _draws(suite)
    assert len(seeds) == 2


def test_a_bad_seed_is_a_usage_error(suite):
    suite.makepyfile(test_draws=DRAWS)
    result = run(suite, "--seed", "soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--seed 'soon': give a non-negative integer*"])


def test_the_report_sums_coverage_per_operator(suite):
    suite.makepyfile(test_draws=DRAWS)
    assert run(suite, "--seed", "7", "--record", "json", "--output", "r.json").ret == 0
    data = report(suite)
    cov = data["coverage"]["softmax"]
    assert cov["cases"] == 2
    assert cov["size_class"] == ["small", "tiny"] and cov["dtype"] == ["bfloat16", "float32"]
    assert set(cov["layout"]) <= {"contiguous", "transposed"} and "contiguous" in cov["layout"]
    assert cov["dtypes_by_size_class"] == {"small": ["bfloat16"], "tiny": ["float32"]}
    assert all(r["covered"] for r in data["records"])



def test_the_cases_that_failed_last_time_run_first_then_the_rest(suite):
    from gemswatch.testing.correctness import FAILED_FIRST_OPTION as plugin_option
    from gemswatch.watch.failed_cases import FAILED_FIRST_OPTION, failed_nodeids

    assert plugin_option == FAILED_FIRST_OPTION  # the watcher's copy of the plugin's option name
    suite.makepyfile(test_cases=PER_CASE)
    (suite.path / "failed.txt").write_text("test_cases.py::test_setup_error\ntest_cases.py::test_n[3]\n")
    result = run(suite, "--override", "softmax:cands/variant_a.py:my_softmax", "--record", "json",
                 "--output", "again.json", FAILED_FIRST_OPTION, "failed.txt")
    assert result.ret == 1
    order = [r["nodeid"].split("::", 1)[1] for r in report(suite, "again.json")["records"]]
    assert order[:2] == ["test_n[3]", "test_setup_error"]  # the listed ones first, in the suite's order
    assert order[2:] == ["test_twice", "test_none", "test_n[1]", "test_skipped", "test_fails", "test_marked"]
    # What `f` hands the next correctness stage: this report's failed cases, in the order they ran.
    assert [i.split("::", 1)[1] for i in failed_nodeids(suite.path / "again.json")] == ["test_setup_error", "test_fails"]
