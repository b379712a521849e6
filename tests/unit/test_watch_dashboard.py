"""Dashboard: the event reducer and render(state) on a fixed-width console."""

from __future__ import annotations

import io

from rich.console import Console

from gemswatch.watch.dashboard import DashboardState, render, render_summary
from gemswatch.watch.events import format_plain
from gemswatch.watch.keys import decode_keys

CAND = "candidates/softmax_v2.py"


def screen(renderable, width=140) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, force_terminal=False, legacy_windows=False)
    console.print(renderable)
    return console.file.getvalue()


def ev(event, **kw):
    base = {"event": event, "time": "2025-01-01T12:34:56.000+00:00", "candidate": CAND, "run_id": "r1", "operators": ["softmax"], "content_sha256": "ab" * 32}
    base.update(kw)
    return base


def finished(stage, status, **kw):
    fields = dict(exit_code=0, duration_s=2.5, cases={"passed": 12, "failed": 0, "skipped": 0, "total": 12}, candidate_calls={"softmax": 48}, speedup=None, message="")
    fields.update(kw)
    return ev("stage_finished", stage=stage, status=status, **fields)


def state_with_rows() -> DashboardState:
    st = DashboardState(watch="candidates/", project="/p", device="cpu (Triton interpreter)", jobs=2, benchmark="manual")
    st.set_candidates([(CAND, ["softmax"]), ("candidates/rms_norm_v2.py", ["rms_norm"])])
    return st


def test_running_row_shows_elapsed_time():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["preflight", "correctness"]), now=10.0)
    st.apply(ev("stage_started", stage="preflight"), now=10.0)
    st.now = 13.25
    out = screen(render(st))
    assert "gemswatch watching candidates/" in out
    assert "jobs 2" in out and "cpu (Triton interpreter)" in out
    assert "running" in out and "3.2s" in out
    assert "queued" in out
    assert "rms_norm_v2.py" in out


def test_finished_cells_counts_calls_speedup_and_change():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["preflight", "correctness", "benchmark"]))
    st.apply(finished("preflight", "passed"))
    st.apply(finished("correctness", "passed"))
    st.apply(finished("benchmark", "passed", speedup=1.32, speedup_prev=1.2))
    out = screen(render(st))
    assert out.count("passed") >= 3
    assert "12/12" in out and "48 calls" in out and "2.5s" in out
    assert "1.32x" in out and "+10.0%" in out
    assert "12:34:56" in out


def test_failure_detail_pane():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["preflight", "correctness"]))
    st.apply(finished("preflight", "passed"))
    st.apply(
        finished(
            "correctness",
            "failed",
            message="tests/test_softmax.py::test_x[fp16]: max abs err 0.5",
            first_failure="tests/test_softmax.py::test_x[fp16]",
            log="/p/.gemswatch/runs/r1/correctness.log",
            log_tail="gemswatch: candidate sandbox: Landlock ABI 7, writes only to /tmp/x\n"
                     "E   AssertionError: max abs err 0.5\nFAILED tests/test_softmax.py::test_x[fp16]\n"
                     "gemswatch: candidate calls: 3, 0.20 s of round trips (the worker says 0.18 s in the candidate)\n",
        )
    )
    out = screen(render(st))
    assert "candidate sandbox" not in out  # the log's header, not the failure
    assert "candidate calls" not in out  # nor its footer
    assert "correctness failed: tests/test_softmax.py::test_x[fp16]: max abs err 0.5" in out
    assert "first failure: tests/test_softmax.py::test_x[fp16]" in out
    assert "log: /p/.gemswatch/runs/r1/correctness.log" in out
    assert "E   AssertionError" in out
    # fixing it clears the pane
    st.apply(ev("run_queued", run_id="r2", stages=["preflight", "correctness"]))
    st.apply(finished("correctness", "passed", run_id="r2"))
    assert "first failure" not in screen(render(st))


def test_events_of_an_old_run_do_not_overwrite_the_new_one():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["preflight"]))
    st.apply(ev("run_queued", run_id="r2", stages=["preflight"]))
    st.apply(finished("preflight", "superseded"))  # late event of r1
    st.apply(ev("run_finished", status="superseded"))
    assert st.rows[CAND].cells["preflight"].status == "queued"


def test_superseded_run_marks_its_cells():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["preflight", "correctness"]))
    st.apply(ev("stage_started", stage="preflight"))
    st.apply(ev("run_finished", status="superseded"))
    assert [c.status for c in st.rows[CAND].cells.values()] == ["superseded", "superseded"]


def test_config_error_banner_and_notes():
    st = state_with_rows()
    st.apply({"event": "config_error", "errors_text": ["config.yaml:3: jobs: expected auto or a positive integer, got 'x'; write `jobs: 2`"]})
    st.notes.append("candidates/x.py is not mapped: add it to config.yaml under `candidates:`")
    out = screen(render(st))
    assert "keeping the last good config" in out
    assert "config.yaml:3: jobs" in out
    assert "is not mapped" in out


def test_stale_rows_from_history():
    st = state_with_rows()
    last = {CAND: {"correctness": finished("correctness", "passed")}}
    st.load_history(last, {CAND: "ff" * 32})
    out = screen(render(st))
    assert "stale" in out and "passed" in out
    st2 = state_with_rows()
    st2.load_history(last, {CAND: "ab" * 32})
    assert "stale" not in screen(render(st2))


def test_selection_moves_and_wraps():
    st = state_with_rows()
    assert st.selected_candidate() is None
    st.select(1)
    assert st.selected_candidate() == "candidates/rms_norm_v2.py"  # rows are sorted
    st.select(1)
    assert st.selected_candidate() == CAND
    st.select(-1)
    assert st.selected_candidate() == "candidates/rms_norm_v2.py"
    assert ">" in screen(render(st))


def test_empty_state_says_what_to_do():
    out = screen(render(DashboardState(watch="c/")))
    assert "no mapped candidates" in out


def test_narrow_console_still_renders():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["preflight"]))
    assert "softmax" in screen(render(st), width=60)


def test_summary_table():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["preflight", "correctness"]))
    st.apply(finished("preflight", "passed"))
    st.apply(finished("correctness", "uncalled"))
    out = screen(render_summary(st))
    assert "gemswatch summary" in out and "uncalled" in out


def test_plain_line():
    line = format_plain(finished("correctness", "failed", message="t::a: boom", log="/x.log"))
    assert line == "12:34:56 candidates/softmax_v2.py correctness: FAILED (12 passed, 48 calls, 2.5s) - t::a: boom"
    assert format_plain(ev("stage_started", stage="preflight")) is None
    assert "log: /x.log" in format_plain(finished("correctness", "failed", log="/x.log"), verbose=True)


def test_decode_keys():
    assert decode_keys("r\x1b[A\x1b[Bq\x03") == ["r", "up", "down", "q", "ctrl-c"]
    assert decode_keys("\x1b[1;5Cf") == ["f"]


def test_a_new_save_clears_stages_it_does_not_run_and_dims_an_old_speedup():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["preflight", "correctness", "benchmark"]))
    st.apply(finished("benchmark", "passed", speedup=1.5))
    assert "1.50x" in screen(render(st))
    # a benchmark-only run of the same bytes keeps the other cells
    st.apply(finished("correctness", "passed"))
    st.apply(ev("run_queued", run_id="r2", stages=["benchmark"]))
    assert st.rows[CAND].cells["correctness"].status == "passed"
    # new bytes without a benchmark: the old benchmark cell goes, its speedup is marked earlier
    st.apply(ev("run_queued", run_id="r3", stages=["preflight", "correctness"], content_sha256="cd" * 32))
    assert "benchmark" not in st.rows[CAND].cells
    out = screen(render(st))
    assert "earlier" in out and "abababab" in out.split("earlier", 1)[1]  # within the narrow speedup column


def test_the_correctness_cell_and_line_name_the_seed_that_replays_it():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["preflight", "correctness"]))
    st.apply(finished("correctness", "failed", seed=4242, message="t::a: boom"))
    assert "seed 4242" in screen(render(st))
    assert "seed 4242" in format_plain(finished("correctness", "passed", seed=4242))
    assert "seed" not in format_plain(finished("preflight", "passed"))


def test_a_good_reload_clears_the_config_error_panel():
    st = state_with_rows()
    st.apply({"event": "config_error", "errors_text": ["config.yaml:2: benchmark: bad value; use never|manual|auto"]})
    assert "config.yaml error" in screen(render(st))
    st.apply({"event": "config_reloaded", "config": "/p/config.yaml"})
    assert "config.yaml error" not in screen(render(st))


def test_skips_read_as_skips_and_their_reasons_are_one_key_away():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["preflight", "correctness"]))
    st.apply(finished("correctness", "passed", cases={"passed": 62, "failed": 0, "skipped": 5, "total": 67},
                      skips={"gems_impl: behaviour of the gems kernel": 4, "needs a GPU": 1}))
    out = screen(render(st))
    assert "62/67 (5 skipped)" in out and "needs a GPU" not in out
    while st.selected_candidate() != CAND:  # the row is selected: the reasons show
        st.select(1)
    out = screen(render(st))
    assert "correctness: 5 of 67 skipped" in out and "4 x gems_impl: behaviour of the gems kernel" in out
    assert "1 x needs a GPU" in out


def test_a_large_slowdown_keeps_its_digits_and_its_change():
    from gemswatch.watch.stage.result import StageResult

    fields = StageResult("benchmark", "passed", speedup=1 / 150, speedups={"softmax": 1 / 150}).event_fields()
    assert fields["speedup"] == fields["speedups"]["softmax"] == 1 / 150  # stored unrounded
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["benchmark"]))
    st.apply(finished("benchmark", "passed", speedup=0.077, speedup_prev=1.0))
    out = screen(render(st))
    assert "0.077x" in out and "-92.3%" in out


def test_the_selected_row_shows_its_benchmark_cases_worst_first_with_their_change():
    per_case = [
        {"case": "c1", "label": "float16 x=[4096, 4096] dim=0", "latency_ms": 2.0, "base_ms": 0.3, "speedup": 0.15,
         "pct_of_copy": 4.0, "tflops": None, "prev": 1.5},
        {"case": "c2", "label": "float32 x=[1024, 1024] dim=-1", "latency_ms": 0.005, "base_ms": 0.0077, "speedup": 1.54,
         "pct_of_copy": 71.0, "tflops": None, "prev": None},
    ]
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["benchmark"]))
    st.apply(finished("benchmark", "passed", speedup=0.48, speedup_prev=1.2, per_case=per_case))
    out = screen(render(st))
    assert "worst 0.15x" in out and "benchmark cases" not in out  # the row: geomean and worst case
    while st.selected_candidate() != CAND:
        st.select(1)
    out = screen(render(st), width=160)
    assert "benchmark cases, worst first" in out
    first, second = out.index("float16 x=[4096, 4096] dim=0"), out.index("float32 x=[1024, 1024] dim=-1")
    assert first < second
    assert "2.00 ms" in out and "300.0 us" in out and "-90.0%" in out and "4% copy" in out and "5.0 us" in out


def test_the_per_case_rows_are_the_candidates_cases_worst_first():
    from gemswatch.watch.stage.verdict import per_case_rows

    rows = per_case_rows([
        {"case_id": "a", "dtype": "float16", "shape": {"x": [8, 8]}, "params": {"dim": -1}, "latency": 0.2,
         "latency_base": 0.1, "speedup": 0.5, "candidate_source": "override"},
        {"case_id": "b", "dtype": "float16", "shape": {"x": [8, 8]}, "params": {}, "latency": 0.1,
         "latency_base": 0.2, "speedup": 2.0, "candidate_source": "override"},
        {"case_id": "c", "speedup": 9.0, "candidate_source": None},  # not the candidate's
    ])
    assert [r["case"] for r in rows] == ["a", "b"] and rows[0]["label"] == "float16 x=[8, 8] dim=-1"


def test_a_benchmark_that_did_not_run_says_why_on_its_cell():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["preflight", "correctness", "benchmark"]))
    st.apply(finished("preflight", "passed"))
    st.apply(finished("correctness", "failed", cases={"passed": 9, "failed": 3, "skipped": 0, "total": 12}))
    st.apply(finished("benchmark", "not_run", duration_s=0.0, cases={}, candidate_calls={},
                      message="benchmark not run: correctness failed"))
    for width in (160, 80):
        lines = screen(render(st), width=width).splitlines()
        row = next(i for i, line in enumerate(lines) if "not_run" in line)
        col = lines[row].index("not_run")
        assert lines[row + 1][col:].startswith("correctness"), lines[row:row + 3]  # under it, in its column


def test_the_row_and_the_stage_line_show_the_headline_ratio_with_its_baseline():
    # Under the CPU interpreter the ratio against torch eager (0.0007x) says
    # nothing; the one against the interpreted gems kernel is the headline.
    from gemswatch.watch.events import format_plain

    st = state_with_rows()
    st.apply(ev("run_queued", stages=["benchmark"]))
    record = finished("benchmark", "passed", speedup=0.0007, speedup_prev=None, headline_speedup=1.46, headline_vs="gems")
    st.apply(record)
    out = screen(render(st))
    assert "1.46x" in out and "0.0007" not in out
    assert "1.46x vs gems" in format_plain(record)


def test_the_rows_worst_case_is_judged_by_the_same_headline_as_the_row():
    st = state_with_rows()
    st.apply(ev("run_queued", stages=["benchmark"]))
    per_case = [
        {"case": "a", "speedup": 0.004, "headline_speedup": 0.7, "headline_vs": "gems"},
        {"case": "b", "speedup": 0.006, "headline_speedup": 1.3, "headline_vs": "gems"},
    ]
    st.apply(finished("benchmark", "passed", speedup=0.005, headline_speedup=0.95, headline_vs="gems", per_case=per_case))
    out = screen(render(st), width=160)
    assert "0.95x" in out and "vs gems" in out and "worst 0.7x" in out and "0.004" not in out
