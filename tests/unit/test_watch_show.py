"""`gemswatch show FILE`: a file's last benchmark, its cases worst first, from the history."""

from __future__ import annotations

import argparse
import io
import json

import pytest
from rich.console import Console

from gemswatch.watch.case_table import case_rows, last_benchmark, render_case_table, shown_columns
from gemswatch.watch.cli import main
from gemswatch.watch.commands.show import cmd_show
from gemswatch.watch.history import History


def case(cid, speedup, latency=0.5, **extra):
    return {"case": cid, "operator": "softmax", "label": f"float32 x=[{cid}]", "latency_ms": latency,
            "base_ms": latency * speedup, "speedup": speedup, "pct_of_copy": None, "tflops": None, **extra}


def bench(run, t, sha, per_case, status="passed", cand="cands/a.py"):
    return {"event": "stage_finished", "run_id": run, "candidate": cand, "content_sha256": sha * 32,
            "operators": ["softmax"], "stage": "benchmark", "status": status, "time": t,
            "speedup": 1.0, "per_case": per_case}


def run_done(run, t, cand="cands/a.py"):
    return {"event": "run_finished", "run_id": run, "candidate": cand, "status": "passed", "time": t}


# Two saves of cands/a.py: the second made case "big" 13x slower and "mid" a little faster.
FIRST = [case("big", 2.0), case("mid", 1.0), case("small", 0.5)]
SECOND = [case("small", 0.5), case("mid", 1.1), case("big", 2.0 / 13)]
RECORDS = [
    bench("r1", "2026-01-01T10:00:00", "a1", FIRST), run_done("r1", "2026-01-01T10:00:01"),
    bench("r2", "2026-01-01T11:00:00", "a2", SECOND), run_done("r2", "2026-01-01T11:00:01"),
    bench("r9", "2026-01-01T12:00:00", "b1", [case("big", 9.0)], cand="cands/b.py"),
]


def test_rows_come_worst_first_with_the_change_since_the_previous_save():
    rows = case_rows(last_benchmark(RECORDS, "cands/a.py"))
    assert [r["case"] for r in rows] == ["big", "small", "mid"]
    big, small, mid = rows
    assert big["speedup"] == 2.0 / 13 and big["prev"] == 2.0
    assert big["change"] == pytest.approx(1 / 13 - 1)  # -92 %, from unrounded speedups
    assert small["change"] == 0.0 and mid["change"] == pytest.approx(0.1)


def test_the_headline_ratio_orders_the_rows_where_the_harness_gives_one():
    rec = bench("r1", "2026-01-01T10:00:00", "a1", [case("x", 3.0, headline_speedup=0.2), case("y", 0.5)])
    assert [r["case"] for r in case_rows(last_benchmark([rec], "cands/a.py"))] == ["x", "y"]


def test_a_history_line_of_the_old_per_case_name_still_reads_by_its_headline(tmp_path):
    h = History(tmp_path / ".gemswatch")
    old = bench("r1", "2026-01-01T10:00:00", "a1", [case("x", 3.0), case("y", 0.5)])
    old["per_case"][0]["speedup_headline"] = 0.2  # as gemswatch wrote a case's headline ratio before
    h.path.parent.mkdir(parents=True)
    h.path.write_text(json.dumps(old) + "\n")
    rows = case_rows(last_benchmark(list(h.records()), "cands/a.py"))
    assert [(r["case"], r.get("headline_speedup")) for r in rows] == [("x", 0.2), ("y", None)]
    assert "vs eager" in [c.header for c in shown_columns(rows)]


def test_a_failed_benchmark_is_shown_but_not_compared_against():
    failed = bench("r3", "2026-01-01T12:00:00", "a3", [case("big", 4.0)], status="failed")
    later = bench("r4", "2026-01-01T13:00:00", "a4", [case("big", 1.0)])
    pick = last_benchmark(RECORDS[:4] + [failed, later], "cands/a.py")
    assert pick.record["run_id"] == "r4" and pick.previous["run_id"] == "r2"


def test_columns_of_fields_no_row_has_are_left_out_and_missing_cells_are_blank():
    rows = case_rows(last_benchmark(RECORDS, "cands/a.py"))
    assert [c.header for c in shown_columns(rows)] == ["case", "latency", "eager", "speedup", "change", "roofline"]
    rows[0]["determinism"] = "PASS"
    rows[0]["compile_ms"] = 0.125
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(render_case_table(rows))
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if "determinism" in line)
    assert "compile" in header
    small = next(line for line in lines if "x=[small]" in line)
    assert "PASS" not in small and "125.0 us" not in small  # blank, not a made-up value


@pytest.fixture
def project(tmp_path, monkeypatch):
    for rel, text in {
        "cands/a.py": "def f(x):\n    return x\n",
        "cands/b.py": "def f(x):\n    return x\n",
        "tests/test_softmax.py": "def test_x():\n    pass\n",
        "benchmark/test_perf.py": "def test_softmax():\n    pass\n",
        "config.yaml": ("watch: cands\ncandidates:\n  a.py:\n    softmax: f\n  b.py:\n    softmax: f\n"
                        "operators:\n  softmax:\n    tests: [tests/test_softmax.py]\n"
                        "    benchmark: benchmark/test_perf.py::test_softmax\n"),
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    hist = History(tmp_path / ".gemswatch")
    for rec in RECORDS:
        hist.append(rec)
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path


def show(project, target, as_json=False):
    return cmd_show(argparse.Namespace(file=target, config=str(project / "config.yaml"), json=as_json))


def test_show_prints_the_table_of_the_last_run(project, capsys):
    assert show(project, "a.py") == 0
    out = capsys.readouterr().out
    assert "cands/a.py a2a2a2a2: benchmark passed" in out
    lines = out.splitlines()
    at = {name: i for i, line in enumerate(lines) for name in ("x=[big]", "x=[small]", "x=[mid]") if name in line}
    assert at["x=[big]"] < at["x=[small]"] < at["x=[mid]"]
    assert "0.154x" in lines[at["x=[big]"]] and "-92.3%" in lines[at["x=[big]"]]
    assert "+10.0%" in lines[at["x=[mid]"]]


def test_show_json_carries_the_rows_and_the_runs_compared(project, capsys):
    assert show(project, "cands/a.py", as_json=True) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run_id"] == "r2" and data["previous_run_id"] == "r1"
    assert [(c["case"], round(c["change"], 4)) for c in data["cases"]] == [("big", -0.9231), ("small", 0.0), ("mid", 0.1)]


def test_show_names_the_fix_for_an_unknown_file(project, capsys):
    assert show(project, "nosuch.py") == 2
    err = capsys.readouterr().err
    assert "'nosuch.py'" in err and "history.jsonl" in err


def test_show_help_lists_only_its_own_options(capsys):
    with pytest.raises(SystemExit) as e:
        main(["show", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--json" in out and "--config" in out and "--benchmark" not in out and "--jobs" not in out
