"""The failure pane: failures grouped by test and dtype, readable ids, full
lines, the seed and the coverage; keys that scroll, expand, open the log
and show the help (with a fake of the session's side)."""

from __future__ import annotations

import io
import sys

import pytest
from rich.console import Console

from gemswatch.watch.dashboard import BINDINGS, DashboardState, handle_key, render
from gemswatch.watch.dashboard.pager import open_in_pager, viewer_command

CAND = "candidates/softmax_v3.py"
LONG = ("AssertionError: 64 of 8193 elements differ; worst at index (0, 4402): got 0.034692615270614624, expected "
        "0.034623227700779406 (abs err 6.94e-05, rel err 0.002, allowed 8.19e-06) [case: softmax(x of shape (1, 8193))]")
GROUPS = [
    {"test": "test_widths", "dtype": "bfloat16", "failed": 12, "of": 20, "cases": ["test_widths[small]", "test_widths[large]"],
     "shapes": [[4, 781]], "error": "AssertionError: 3 of 3124 elements differ", "worst_case": "test_widths[small]",
     "worst_rel_err": 3e-2, "worst_abs_err": 1e-3, "worst_shape": [4, 781], "worst_index": [2, 5]},
    {"test": "test_library", "dtype": "float16", "failed": 1, "of": 3, "cases": ["test_library[float16-softmax]"],
     "shapes": [], "error": "IndexError: index 9 is out of bounds", "worst_case": "", "worst_rel_err": None},
]
COVERAGE = {"softmax": {"cases": 29, "size_class": ["large", "small", "tiny"], "dtype": ["bfloat16", "float32"],
                        "layout": ["contiguous", "padded"]}}
LOG = "/p/.gemswatch/runs/r1/correctness.log"


def failed_state(tail_lines: int = 3) -> DashboardState:
    st = DashboardState(watch="candidates/", project="/p", device="cpu")
    st.set_candidates([(CAND, ["softmax"])])
    base = {"time": "2026-01-01T10:15:42.000+00:00", "candidate": CAND, "run_id": "r1", "operators": ["softmax"],
            "content_sha256": "ab" * 32}
    st.apply({"event": "run_queued", **base, "stages": ["preflight", "correctness"]})
    tail = "\n".join(f"log line {i}" for i in range(tail_lines))
    st.apply({"event": "stage_finished", **base, "stage": "correctness", "status": "failed", "duration_s": 4.7,
              "cases": {"passed": 20, "failed": 13, "skipped": 0, "total": 33}, "candidate_calls": {"softmax": 93},
              "seed": 562546449, "message": "tests/test_softmax.py::test_widths[small]: " + LONG.split(";")[0],
              "first_failure": "tests/test_softmax.py::test_widths[dtype0]", "detail": LONG, "failure_groups": GROUPS,
              "coverage": COVERAGE, "log": LOG, "log_tail": tail})
    return st


def export(st: DashboardState, width: int, height: int = 60) -> str:
    console = Console(width=width, height=height, record=True, file=io.StringIO(), color_system=None)
    console.print(render(st))
    return console.export_text()


class FakeActions:
    """The session's side of the keys, recorded."""

    def __init__(self):
        self.calls: list[tuple] = []

    def rerun_all(self):
        self.calls.append(("rerun_all",))

    def rerun_failed(self):
        self.calls.append(("rerun_failed",))

    def benchmark(self, candidate):
        self.calls.append(("benchmark", candidate))

    def quit(self):
        self.calls.append(("quit",))

    def open_log(self, path):
        self.calls.append(("open_log", path))

    def profile(self, candidate):
        self.calls.append(("profile", candidate))

    def say(self, text):
        self.calls.append(("say", text))


def test_failures_show_grouped_by_test_and_dtype_with_the_worst_case():
    out = export(failed_state(), 160)
    assert "correctness failed: 13 of 33 cases failed" in out
    assert "test_widths · bfloat16: 12 of 20 fail, worst rel err 3.0e-02 at [4, 781]" in out
    assert "test_widths[small] (worst, index [2, 5]), test_widths[large] and 10 more" in out
    assert "test_library · float16: 1 of 3 fail" in out and "IndexError: index 9 is out of bounds" in out
    assert "test_library[float16-softmax]" in out and "dtype0" not in out.split("failed cases by test and dtype")[1]


def test_lines_use_the_whole_width_instead_of_a_cut_near_80():
    out = export(failed_state(), 240)
    assert LONG in out  # one line, whole: the pane is 240 wide
    st = failed_state()
    st.pane.expanded = True
    narrow = export(st, 80)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    joined = " ".join(line.strip(" │") for line in narrow.splitlines())
    assert LONG in " ".join(joined.split())  # wrapped at 80, not cut


def test_the_pane_names_the_seed_with_its_replay_and_the_coverage():
    out = export(failed_state(), 160)
    assert f"replay: gemswatch run --seed 562546449 {CAND}" in out
    expanded = failed_state()
    expanded.pane.expanded = True
    out = export(expanded, 160)
    assert "covered softmax: 29 cases · large small tiny · bfloat16 float32 · contiguous padded" in out
    assert f"log: {LOG} (o opens it)" in out


def test_a_passing_selected_row_shows_its_coverage():
    st = failed_state()
    base = {"time": "t", "candidate": CAND, "run_id": "r2", "operators": ["softmax"], "content_sha256": "cd" * 32}
    st.apply({"event": "run_queued", **base, "stages": ["correctness"]})
    st.apply({"event": "stage_finished", **base, "stage": "correctness", "status": "passed", "coverage": COVERAGE,
              "cases": {"passed": 33, "failed": 0, "skipped": 0, "total": 33}})
    assert "covered softmax" not in export(st, 160)  # not selected: the pane shows failures only
    st.select(1)
    assert "covered softmax: 29 cases" in export(st, 160)


def test_page_keys_scroll_the_pane_and_enter_expands_it():
    st = failed_state(tail_lines=40)
    st.width = 120  # as the live view notes the screen's width
    actions = FakeActions()
    first = export(st, 120, height=40)
    assert "lines 1-12 of" in first and "log line 39" not in first
    assert handle_key("pgdn", st, actions) == "scroll_down"
    assert "lines 6-17 of" in export(st, 120, height=40)
    for _ in range(50):
        handle_key("pgdn", st, actions)
    last = export(st, 120, height=40)
    assert "log line 39" in last  # the end can be reached, and not passed
    handle_key("pgup", st, actions)
    assert export(st, 120, height=40) != last
    handle_key("enter", st, actions)
    assert st.pane.expanded
    st.pane.scroll = 0
    tall = export(st, 120, height=80)
    assert "log line 0" in tall and "log line 39" in tall  # the whole tail, as the screen's height allows
    handle_key("esc", st, actions)
    assert not st.pane.expanded and actions.calls == []


def test_help_lists_every_key_and_esc_closes_it():
    st = failed_state()
    actions = FakeActions()
    handle_key("?", st, actions)
    out = export(st, 100)
    for b in BINDINGS:
        assert b.help in out.replace("\n", " ") or b.help[:40] in out
        assert b.shown in out
    assert "failed cases by test and dtype" not in out  # the help covers the pane
    short = export(st, 80, height=24).splitlines()
    assert len(short) <= 24 and short[-1].startswith("r rerun all")  # the whole list fits 80x24
    assert all(b.shown in "\n".join(short) for b in BINDINGS)
    handle_key("esc", st, actions)
    assert "failed cases by test and dtype" in export(st, 100)


def test_o_opens_the_failing_stages_log_and_session_keys_reach_the_session():
    st = failed_state()
    actions = FakeActions()
    assert handle_key("o", st, actions) == "open_log"
    assert actions.calls == [("open_log", LOG)]
    st.select(1)
    for key in ("r", "f", "b", "q"):
        handle_key(key, st, actions)
    assert actions.calls[1:] == [("rerun_all",), ("rerun_failed",), ("benchmark", CAND), ("quit",)]
    assert handle_key("x", st, actions) is None
    empty = DashboardState()
    handle_key("o", empty, actions)
    assert actions.calls[-1][0] == "say" and "no log" in actions.calls[-1][1]


def test_the_viewer_is_pager_then_editor_then_less():
    assert viewer_command("/l.log", {"PAGER": "less -R", "EDITOR": "vim"}) == ["less", "-R", "/l.log"]
    assert viewer_command("/l.log", {"PAGER": " ", "EDITOR": "code --wait"}) == ["code", "--wait", "/l.log"]
    assert viewer_command("/l.log", {}) == ["less", "/l.log"]


def test_open_in_pager_runs_the_viewer_on_the_log_and_says_why_it_cannot(tmp_path):
    log = tmp_path / "correctness.log"
    log.write_text("E   AssertionError\n")
    copy = tmp_path / "seen.txt"
    # a fake pager: a real process that copies the file it is given
    pager = f"{sys.executable} -c \"import shutil, sys; shutil.copy(sys.argv[1], {str(copy)!r})\""
    assert open_in_pager(str(log), {"PAGER": pager}) is None
    assert copy.read_text() == "E   AssertionError\n"
    why = open_in_pager(str(log), {"PAGER": "no-such-pager-gemswatch"})
    assert why is not None and "no-such-pager-gemswatch" in why and "$PAGER" in why
    assert "does not exist" in open_in_pager(str(tmp_path / "gone.log"), {"PAGER": pager})


@pytest.mark.parametrize("width", [80, 100, 160])
def test_the_failure_pane_fits_every_width(width):
    out = export(failed_state(), width)
    assert max(len(line) for line in out.splitlines()) <= width
    assert "12 of 20 fail" in out


def test_on_a_short_screen_the_pane_shrinks_so_the_keys_stay_in_view():
    out = export(failed_state(), 80, height=18)
    lines = out.splitlines()
    assert len(lines) <= 18 and lines[-1].startswith("r rerun all")  # a terminal would crop what is below 18
    assert "lines 1-8 of" in out
    assert "12 of 20 fail" in export(failed_state(), 80, height=40)


def test_the_screenshot_script_draws_a_failure_with_its_pane(tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "dashboard_svg.py"
    spec = importlib.util.spec_from_file_location("dashboard_svg", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for width in (80, 160):
        text = module.screen_text(width)
        assert "test_widths · float32: 2 of 5 fail" in text and max(len(ln) for ln in text.splitlines()) <= width
    module.write_svg(tmp_path / "d.svg", 80, 40)
    assert (tmp_path / "d.svg").read_text().startswith("<svg")


def test_p_profiles_the_selected_file_and_asks_for_a_selection_without_one():
    st, actions = failed_state(), FakeActions()
    assert handle_key("p", st, actions) == "profile"
    assert actions.calls == [("profile", CAND)]
    empty, actions = DashboardState(), FakeActions()
    handle_key("p", empty, actions)
    assert actions.calls and actions.calls[0][0] == "say" and "select a file" in actions.calls[0][1]


def test_a_selected_failed_row_shows_its_failure_not_the_earlier_benchmark_at_80x24():
    st = failed_state()
    st.rows[CAND].per_case = [{"case": "a", "label": "float16 x=[4, 123]", "speedup": 0.5, "latency_ms": 8.0}]
    while st.selected_candidate() != CAND:
        st.select(1)
    out = export(st, 80, 24)
    assert "correctness failed" in out and "benchmark cases" not in out
