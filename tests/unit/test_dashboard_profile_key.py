"""`p` in the watch dashboard: the profile runs beside the loop and its
outcome comes back as status lines; a file never benchmarked gets the
command that would benchmark it."""

from __future__ import annotations

import threading

from test_watch_config import GOOD, project

from gemswatch.watch.commands.dashboard_keys import WatchActions
from gemswatch.watch.config import load_config
from gemswatch.watch.mapping import CandidateMap

class Notes:
    def __init__(self):
        self.lines: list[str] = []

    def note(self, text: str) -> None:
        self.lines.append(text)


class SessionWithoutBenchmarks:
    """What WatchActions reads of a session: its config, candidates and warm pool."""

    def __init__(self, config):
        self.config = config
        self.warm = None
        self._map = CandidateMap(config)

    def candidates(self):
        return self._map.candidates()


def _actions(tmp_path):
    out = type("Out", (), {})()
    out.notes = Notes()
    out.note = out.notes.note
    config = load_config(project(tmp_path, GOOD))
    return WatchActions(SessionWithoutBenchmarks(config), out, threading.Event()), out.notes


def _wait_for_profiles():
    for t in threading.enumerate():
        if t.name == "gemswatch-profile":
            t.join(30)


def test_a_file_never_benchmarked_is_told_how_to_get_a_case(tmp_path):
    actions, notes = _actions(tmp_path)
    actions.profile("cands/softmax_v2.py")
    _wait_for_profiles()
    assert len(notes.lines) == 1, notes.lines
    assert notes.lines[0].startswith("p: cands/softmax_v2.py has no benchmarked case in the history")
    assert "--benchmark auto" in notes.lines[0]


def test_an_unmapped_file_is_named(tmp_path):
    actions, notes = _actions(tmp_path)
    actions.profile("cands/gone.py")
    assert notes.lines == ["p: cands/gone.py is not a mapped candidate any more"]
