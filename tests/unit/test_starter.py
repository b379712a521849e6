"""The stage starters' shared part: the state line, notes, and giving up."""

from __future__ import annotations

import threading

import pytest

from gemswatch.watch.stage.spares import SpareStarter
from gemswatch.watch.stage.starter import StageStarter, StarterBase
from gemswatch.watch.stage.warm import WarmStarter
from gemswatch.watch.stage.warm_pool import PoolSpec


class Thing(StarterBase):
    WHAT = "things"
    FAILURES = "things failed"
    MAX_FAILURES = 3

    def __init__(self) -> None:
        self.notes: list[str] = []
        super().__init__(self.notes.append)
        self.retired = 0
        self._spec = PoolSpec.make("/py", "/proj", (), {})
        self._off = None

    def _retire_all_locked(self) -> None:
        self.retired += 1


def test_failures_turn_the_starter_off_at_the_limit_with_the_last_reason():
    t = Thing()
    with t._lock:
        assert [t._count_failure_locked(f"boom {i}") for i in (1, 2)] == [False, False]
        assert t.active and t.retired == 0 and t.notes == []
        assert t._count_failure_locked("boom 3") is True
    assert not t.active and t.retired == 1
    assert t.state == "cold: gave up after 3 things failed (last: boom 3)"
    assert t.notes == ["things unavailable: gave up after 3 things failed (last: boom 3); stages start cold"]


def test_listeners_hear_each_new_state_line_once_and_a_broken_one_stops_no_other():
    t = Thing()
    heard: list[str] = []

    def broken(text: str) -> None:
        raise RuntimeError("closed terminal")

    t.listeners += [broken, heard.append]
    t._set_state("warm: ready")
    t._set_state("warm: ready")
    with t._lock:
        t._set_off_locked("--cold", note=False)
    assert heard == ["warm: ready", "cold: --cold"] and t.notes == []


def test_only_pytest_of_the_configured_interpreter_in_its_project_is_taken():
    t = Thing()
    assert t._usable(["/py", "-m", "pytest", "-q"], "/proj")
    assert not t._usable(["/other", "-m", "pytest"], "/proj")
    assert not t._usable(["/py", "-m", "pip"], "/proj")
    assert not t._usable(["/py", "-m", "pytest"], "/elsewhere")


@pytest.mark.parametrize("make", [WarmStarter, SpareStarter])
def test_each_starter_has_the_surface_the_runner_drives(make):
    starter = make()
    for name in [n for n in StageStarter.__dict__ if not n.startswith("_")] + ["listeners"]:
        assert hasattr(starter, name), name
    assert starter.state == "cold: not configured" and not starter.active
    # Not configured: every stage starts cold, and nothing is started for it.
    assert starter.spawn(["/py", "-m", "pytest"], "/proj", {}, 1, threading.Event()) is None
    starter.shutdown()
