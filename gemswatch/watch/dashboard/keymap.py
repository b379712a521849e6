"""The dashboard's keys: one table of bindings (the help overlay lists it)
and :func:`handle_key`, which changes the screen's state itself and asks
:class:`Actions` for everything else (runs, quitting, opening a log)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .detail import PANE_LINES, pane_lines
from .state import DashboardState

__all__ = ["Binding", "BINDINGS", "Actions", "handle_key", "SCROLL_STEP"]

SCROLL_STEP = 5  # lines a page key moves the detail pane


@dataclass(frozen=True)
class Binding:
    keys: tuple[str, ...]  # names as keys.decode_keys gives them
    shown: str  # how the help writes the keys
    action: str
    help: str


BINDINGS: tuple[Binding, ...] = (
    Binding(("r",), "r", "rerun_all", "re-run every file"),
    Binding(("f",), "f", "rerun_failed", "re-run the files that did not pass"),
    Binding(("b",), "b", "benchmark", "benchmark the selected file (every file when none is selected)"),
    Binding(("up", "k"), "↑ k", "select_up", "select the file above"),
    Binding(("down", "j"), "↓ j", "select_down", "select the file below"),
    Binding(("pgdn", " "), "PgDn space", "scroll_down", "scroll the detail pane down"),
    Binding(("pgup",), "PgUp", "scroll_up", "scroll the detail pane up"),
    Binding(("enter", "e"), "Enter e", "expand", "expand the detail pane (all groups, the whole log tail), or collapse it"),
    Binding(("p",), "p", "profile", "profile the shown file's slowest benchmarked case (ncu, else the torch profiler)"),
    Binding(("o",), "o", "open_log", "open the shown stage's log in $PAGER (else $EDITOR, else less)"),
    Binding(("?",), "?", "help", "show or hide this help"),
    Binding(("esc",), "Esc", "close", "close the help, or collapse the detail pane"),
    Binding(("q", "ctrl-c"), "q Ctrl-C", "quit", "quit (running stages are stopped)"),
)
_BY_KEY = {key: b.action for b in BINDINGS for key in b.keys}


class Actions(Protocol):
    """What keys do beyond the screen: the session's runs, quitting, a pager."""

    def rerun_all(self) -> None: ...

    def rerun_failed(self) -> None: ...

    def benchmark(self, candidate: str | None) -> None: ...

    def quit(self) -> None: ...

    def profile(self, candidate: str) -> None:
        """Replay the candidate's slowest benchmarked case under a profiler,
        in the background; its summary arrives as status lines."""
        ...

    def open_log(self, path: str) -> None:
        """Show the log with the dashboard suspended; restore it after."""
        ...

    def say(self, text: str) -> None:
        """A status line (e.g. why a key did nothing)."""
        ...


def handle_key(key: str, state: DashboardState, actions: Actions) -> str | None:
    """Do what ``key`` is bound to; the action's name, or None when unbound.

    State changes happen under ``state.lock``; actions are called outside
    it (a pager holds the screen for as long as it runs).
    """
    action = _BY_KEY.get(key)
    if action is None:
        return None
    with state.lock:
        selected = state.selected_candidate()
        shown = state.focused()  # the row the detail pane shows
        log = state.log_to_open()
        if action == "select_up":
            state.select(-1)
        elif action == "select_down":
            state.select(1)
        elif action in ("scroll_down", "scroll_up"):
            focus = state.focused()
            row = state.rows.get(focus) if focus else None
            # the pane wraps its lines to the screen's width: count what wrapping adds
            inner = max(10, state.width - 4)
            lines = pane_lines(row, state.pane.expanded) if row is not None else []
            limit = max(0, sum(-(-len(t.plain) // inner) or 1 for t in lines) - PANE_LINES)
            state.scroll(SCROLL_STEP if action == "scroll_down" else -SCROLL_STEP, limit)
        elif action == "expand":
            state.toggle_expanded()
        elif action == "help":
            state.toggle_help()
        elif action == "close":
            state.close()
    if action == "rerun_all":
        actions.rerun_all()
    elif action == "rerun_failed":
        actions.rerun_failed()
    elif action == "benchmark":
        actions.benchmark(selected)
    elif action == "quit":
        actions.quit()
    elif action == "profile":
        if shown:
            actions.profile(shown)
        else:
            actions.say("p: select a file first (↑/↓)")
    elif action == "open_log":
        if log:
            actions.open_log(log)
        else:
            actions.say("o: no log to open yet (select a file whose stage has finished)")
    return action
