"""Warm start in the loop: ``--cold`` and the ``warm`` field of stage
events, through real ``gemswatch run`` processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _e2e_helpers import write_files
from test_watch_e2e import CONFIG, FILES, events, finished, gemswatch

# -- the CLI ------------------------------------------------------------------------


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    write_files(tmp_path, FILES)
    (tmp_path / "config.yaml").write_text(CONFIG + "preload: [fakeops, torch, pytest]\n")
    return tmp_path


def test_stage_events_say_warm_and_cold_is_one_flag_away(proj):
    r = gemswatch(proj, "run", "cands/good.py", "cands/wrong.py", "--json")
    assert r.returncode == 1, r.stderr
    evs = events(r.stdout)
    assert all(e["warm"] is True for e in evs if e["event"] in ("stage_started", "stage_finished"))
    assert {e["candidate"]: e["status"] for e in evs if e["event"] == "run_finished"} == {
        "cands/good.py": "passed",
        "cands/wrong.py": "failed",
    }
    history = [json.loads(x) for x in (proj / ".gemswatch" / "history.jsonl").read_text().splitlines()]
    assert all(h["warm"] is True for h in history if h["event"] == "stage_finished")

    r = gemswatch(proj, "run", "cands/good.py", "--json", "--cold")
    assert r.returncode == 0, r.stderr
    assert all(e["warm"] is False for e in finished(events(r.stdout)))
    assert "stages start warm (forked from a pool that preloads fakeops, torch, pytest)" in gemswatch(proj, "list").stdout
    assert "stages start cold" in gemswatch(proj, "list", "--cold").stdout


def test_a_pool_that_cannot_start_is_reported_and_stages_run_cold(proj):
    cfg = proj / "config.yaml"
    cfg.write_text(cfg.read_text().replace("preload: [fakeops, torch, pytest]", "preload: [fakeops, no_such_module_xyz]"))
    r = gemswatch(proj, "run", "cands/good.py", "--json")
    assert r.returncode == 0, r.stderr
    assert all(e["warm"] is False for e in finished(events(r.stdout)))
    assert "warm start unavailable: preload no_such_module_xyz: ModuleNotFoundError" in r.stderr
    assert "stages start cold" in r.stderr
