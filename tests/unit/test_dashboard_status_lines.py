"""Status lines: repeats collapse into one line with a count, lines that
differ only in their numbers are repeats, and a line about a file goes once
that file is mapped."""

from __future__ import annotations

from gemswatch.watch.dashboard import DashboardState
from gemswatch.watch.dashboard.status_lines import StatusLines
from gemswatch.watch.notes import Note


def test_a_repeated_line_is_one_line_with_a_count():
    st = DashboardState()
    for _ in range(3):
        st.note("config.yaml reloaded")
    assert list(st.notes) == ["config.yaml reloaded (x3)"]


def test_pool_lines_that_differ_in_their_numbers_collapse_into_the_latest():
    lines = StatusLines(shown=3)
    lines.add("warm start: pool 12231 ready (3.0 s to preload torch)")
    lines.add("warm start: gemswatch/gems/ops/softmax.py changed; restarting the pool")
    lines.add("warm start: pool 12388 ready (2.9 s to preload torch)")
    lines.add("warm start: gemswatch/gems/ops/softmax.py changed; restarting the pool")
    lines.add("warm start: pool 12502 ready (3.1 s to preload torch)")
    assert list(lines) == [
        "warm start: gemswatch/gems/ops/softmax.py changed; restarting the pool (x2)",
        "warm start: pool 12502 ready (3.1 s to preload torch) (x3)",
    ]


def test_distinct_lines_keep_their_order_and_only_the_latest_few_show():
    lines = StatusLines(shown=2)
    for text in ("a.py is not mapped", "b.py is not mapped", "config.yaml reloaded"):
        lines.add(text)
    assert list(lines) == ["b.py is not mapped", "config.yaml reloaded"]
    lines.add("a.py is not mapped")  # a repeat of a line no longer shown comes back, counted
    assert list(lines) == ["config.yaml reloaded", "a.py is not mapped (x2)"]


def test_a_line_about_a_file_goes_when_the_file_is_mapped():
    st = DashboardState()
    st.note(Note("cands/new.py is not mapped: add it to config.yaml under `candidates:`", about="cands/new.py"))
    st.note("config.yaml reloaded")
    st.set_candidates([("cands/other.py", ["softmax"])])
    assert len(st.notes) == 2
    st.set_candidates([("cands/other.py", ["softmax"]), ("cands/new.py", ["softmax"])])
    assert list(st.notes) == ["config.yaml reloaded"]


def test_a_note_is_a_string_everywhere_else():
    note = Note("x.py is not mapped", about="x.py")
    assert note == "x.py is not mapped" and f"note: {note}" == "note: x.py is not mapped" and note.about == "x.py"
    assert Note("plain").about is None


def test_a_pool_note_that_the_warm_line_already_shows_is_left_out():
    st = DashboardState(warm="warm: pool 12231 ready (3.0 s to preload torch)")
    st.note("warm start: pool 12231 ready (3.0 s to preload torch)")
    assert list(st.notes) == []
    st.note("warm start: the warm pool died (exit status -9); restarting the pool")
    assert len(st.notes) == 1
