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


# -- gemswatch new --------------------------------------------------------------

MODULE = '''\
"""A family module."""

from __future__ import annotations

import torch

from . import _launch
from .._device import interpreted
from ..ops.helpers import thing

__all__ = ["softmax", "log_softmax"]


def _impl(x, log):
    return torch.softmax(x, -1)


def softmax(x, dim=-1):
    """softmax."""
    return _impl(x, False)


def log_softmax(x, dim=-1):
    y = softmax(x)  # uses softmax
    return y.log()
'''


def test_make_candidate_source():
    src = make_candidate_source(MODULE, "gemswatch.gems.ops", "softmax", "my_softmax", "gemswatch.gems.ops.softmax")
    assert "from gemswatch.gems.ops import _launch" in src
    assert "from gemswatch.gems._device import interpreted" in src
    assert "from gemswatch.gems.ops.helpers import thing" in src
    assert "def my_softmax(x, dim=-1):" in src
    assert "y = my_softmax(x)" in src
    assert "torch.softmax(x, -1)" in src  # attributes keep their names
    assert "def log_softmax" in src
    compile(src, "cand.py", "exec")
    assert src.splitlines()[0].startswith("# Candidate for `softmax`")



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
