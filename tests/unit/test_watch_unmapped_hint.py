"""The "is not mapped" hint: never for a helper a candidate imports (even one
created after the candidate, or named by a candidate that does not parse
yet), and taken back from the dashboard once the file is mapped."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemswatch.watch.config import load_config
from gemswatch.watch.dashboard import DashboardState
from gemswatch.watch.devices import DeviceInfo
from gemswatch.watch.events import EventBus
from gemswatch.watch.filters import Change
from gemswatch.watch.session import Session
from gemswatch.watch.stage import StageResult
from gemswatch.watch.status import PASSED
from _fake_stages import FunctionStages

CONFIG = """\
watch: cands
benchmark: never
candidates:
  "softmax_v?.py":
    softmax: my_softmax
operators:
  softmax:
    tests: tests/test_softmax.py
"""


@pytest.fixture
def proj(tmp_path):
    (tmp_path / "cands").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_softmax.py").write_text("")
    (tmp_path / "config.yaml").write_text(CONFIG)
    return tmp_path


def start(root: Path, notes: list[str]) -> tuple[Session, list[dict]]:
    events: list[dict] = []
    bus = EventBus()
    bus.subscribe(events.append)
    cfg = load_config(root / "config.yaml")
    session = Session(cfg, DeviceInfo("cpu"), bus, jobs=1, notify=notes.append,
                      stages=FunctionStages(lambda run, stage, device: StageResult(stage, PASSED)))
    return session, events


def test_a_helper_created_after_the_candidate_that_imports_it_is_no_unmapped_file(proj):
    cand = proj / "cands" / "softmax_v2.py"
    cand.write_text("from _tiles import BLOCK\ndef my_softmax(x):\n    return x\n")  # the helper does not exist yet
    notes: list[str] = []
    s, events = start(proj, notes)
    helper = proj / "cands" / "_tiles.py"
    helper.write_text("BLOCK = 128\n")
    s.handle_changes([(Change.added, str(helper))])
    assert s.scheduler.wait_idle(10)
    assert notes == []
    # the candidate that imports it re-runs, as for any change of a helper
    assert [e["reason"] for e in events if e["event"] == "run_queued"] == ["changed cands/_tiles.py"]
    s.stop()


def test_a_helper_named_by_a_candidate_that_does_not_parse_yet_is_no_unmapped_file(proj):
    (proj / "cands" / "softmax_v2.py").write_text("from . import _tiles\ndef my_softmax(x:\n")  # mid-edit
    notes: list[str] = []
    s, _ = start(proj, notes)
    helper = proj / "cands" / "_tiles.py"
    helper.write_text("BLOCK = 128\n")
    s.handle_changes([(Change.added, str(helper))])
    assert notes == []
    scratch = proj / "cands" / "scratch.py"
    scratch.write_text("")
    s.handle_changes([(Change.added, str(scratch))])
    assert len(notes) == 1 and notes[0].startswith("cands/scratch.py is not mapped")
    s.stop()


def test_the_hint_leaves_the_dashboard_once_the_file_is_mapped(proj):
    (proj / "cands" / "softmax_v2.py").write_text("def my_softmax(x):\n    return x\n")
    notes: list[str] = []
    s, _ = start(proj, notes)
    new = proj / "cands" / "softmax_fast.py"
    new.write_text("def my_softmax(x):\n    return x\n")
    s.handle_changes([(Change.added, str(new))])
    [hint] = notes
    assert hint.about == "cands/softmax_fast.py"  # a str that names its file
    st = DashboardState()
    st.note(hint)
    st.note("config.yaml reloaded")
    assert any("is not mapped" in line for line in st.notes)
    (proj / "config.yaml").write_text(CONFIG.replace('"softmax_v?.py"', '"softmax_*.py"'))
    assert s.reload_config()
    st.set_candidates([(c.rel, c.ops) for c in s.candidates()])  # what the dashboard does on a reload
    assert [line for line in st.notes] == ["config.yaml reloaded"]
    # unmapped again: hinted again
    (proj / "config.yaml").write_text(CONFIG)
    assert s.reload_config()
    s.handle_changes([(Change.modified, str(new))])
    assert [n for n in notes if "is not mapped" in n] == [hint, hint]
    s.stop()
