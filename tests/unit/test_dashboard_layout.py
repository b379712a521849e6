"""The candidates table reads at 80, 100 and 160 columns: no header or word
broken across lines, columns dropped in a fixed order, a narrow speedup
column, and nothing wider than the screen."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gemswatch.watch.dashboard import DashboardState, render
from gemswatch.watch.dashboard.columns import COLUMNS, GAP, plan_columns
from gemswatch.watch.dashboard.table import pack

SOFTMAX, RMS = "candidates/softmax_v2.py", "candidates/rms_norm_v2.py"


def ev(event, cand, **kw):
    ops = ["softmax", "log_softmax"] if cand == SOFTMAX else ["rms_norm"]
    return {"event": event, "time": "2026-01-01T10:15:42.000+00:00", "candidate": cand, "run_id": f"r-{cand}",
            "operators": ops, "content_sha256": "ab" * 32, **kw}


def state() -> DashboardState:
    st = DashboardState(watch="candidates/", project="/home/me/gemswatch", device="cuda: NVIDIA H200 (1 GPU)")
    st.set_candidates([(SOFTMAX, ["softmax", "log_softmax"]), (RMS, ["rms_norm"])])
    for cand in (SOFTMAX, RMS):
        st.apply(ev("run_queued", cand, stages=["preflight", "correctness", "benchmark"]))
        st.apply(ev("stage_finished", cand, stage="preflight", status="passed", duration_s=2.9,
                    cases={"passed": 8, "failed": 0, "skipped": 0, "total": 8}, candidate_calls={"softmax": 8}))
    st.apply(ev("stage_finished", RMS, stage="correctness", status="all_skipped", duration_s=6.1, seed=4294967295,
                cases={"passed": 62, "failed": 0, "skipped": 5, "total": 67}, candidate_calls={"softmax": 388}))
    st.apply(ev("stage_finished", RMS, stage="benchmark", status="superseded"))
    st.apply(ev("stage_finished", SOFTMAX, stage="correctness", status="passed", duration_s=4.0,
                cases={"passed": 20, "failed": 0, "skipped": 0, "total": 20}, candidate_calls={"softmax": 90}))
    st.apply(ev("stage_finished", SOFTMAX, stage="benchmark", status="passed", duration_s=41.0, speedup=1.32,
                speedup_prev=1.2, per_case=[{"case": "a", "speedup": 0.15}, {"case": "b", "speedup": 2.0}],
                cases={"passed": 2, "failed": 0, "skipped": 0, "total": 2}))
    return st


def export(width: int, st: DashboardState | None = None) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(render(st or state()))
    return console.export_text()


def header_line(text: str) -> str:
    return next(line for line in text.splitlines() if "speedup" in line)


@pytest.mark.parametrize("width", [80, 100, 160])
def test_headers_and_words_are_never_broken_and_nothing_is_wider_than_the_screen(width):
    out = export(width)
    assert max(len(line) for line in out.splitlines()) <= width
    head = header_line(out).split()
    for word in ("preflight", "correctness", "benchmark", "speedup", "candidate"):
        assert word in head, (word, head)  # whole, not wrapped as `correctne` / `ss`
    words = out.split()
    for word in ("all_skipped", "superseded", "62/67", "(5", "skipped)", "4294967295", "8/8", "+10.0%", "0.15x"):
        assert word in words, (word, out)
    assert "seed 4294967295" in out  # the seed and its label stay on one line


def test_at_80_columns_operators_and_last_run_go_first_and_at_100_they_are_back():
    narrow, medium, wide = export(80), export(100), export(160)
    assert "operators" not in header_line(narrow) and "last run" not in header_line(narrow)
    assert "log_softmax" not in narrow
    for text in (medium, wide):
        assert "operators" in header_line(text) and "last run" in header_line(text)
        assert "log_softmax" in text and "10:15:42" in text


@pytest.mark.parametrize("width", [60, 72, 80, 100, 130, 160, 240])
def test_the_plan_fits_the_width_and_the_speedup_column_stays_narrow(width):
    plan = plan_columns(width)
    assert sum(c.width for c in plan) + GAP * (len(plan) - 1) <= max(width, 60)
    speedup = next(c for c in plan if c.key == "speedup")
    assert speedup.width <= 11
    for col in plan:
        assert len(col.header) <= col.width  # a header is abbreviated, never wrapped
    if width >= 80:
        assert [c.key for c in plan][:2] == ["mark", "candidate"]
        assert {"preflight", "correctness", "benchmark", "speedup"} <= {c.key for c in plan}
    if width >= 100:
        assert [c.key for c in plan] == [c.key for c in COLUMNS]


def test_a_narrower_screen_abbreviates_headers_rather_than_wrapping_them():
    plan = {c.key: c for c in plan_columns(48)}
    assert plan["preflight"].header == "pre" and plan["correctness"].header == "correct"


def test_cell_details_break_between_bits_and_a_remark_stays_with_its_count():
    assert pack(["62/67", "(5 skipped)", "388 calls", "6.1s"], 20) == ["62/67 (5 skipped)", "388 calls · 6.1s"]
    assert pack(["62/67", "(5 skipped)", "388 calls"], 12) == ["62/67", "(5 skipped)", "388 calls"]
    assert pack(["earlier abababab"], 11) == ["earlier", "abababab"]


def test_per_case_baselines_show_where_there_is_room_and_are_named_where_not():
    st = state()
    row = st.rows[SOFTMAX]
    row.per_case = [
        {"case": "a", "label": "float16 x=[4096, 4096]", "speedup": 0.5, "latency_ms": 2.0, "base_ms": 1.0,
         "compile_ms": 0.4, "speedup_compile": 0.2, "headline_speedup": 0.2, "headline_vs": "best",
         "determinism": "PASS", "gbps": 812.0, "prev": 0.4},
        {"case": "b", "label": "float32 x=[8, 8]", "speedup": 2.0, "speedup_compile": None, "headline_vs": "eager"},
    ]
    while st.selected_candidate() != SOFTMAX:
        st.select(1)
    wide, narrow = export(160, st), export(80, st)
    for header in ("eager", "compile", "vs eager", "vs compile", "GB/s", "determinism"):
        assert header in wide, header
    assert "400.0 us" in wide and "PASS" in wide and "-50.0%" in wide  # the change is of the headline ratio
    assert "not shown at this width:" in " ".join(narrow.split())
    assert max(len(line) for line in narrow.splitlines()) <= 80
