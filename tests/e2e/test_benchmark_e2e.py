"""The benchmark suite of this repository, driven like its users drive it.

The seed's preflight command and the bundled-candidate command run as real
``python -m pytest`` processes from the repository root; the others run the
real benchmark files in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gemswatch.gems  # noqa: F401  (loaded before any in-process run; see test_benchmark_plugin.py)
import gemswatch.testing.benchmark.plugin  # noqa: F401

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX_FILE = ROOT / "benchmark" / "test_softmax_perf.py"


def pytest_process(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def listed_ids(path: Path, op: str) -> list[str]:
    report = json.loads(path.read_text())
    return [c["case_id"] for b in report["benchmarks"] if b["op_name"] == op for c in b["cases"]]


def test_the_documented_preflight_command_line_works_as_written(tmp_path):
    # python -m pytest -q benchmark/test_addmm_.py --level core \
    #   --preflight-only --override addmm_:/path/candidate.py:run \
    #   --record json --output /tmp/preflight.json
    candidate = tmp_path / "candidate.py"
    candidate.write_text(
        "def run(input, mat1, mat2, *, beta=1, alpha=1):\n"
        "    return input.addmm_(mat1, mat2, beta=beta, alpha=alpha)\n"
    )
    output = tmp_path / "preflight.json"
    proc = pytest_process("-q", "benchmark/test_addmm_.py", "--level", "core", "--preflight-only",
                          "--override", f"addmm_:{candidate}:run", "--record", "json", "--output", str(output))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(output.read_text())
    assert report["schema_version"] == "flaggems.preflight/v1"
    records = report["records"]
    assert len(records) == 9 and len({r["case_id"] for r in records}) == 9  # 3 shapes x 3 dtypes
    for r in records:
        assert (r["operator"], r["nodeid"], r["override"], r["count"], r["status"]) == (
            "addmm_", "benchmark/test_addmm_.py::test_addmm_", True, 1, "passed")


def test_bundled_softmax_candidate_passes_preflight_on_every_listed_case(tmp_path):
    candidate = ROOT / "candidates" / "softmax_v2.py"
    if not candidate.exists():
        pytest.skip("candidates/softmax_v2.py is not in this checkout")
    listing = tmp_path / "cases.json"
    proc = pytest_process("-q", "benchmark/test_softmax_perf.py", "--level", "core", "--list-cases",
                          "--output", str(listing))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    output = tmp_path / "pre.json"
    proc = pytest_process("-q", "benchmark/test_softmax_perf.py", "--level", "core", "--preflight-only",
                          "--override", "softmax:./candidates/softmax_v2.py:my_softmax",
                          "--record", "json", "--output", str(output))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = json.loads(output.read_text())["records"]
    assert sorted(r["case_id"] for r in records) == sorted(listed_ids(listing, "softmax"))
    assert {(r["operator"], r["override"], r["count"], r["status"]) for r in records} == {("softmax", True, 1, "passed")}


def test_raising_candidate_fails_every_softmax_case(pytester):
    pytester.path.joinpath("broken.py").write_text("def my_softmax(x, dim=-1, dtype=None):\n    raise ValueError('broken')\n")
    result = pytester.runpytest_inprocess(
        str(SOFTMAX_FILE), "-p", "no:cacheprovider", "--rootdir", str(ROOT), "--level", "core", "--preflight-only",
        "--override", "softmax:broken.py:my_softmax", "--record", "json", "--output", "pre.json")
    assert result.ret == 1
    records = json.loads(pytester.path.joinpath("pre.json").read_text())["records"]
    assert len(records) == 12
    assert {(r["status"], r["override"], r["count"], r["error"].split(" (at ")[0]) for r in records} == {
        ("failed", True, 1, "ValueError: broken")}
    assert all("broken.py:2 in my_softmax" in r["error"] for r in records)  # the candidate's line


def test_preflight_and_profile_together_is_a_usage_error(pytester):
    result = pytester.runpytest_inprocess(str(SOFTMAX_FILE), "-p", "no:cacheprovider", "--rootdir", str(ROOT),
                                          "--preflight-only", "--profile-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == "ERROR: --preflight-only cannot be combined with --profile-only"


def test_every_gems_operator_has_a_benchmark(pytester):
    from gemswatch import gems

    helpers = {"device", "interpreted", "enable", "only_enable", "use_gems", "all_registered_ops", "all_registered_keys"}
    ops = {name for name in gems.__all__ if name not in helpers}
    result = pytester.runpytest_inprocess(str(ROOT / "benchmark"), "-p", "no:cacheprovider", "--rootdir", str(ROOT),
                                          "--level", "core", "--list-cases", "--output", "cases.json")
    assert result.ret == 0
    report = json.loads(pytester.path.joinpath("cases.json").read_text())
    assert sorted(b["op_name"] for b in report["benchmarks"]) == sorted(ops)
    assert all(b["cases"] for b in report["benchmarks"])


def test_every_bundled_kernel_passes_preflight_as_its_own_candidate(tmp_path):
    # The honest control of the benchmark's accuracy rule: each operator's
    # bundled kernel, run as a candidate (in its worker, judged against a
    # float64 reference on every benchmark case), passes.
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from library_candidate import OPERATORS
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    overrides = [a for op in OPERATORS for a in ("--override", f"{op}:scripts/library_candidate.py:{op}")]
    output = tmp_path / "preflight.json"
    proc = pytest_process("-q", "benchmark", "--level", "core", "--preflight-only", *overrides, "--output", str(output))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = json.loads(output.read_text())["records"]
    assert {r["operator"] for r in records} == set(OPERATORS)
    assert all(r["status"] == "passed" and r["override"] for r in records)
