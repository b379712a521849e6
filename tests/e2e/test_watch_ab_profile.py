"""`gemswatch ab` and `gemswatch profile` end to end: real benchmark stages on the CPU.

One tiny project: a softmax benchmark of one float32 case, and two torch-level
candidates of it, one of which computes the softmax 300 times per call. `ab`
must find that one slower, significantly; `profile` replays the case under the
torch profiler and names the operator it ran. About 15 s on a 2-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _e2e_helpers import write_files

PY = sys.executable

PROJECT = {
    "config.yaml": """\
        watch: cands
        level: core
        candidates:
          '*.py':
            softmax: my_softmax
        operators:
          softmax:
            tests: [tests/test_softmax.py]
            benchmark: benchmark/test_perf.py::test_softmax
        """,
    "tests/test_softmax.py": """\
        def test_unused():
            pass
        """,
    "benchmark/conftest.py": """\
        pytest_plugins = ["gemswatch.testing.benchmark.plugin", "gemswatch.testing.upstream_spellings"]
        """,
    "benchmark/test_perf.py": """\
        import torch

        from gemswatch.testing.benchmark import Benchmark, CasePlan

        ONE = {"core": [CasePlan({"x": [4, 64]}, {"dim": -1})]}


        def build(case, device):
            return (torch.randn(case.shape["x"], dtype=case.dtype, device=device),), {"dim": case.params["dim"]}


        SOFTMAX = Benchmark(op="softmax", baseline=torch.softmax, cases=ONE, build=build,
                            dtypes=(torch.float32,), interpreter_cases=ONE)


        def test_softmax(bench):
            bench.run(SOFTMAX)
        """,
    "cands/plain.py": """\
        import torch


        def my_softmax(x, dim=-1, dtype=None):
            return torch.softmax(x, dim, dtype=dtype)
        """,
    "cands/wasteful.py": """\
        import torch


        def my_softmax(x, dim=-1, dtype=None):
            for _ in range(300):
                out = torch.softmax(x, dim, dtype=dtype)
            return out
        """,
}


@pytest.fixture(scope="module")
def proj(tmp_path_factory) -> Path:
    return write_files(tmp_path_factory.mktemp("abproj"), PROJECT)


def gemswatch(proj: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "gemswatch.watch", *args], cwd=proj, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "GEMSWATCH_DEVICE": "cpu"})


@pytest.fixture(scope="module")
def ab(proj):
    r = gemswatch(proj, "ab", "cands/plain.py", "cands/wasteful.py", "--rounds", "3", "--warmup", "2", "--iter", "5",
                  "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_ab_finds_the_wasteful_candidate_significantly_slower(ab, proj):
    (case,) = ab["cases"]
    assert case["verdict"] == "B slower" and case["significant"] is True
    assert case["rounds"] == 3 and case["ratio"] > case["ci95"][0] > 1
    folder = Path(ab["folder"])
    # ABBA order: A first in odd rounds, B first in even ones, each its own stage process
    assert sorted(p.name for p in folder.iterdir()) == ["A-1", "A-2", "A-3", "B-1", "B-2", "B-3"]
    assert (folder / "B-2" / "benchmark.json").is_file()
    assert "--warmup 2 --iter 5 --record json" in (folder / "A-1" / "benchmark.cmd").read_text()


def test_ab_names_a_missing_file(proj):
    r = gemswatch(proj, "ab", "cands/plain.py", "cands/nosuch.py")
    assert r.returncode == 2 and r.stderr.startswith("gemswatch ab: cands/nosuch.py not found")


def test_profile_replays_the_case_and_names_what_ran(ab, proj):
    case_id = ab["cases"][0]["case"]
    r = gemswatch(proj, "profile", "cands/wasteful.py", "--case-id", case_id, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["ok"] and out["tool"] == "torch" and out["case_id"] == case_id
    assert Path(out["report"]).is_file() and Path(out["report"]).stat().st_size > 0
    assert len(out["summary"]) == 3 and "aten::_softmax" in out["summary"][0]
    assert out["summary"][1].startswith("time: ") and out["summary"][1].endswith("over 1 captured call(s)")
    report = json.loads((Path(out["run_dir"]) / "profile.json").read_text())
    assert report["schema_version"] == "gemswatch.profile/v1" and report["case_id"] == case_id
