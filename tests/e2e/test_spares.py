"""Spare stages' life: a spare serves one stage and is replaced, one that
could differ from a fresh process is never used, and stopping its stage
leaves nothing behind.

The warm pool's tiny project (no torch) keeps each spare's start and every
stage well under a second; every wait has an explicit bound.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest
from _e2e_helpers import alive, wait_for, write_files
from test_warm_pool import FILES, read_pids, steady_env

from gemswatch.watch.stage.spares import SpareStarter
from gemswatch.watch.stage.supervise import run_process

PY = sys.executable


class Spares(SpareStarter):
    def __init__(self, proj: Path, per_slot: int = 1):
        self.notes: list[str] = []
        super().__init__(notify=self.notes.append, log_path=proj / ".gemswatch" / "spares.log")
        self.proj = proj
        self.configure(enabled=True, python=PY, cwd=proj, preload=("fakeconst", "pytest"), env=steady_env(),
                       per_slot=per_slot)

    def wait_ready(self, n: int = 1) -> None:
        wait_for(lambda: self.ready_count() >= n, 30, f"{n} ready spare(s) ({self.state})")

    def stage(self, test: str, *, cancel=None, env=None, timeout: float = 30):
        env = {**steady_env(), "GEMSWATCH_RUN_ID": "r", **(env or {})}
        return run_process([PY, "-m", "pytest", "-q", f"tests/{test}"], cwd=self.proj, env=env,
                           log_path=self.proj / "stage.log", timeout=timeout, cancel=cancel or threading.Event(),
                           grace=1, warm=self)


@pytest.fixture
def spares(tmp_path):
    s = Spares(write_files(tmp_path, FILES))
    yield s
    s.shutdown()


def test_a_spare_runs_one_stage_and_a_replacement_takes_its_place(spares):
    spares.wait_ready()
    first = spares.stage("test_version.py")
    assert first.returncode == 0 and first.warm, (spares.proj / "stage.log").read_text()
    assert "1 passed" in (spares.proj / "stage.log").read_text()
    spares.wait_ready()  # the replacement
    second = spares.stage("test_version.py")
    assert second.returncode == 0 and second.warm


def test_a_spare_with_a_changed_preloaded_file_is_not_used(spares):
    spares.wait_ready()
    const = spares.proj / "fakeconst.py"
    const.write_text("VERSION = 2\n")
    os.utime(const, ns=(const.stat().st_mtime_ns + 10**9,) * 2)
    out = spares.stage("test_version.py")
    assert not out.warm and out.returncode == 1  # cold: the test sees the new file (and fails on it)
    assert any("changed" in n and "replacing the spares" in n for n in spares.notes), spares.notes


def test_a_stage_for_another_gpu_starts_cold(spares):
    spares.wait_ready()
    out = spares.stage("test_version.py", env={"CUDA_VISIBLE_DEVICES": "7"})
    assert out.returncode == 0 and not out.warm
    assert spares.ready_count() == 1  # the spare is kept for a stage it fits


def test_a_change_the_watcher_sees_to_a_spares_file_replaces_it(spares):
    spares.wait_ready()
    old = {p.proc.pid for ps in spares._slots.values() for p in ps}
    spares.note_changes([spares.proj / "fakeconst.py"])
    assert any("fakeconst.py changed" in n for n in spares.notes), spares.notes
    wait_for(lambda: not any(alive(p) for p in old), 10, "the old spare to exit")
    spares.wait_ready()
    assert old.isdisjoint(p.proc.pid for ps in spares._slots.values() for p in ps)


def test_stopping_a_spares_stage_kills_everything_it_started(spares):
    spares.wait_ready()
    cancel = threading.Event()
    done: dict = {}
    t = threading.Thread(target=lambda: done.setdefault("out", spares.stage("test_spawner.py", cancel=cancel)))
    t.start()
    pids = read_pids(spares.proj)
    assert all(alive(p) for p in pids)
    cancel.set()
    t.join(15)
    assert done["out"].cancelled and done["out"].warm
    wait_for(lambda: not any(alive(p) for p in pids), 5, f"stage {pids[0]} and what it started to die")
