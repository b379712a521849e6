"""`gemswatch history OP --svg FILE`: one line per candidate, one bar per case of the best variant."""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET

from gemswatch.watch.commands.reports import cmd_history
from gemswatch.watch.history import History
from gemswatch.watch.history_plot import plot_data, render_svg

SVG = "{http://www.w3.org/2000/svg}"


def stage(run, cand, sha, name, status, t, speedup=None, per_case=None):
    rec = {"event": "stage_finished", "run_id": run, "candidate": cand, "content_sha256": sha * 32,
           "operators": ["softmax"], "stage": name, "status": status, "time": t}
    if name == "benchmark":
        rec.update(speedup=speedup, speedups={"softmax": speedup}, per_case=per_case or [])
    return rec


def save(run, cand, sha, t, speedup, per_case=None):
    return [stage(run, cand, sha, "correctness", "passed", t),
            stage(run, cand, sha, "benchmark", "passed", t + "1", speedup, per_case)]


BEST_CASES = [{"case": "c1", "operator": "softmax", "label": "float32 x=[4, 123]", "speedup": 0.05},
              {"case": "c2", "operator": "softmax", "label": "float16 x=[1, 5]", "speedup": 3.0}]
RECORDS = (save("r1", "cands/a.py", "a1", "2026-01-01T10:00:0", 1.2)
           + save("r2", "cands/b.py", "b1", "2026-01-01T10:01:0", 0.3)
           + save("r3", "cands/a.py", "a2", "2026-01-01T10:02:0", 2.5, BEST_CASES)
           + [stage("r4", "cands/n.py", "c1", "correctness", "passed", "2026-01-01T10:03:00")])


def test_plot_data_has_a_series_per_candidate_and_the_best_variants_cases():
    data = plot_data(RECORDS, "softmax")
    assert {c: [p.speedup for p in pts] for c, pts in data.series.items()} == {"cands/a.py": [1.2, 2.5],
                                                                              "cands/b.py": [0.3]}
    assert data.best.startswith("cands/a.py a2a2")
    assert data.cases == [("float32 x=[4, 123]", 0.05), ("float16 x=[1, 5]", 3.0)]  # worst first


def test_history_svg_is_a_valid_picture_with_one_series_per_candidate(tmp_path, capsys):
    for rel, text in {
        "cands/a.py": "def f(x):\n    return x\n",
        "tests/test_softmax.py": "def test_x():\n    pass\n",
        "benchmark/test_perf.py": "def test_softmax():\n    pass\n",
        "config.yaml": ("watch: cands\ncandidates:\n  '*.py':\n    softmax: f\n"
                        "operators:\n  softmax:\n    tests: [tests/test_softmax.py]\n"
                        "    benchmark: benchmark/test_perf.py::test_softmax\n"),
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    hist = History(tmp_path / ".gemswatch")
    for rec in RECORDS:
        hist.append(rec)
    out = tmp_path / "plot.svg"
    args = argparse.Namespace(target="softmax", limit=30, svg=str(out), png=None,
                              config=str(tmp_path / "config.yaml"), json=False)
    assert cmd_history(args) == 0
    root = ET.parse(out).getroot()  # well-formed XML
    assert root.tag == SVG + "svg"
    series = [g for g in root.iter(SVG + "g") if g.get("class") == "series"]
    assert sorted(g.get("data-candidate") for g in series) == ["cands/a.py", "cands/b.py"]
    assert [len(list(g.iter(SVG + "circle"))) for g in sorted(series, key=lambda g: g.get("data-candidate"))] == [2, 1]
    (bars,) = [g for g in root.iter(SVG + "g") if g.get("class") == "cases"]
    assert len(list(bars.iter(SVG + "rect"))) == 2
    assert "2 candidate(s)" in capsys.readouterr().out

    args.target = "cands/a.py"  # a file, not an operator
    assert cmd_history(args) == 2
    assert "give one of softmax" in capsys.readouterr().err


def test_an_operator_without_benchmarks_still_draws():
    root = ET.fromstring(render_svg(plot_data(RECORDS[-1:], "softmax")))
    assert "no passing benchmark" in "".join(root.itertext())
