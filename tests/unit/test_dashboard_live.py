"""The live view draws on the alternate screen and leaves it however it
ends (the end, an exception, Ctrl-C), and steps aside for a pager. A
console on a StringIO that claims to be a terminal records the escape
codes; each test runs a few frames (well under a second)."""

from __future__ import annotations

import io
import threading

import pytest
from rich.console import Console

from gemswatch.watch.dashboard import DashboardState, LiveView
from gemswatch.watch.dashboard import live as live_module

ENTER, LEAVE = "\x1b[?1049h", "\x1b[?1049l"


def terminal() -> Console:
    return Console(file=io.StringIO(), width=80, height=24, force_terminal=True, color_system=None)


def state() -> DashboardState:
    st = DashboardState(watch="candidates/")
    st.set_candidates([("candidates/softmax_v2.py", ["softmax"])])
    return st


def run_until(view: LiveView, stop: threading.Event) -> threading.Thread:
    t = threading.Thread(target=view.run, args=(stop,), daemon=True)
    t.start()
    return t


def test_the_dashboard_is_drawn_on_the_alternate_screen_and_leaves_it_at_the_end():
    console = terminal()
    stop = threading.Event()
    stop_soon = threading.Timer(0.1, stop.set)
    stop_soon.start()
    LiveView(state(), console, refresh_per_second=50).run(stop)
    out = console.file.getvalue()
    assert out.index(ENTER) < out.index("softmax_v2.py") < out.rindex(LEAVE)
    assert out.count(ENTER) == out.count(LEAVE) == 1


def test_an_exception_while_drawing_still_leaves_the_alternate_screen(monkeypatch):
    console = terminal()
    view = LiveView(state(), console, refresh_per_second=50)
    frames = iter([None])

    def render_once_then_fail(st):
        if next(frames, "done") == "done":
            raise RuntimeError("a bug in a renderer")
        return "first frame"

    monkeypatch.setattr(live_module, "render", render_once_then_fail)
    view.state.version += 1
    with pytest.raises(RuntimeError, match="a bug in a renderer"):
        view.run(threading.Event())
    out = console.file.getvalue()
    assert ENTER in out and out.rindex(LEAVE) > out.index(ENTER)


def test_ctrl_c_still_leaves_the_alternate_screen():
    console = terminal()

    class Interrupted(threading.Event):
        def wait(self, timeout=None):  # Ctrl-C arrives while the view waits for its next frame
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        LiveView(state(), console).run(Interrupted())
    out = console.file.getvalue()
    assert out.rindex(LEAVE) > out.index(ENTER)


def test_a_pager_gets_the_normal_screen_and_the_dashboard_comes_back_after():
    console = terminal()
    view = LiveView(state(), console, refresh_per_second=50)
    stop = threading.Event()
    t = run_until(view, stop)
    try:
        for _ in range(100):  # the view is drawing
            if ENTER in console.file.getvalue():
                break
            threading.Event().wait(0.01)
        with view.suspended():
            during = console.file.getvalue()
            assert during.count(ENTER) == during.count(LEAVE) == 1  # left, for the pager
        for _ in range(100):
            if console.file.getvalue().count(ENTER) == 2:
                break
            threading.Event().wait(0.01)
        assert console.file.getvalue().count(ENTER) == 2  # back on the alternate screen
    finally:
        stop.set()
        t.join(2)
    out = console.file.getvalue()
    assert out.count(LEAVE) == 2 and out.rindex(LEAVE) > out.rindex(ENTER)


def test_suspending_a_view_that_is_not_drawing_does_nothing():
    view = LiveView(state(), terminal())
    with view.suspended():
        pass
    assert view.console.file.getvalue() == ""
