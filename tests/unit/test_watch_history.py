"""`gemswatch history` tables and `gemswatch new` (sources read, never imported)."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import yaml
from rich.console import Console

from gemswatch.watch.scaffold import add_mapping, find_kernel_source, make_candidate_source
from gemswatch.watch.history_tables import history_tables, leaderboard, saves


def stage(run, cand, sha, stage, status, speedup=None, t="2025-01-01T10:00:00", ops=("softmax",)):
    return {
        "event": "stage_finished",
        "run_id": run,
        "candidate": cand,
        "content_sha256": sha,
        "operators": list(ops),
        "stage": stage,
        "status": status,
        "speedup": speedup,
        "speedups": {ops[0]: speedup} if speedup else {},
        "time": t,
    }


RECORDS = [
    stage("r1", "c/a.py", "a1" * 32, "correctness", "passed", t="2025-01-01T10:00:00"),
    stage("r1", "c/a.py", "a1" * 32, "benchmark", "passed", 1.2, t="2025-01-01T10:00:01"),
    stage("r2", "c/a.py", "a2" * 32, "correctness", "passed", t="2025-01-01T10:01:00"),
    stage("r2", "c/a.py", "a2" * 32, "benchmark", "passed", 1.5, t="2025-01-01T10:01:01"),
    stage("r3", "c/b.py", "b1" * 32, "correctness", "failed", t="2025-01-01T10:02:00"),
    stage("r3", "c/b.py", "b1" * 32, "benchmark", "passed", 9.9, t="2025-01-01T10:02:01"),  # cannot lead: wrong
    stage("r4", "c/n.py", "c1" * 32, "correctness", "passed", t="2025-01-01T10:03:00", ops=("rms_norm",)),
    {"event": "run_finished", "run_id": "r1", "candidate": "c/a.py", "status": "passed", "time": "2025-01-01T10:00:02"},
]


def test_saves_and_change():
    runs = saves(RECORDS)
    assert [r["run_id"] for r in runs] == ["r1", "r2", "r3", "r4"]
    assert runs[0]["status"] == "passed"
    assert runs[1]["change"] == 1.5 / 1.2 - 1
    assert [r["run_id"] for r in saves(RECORDS, "a.py")] == ["r1", "r2"]
    assert [r["run_id"] for r in saves(RECORDS, "rms_norm")] == ["r4"]


def test_leaderboard_only_counts_correct_variants():
    board = leaderboard(saves(RECORDS))
    assert [(e["candidate"], e["speedup"]) for e in board["softmax"]] == [("c/a.py", 1.5), ("c/a.py", 1.2)]
    assert "rms_norm" not in board


def test_history_tables_render():
    console = Console(file=io.StringIO(), width=160, color_system=None)
    for t in history_tables(RECORDS, None):
        console.print(t)
    out = console.file.getvalue()
    assert "leaderboard" in out and "+25.0%" in out and "1.50x" in out


def test_a_benchmark_run_sits_on_the_row_of_the_save_it_measured():
    records = [
        stage("s1", "c/a.py", "a1" * 32, "correctness", "passed", t="2025-01-01T10:00:00"),
        stage("s1", "c/a.py", "a1" * 32, "benchmark", "not_run", t="2025-01-01T10:00:01"),
        stage("b1", "c/a.py", "a1" * 32, "benchmark", "passed", 1.3, t="2025-01-01T10:05:00"),  # `b`, same bytes
    ]
    runs = saves(records)
    assert [r["run_id"] for r in runs] == ["s1"]
    assert runs[0]["stages"]["benchmark"]["status"] == "passed" and runs[0]["speedup"] == 1.3
    assert [(e["candidate"], e["run_id"]) for e in leaderboard(runs)["softmax"]] == [("c/a.py", "s1")]


def test_stopped_runs_are_left_out_and_counted_and_the_best_code_is_named(tmp_path):
    records = RECORDS + [
        stage("q1", "c/a.py", "a3" * 32, "preflight", "superseded", t="2025-01-01T11:00:00"),
        stage("q1", "c/a.py", "a3" * 32, "correctness", "not_run", t="2025-01-01T11:00:00"),
    ]
    console = Console(file=io.StringIO(), width=200, color_system=None)
    for t in history_tables(records, None, runs_dir=tmp_path / "runs"):
        console.print(t)
    out = console.file.getvalue()
    assert "a3a3a3a3" not in out and "1 run(s) stopped before any verdict" in out
    assert f"best softmax: {tmp_path / 'runs' / 'r2' / 'snapshot' / 'a.py'}" in out


# -- environment tags -------------------------------------------------------------

ENV = {"commit": "f" * 40, "dirty": False, "torch": "2.13.0", "triton": "3.9.0", "driver": "580.1", "device": "NVIDIA H200"}


def test_rows_of_another_environment_are_marked_and_commits_are_not_environments():
    records = [
        stage("r1", "c/a.py", "a1" * 32, "correctness", "passed", t="2025-01-01T10:00:00") | {"env": ENV},
        stage("r1", "c/a.py", "a1" * 32, "benchmark", "passed", 1.2, t="2025-01-01T10:00:01") | {"env": ENV},
        # Another commit and a dirty tree: still this environment.
        stage("r2", "c/a.py", "a2" * 32, "correctness", "passed", t="2025-01-01T10:01:00") | {"env": ENV | {"commit": "e" * 40, "dirty": True}},
        stage("r2", "c/a.py", "a2" * 32, "benchmark", "passed", 1.5, t="2025-01-01T10:01:01") | {"env": ENV | {"commit": "e" * 40, "dirty": True}},
        stage("r3", "c/a.py", "a3" * 32, "correctness", "passed", t="2025-01-01T10:02:00") | {"env": ENV | {"torch": "2.11.0"}},
        stage("r3", "c/a.py", "a3" * 32, "benchmark", "passed", 9.0, t="2025-01-01T10:02:01") | {"env": ENV | {"torch": "2.11.0"}},
        stage("r4", "c/a.py", "a4" * 32, "correctness", "passed", t="2025-01-01T10:03:00"),  # written before tags
        stage("r4", "c/a.py", "a4" * 32, "benchmark", "passed", 1.1, t="2025-01-01T10:03:01"),
    ]
    console = Console(file=io.StringIO(), width=220, color_system=None)
    for t in history_tables(records, None, current_env=ENV):
        console.print(t)
    saves_rows = [line for line in console.file.getvalue().splitlines() if "c/a.py" in line and "passed" in line]
    assert len(saves_rows) == 4
    by_sha = {sha[:12]: next(r for r in saves_rows if sha[:12] in r) for sha in ("a1" * 32, "a2" * 32, "a3" * 32, "a4" * 32)}
    assert "other" not in by_sha["a1a1a1a1a1a1"] and "?" not in by_sha["a1a1a1a1a1a1"]
    assert "other" not in by_sha["a2a2a2a2a2a2"]
    assert "other: torch 2.11.0" in by_sha["a3a3a3a3a3a3"]
    assert by_sha["a4a4a4a4a4a4"].rstrip().endswith("?")
    # The leaderboard's 9.0x variant is marked too: it was measured with another torch.
    board = console.file.getvalue().split("leaderboard", 1)[1]
    assert "9.00x" in board and "other: torch 2.11.0" in board


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(cwd), "PATH": "/usr/bin:/bin"})


def test_tags_name_the_commit_and_a_dirty_tree_outside_the_watched_folder(tmp_path):
    import importlib.metadata

    from gemswatch.watch.environment import EnvironmentTags

    (tmp_path / "cands").mkdir()
    (tmp_path / "cands" / "k.py").write_text("a = 1\n")
    (tmp_path / "lib.py").write_text("b = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "x")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    tags = EnvironmentTags(tmp_path, sys.executable, None, tmp_path / "cands")
    env = tags.tags()
    assert env == {"commit": head, "dirty": False, "torch": importlib.metadata.version("torch"),
                   "triton": importlib.metadata.version("triton"), "driver": None, "device": "cpu"}
    (tmp_path / "cands" / "k.py").write_text("a = 2\n")  # editing a candidate is what the loop is for
    assert tags.tags()["dirty"] is False
    (tmp_path / "lib.py").write_text("b = 2\n")  # the code it is judged by changed
    assert tags.tags()["dirty"] is True  # at the next finished stage, however soon


def test_outside_a_checkout_the_git_tags_are_null(tmp_path):
    from gemswatch.watch.environment import EnvironmentTags

    env = EnvironmentTags(tmp_path, sys.executable, None).tags()
    assert (env["commit"], env["dirty"], env["device"]) == (None, None, "cpu")


# -- gemswatch new --------------------------------------------------------------

MODULE = '''\
"""A family module."""

from __future__ import annotations

import torch

from . import _launch
from .._device import interpreted
from ..ops.helpers import thing

__all__ = ["softmax", "log_softmax"]


# The shared helper.
def _impl(x, log):
    _launch.check(interpreted, thing)
    return torch.softmax(x, -1)


def _log_only(x):
    return x


def softmax(x, dim=-1):
    """softmax."""
    return _impl(x, False)


def log_softmax(x, dim=-1):
    y = softmax(x)  # uses softmax
    return _log_only(y).log()
'''


def test_make_candidate_source():
    src = make_candidate_source(MODULE, "gemswatch.gems.ops", "softmax", "my_softmax", "gemswatch.gems.ops.softmax")
    assert "from gemswatch.gems.ops import _launch" in src
    assert "from gemswatch.gems._device import interpreted" in src
    assert "from gemswatch.gems.ops.helpers import thing" in src
    assert "def my_softmax(x, dim=-1):" in src
    assert "torch.softmax(x, -1)" in src  # attributes keep their names
    assert "# The shared helper.\ndef _impl" in src  # with the comment above it
    # Only what softmax needs: not the family's other operator, its helper, docstring or __all__.
    assert "def log_softmax" not in src and "_log_only" not in src and "A family module" not in src
    assert '__all__ = ["my_softmax"]' in src
    compile(src, "cand.py", "exec")
    assert src.splitlines()[0].startswith("# Candidate for `softmax`")


def test_a_name_a_helper_binds_is_its_own_not_the_operator_of_that_name():
    from gemswatch.watch.scaffold import needed_source

    family = """
def _reduce(x, mean: bool):
    return x if mean else -x


def sum(x):
    return _reduce(x, mean=False)


def mean(x):
    return _reduce(x, mean=True)
"""
    kept = needed_source(family, "sum")
    assert "def mean" not in kept and "def _reduce" in kept and "def sum" in kept



def test_find_kernel_source_unknown_op():
    import pytest

    from gemswatch.watch.scaffold import NewCandidateError

    with pytest.raises(NewCandidateError, match="known operators: .*softmax"):
        find_kernel_source("no_such_op")


def test_add_mapping_keeps_comments_and_order(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        textwrap.dedent(
            """\
            # top comment
            watch: cands
            candidates:
              a.py:
                softmax: my_softmax   # inline comment

            # operators follow
            operators:
              softmax:
                tests: tests/t.py
            """
        )
    )
    add_mapping(cfg, "b.py", "rms_norm", "my_rms_norm")
    text = cfg.read_text()
    assert "# top comment" in text and "# inline comment" in text and "# operators follow" in text
    data = yaml.safe_load(text)
    assert data["candidates"] == {"a.py": {"softmax": "my_softmax"}, "b.py": {"rms_norm": "my_rms_norm"}}
    assert text.index("b.py:") < text.index("# operators follow")


def test_add_mapping_without_candidates_key(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("watch: cands\n")
    add_mapping(cfg, "x.py", "add", "my_add")
    assert yaml.safe_load(cfg.read_text())["candidates"] == {"x.py": {"add": "my_add"}}


def test_an_append_cuts_a_torn_last_line_and_writes_whole_lines(tmp_path):
    import json

    from gemswatch.watch.history import History

    h = History(tmp_path / ".gemswatch")
    h.append({"event": "run_finished", "candidate": "c.py", "run_id": "r1"})
    with open(h.path, "a") as f:
        f.write('{"event": "stage_fini')  # a writer killed in the middle of its line
    assert [r["run_id"] for r in h.records()] == ["r1"]
    h.append({"event": "run_finished", "candidate": "c.py", "run_id": "r2", "message": "x" * 100_000})
    lines = h.path.read_text().splitlines()
    assert [json.loads(x)["run_id"] for x in lines] == ["r1", "r2"]
    assert h.path.read_bytes().endswith(b"\n")
