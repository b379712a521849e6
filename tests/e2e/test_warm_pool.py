"""The warm pool's life: no stage outlives its stop, a changed preloaded
source restarts the pool, and stages start cold when the pool cannot.

A tiny pytest project without torch keeps the pool start and every stage
well under a second; every wait has an explicit bound.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from _e2e_helpers import alive, wait_for, write_files

from gemswatch.watch.stage.supervise import live_groups, run_process
from gemswatch.watch.stage.warm import WarmStarter

PY = sys.executable

FILES = {
    "pytest.ini": """\
        [pytest]
        addopts = -p no:cacheprovider
        """,
    "fakeconst.py": """\
        VERSION = 1
        """,
    "tests/test_version.py": """\
        import fakeconst


        def test_version():
            assert fakeconst.VERSION == 1
        """,
    "tests/test_slow.py": """\
        import os
        import time


        def test_slow():
            with open("slow.pid", "w") as f:
                f.write(str(os.getpid()))
            time.sleep(1.5)
        """,
    "tests/test_spawner.py": """\
        import os
        import subprocess
        import sys
        import time


        def test_spawn_then_hang():
            exec_child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            fork_child = os.fork()
            if fork_child == 0:
                time.sleep(60)
                os._exit(0)
            with open("pids.tmp", "w") as f:
                f.write(f"{os.getpid()} {exec_child.pid} {fork_child}")
            os.replace("pids.tmp", "pids.txt")
            time.sleep(60)
        """,
}


def steady_env() -> dict[str, str]:
    """The watcher's environment (pytest's per-phase variable left out: a
    watcher's environment does not change under it)."""
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PY_COLORS": "0"}


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return write_files(tmp_path, FILES)


class Starter(WarmStarter):
    def __init__(self, proj: Path, preload=("fakeconst", "pytest")):
        self.notes: list[str] = []
        super().__init__(notify=self.notes.append, log_path=proj / ".gemswatch" / "warm.log")
        self.proj = proj
        self.configure(enabled=True, python=PY, cwd=proj, preload=preload, env=steady_env())

    def pool_pid(self, timeout: float = 30) -> int:
        def ready():
            pool = self._pool
            return pool if pool is not None and pool.ready.is_set() and not pool.error else None

        return wait_for(ready, timeout, f"a ready pool ({self.state})").proc.pid

    def stage(self, test: str, *, cancel=None, timeout: float = 30, on_start=None, warm=True):
        env = {**steady_env(), "GEMSWATCH_RUN_ID": "r"}
        return run_process(
            [PY, "-m", "pytest", "-q", f"tests/{test}"],
            cwd=self.proj,
            env=env,
            log_path=self.proj / "stage.log",
            timeout=timeout,
            cancel=cancel or threading.Event(),
            grace=1,
            on_start=on_start,
            warm=self if warm else None,
        )


@pytest.fixture
def starter(proj):
    s = Starter(proj)
    yield s
    s.shutdown()


def read_pids(proj: Path) -> list[int]:
    text = wait_for(lambda: (proj / "pids.txt").exists() and (proj / "pids.txt").read_text(), 20, "pids.txt")
    return [int(x) for x in text.split()]


def test_stopping_a_warm_stage_kills_everything_it_started(proj, starter):
    cancel = threading.Event()
    done: dict = {}
    t = threading.Thread(target=lambda: done.setdefault("out", starter.stage("test_spawner.py", cancel=cancel)))
    t.start()
    pids = read_pids(proj)
    assert all(alive(p) for p in pids)
    cancel.set()
    t.join(15)
    out = done["out"]
    assert out.cancelled and out.warm
    wait_for(lambda: not any(alive(p) for p in pids), 5, f"stage {pids[0]} and what it started to die")
    assert pids[0] not in live_groups()


def test_a_timed_out_warm_stage_leaves_nothing_behind(proj, starter):
    starter.pool_pid()
    out = starter.stage("test_spawner.py", timeout=5)
    pids = read_pids(proj)
    assert out.timed_out and out.warm
    wait_for(lambda: not any(alive(p) for p in pids), 5, "the stage's processes to die")


WATCHER = """\
import sys, threading
sys.path.insert(0, {tests!r})
from test_warm_pool import Starter
from pathlib import Path
s = Starter(Path({proj!r}))
print(s.pool_pid(), flush=True)
s.stage("test_spawner.py", timeout=60)
"""


def test_a_watcher_killed_by_sigkill_takes_its_warm_stages_along(proj):
    """The pool reads end-of-file on its control socket and kills every stage."""
    script = WATCHER.format(tests=str(Path(__file__).parent), proj=str(proj))
    watcher = subprocess.Popen([PY, "-c", script], stdout=subprocess.PIPE, text=True, env=steady_env())
    try:
        pool = int(watcher.stdout.readline())
        pids = read_pids(proj)
        assert alive(pool) and all(alive(p) for p in pids)
        watcher.kill()
        watcher.wait(10)
        wait_for(lambda: not any(alive(p) for p in [pool, *pids]), 10, "the pool and its stage to die")
    finally:
        if watcher.poll() is None:
            watcher.kill()
        watcher.wait(10)


def test_a_changed_preloaded_source_restarts_the_pool_before_the_next_stage(proj, starter):
    first = starter.pool_pid()
    out = starter.stage("test_version.py")
    assert (out.returncode, out.warm) == (0, True)
    const = proj / "fakeconst.py"
    const.write_text("VERSION = 2\n")  # same size, same inode: only the mtime tells
    out = starter.stage("test_version.py")
    assert (out.returncode, out.warm) == (1, True), (proj / "stage.log").read_text()
    assert "fakeconst.VERSION == 1" in (proj / "stage.log").read_text()
    assert starter.pool_pid() != first
    assert any("fakeconst.py changed" in n and "restarting" in n for n in starter.notes), starter.notes
    wait_for(lambda: not alive(first), 10, "the stale pool to exit")
    # a change the watcher reports restarts the pool at once, before any stage
    second = starter.pool_pid()
    const.write_text("VERSION = 1\n")
    starter.note_changes([const])
    assert wait_for(lambda: starter.pool_pid() != second and starter.pool_pid(), 30, "a new pool")
    out = starter.stage("test_version.py")
    assert (out.returncode, out.warm) == (0, True)


def test_a_config_change_of_preload_or_interpreter_restarts_the_pool(proj, starter):
    first = starter.pool_pid()
    starter.configure(enabled=True, python=PY, cwd=proj, preload=("pytest", "fakeconst"), env=steady_env())
    assert starter.pool_pid() != first
    assert any("config.yaml changed" in n for n in starter.notes)
    second = starter.pool_pid()
    starter.configure(enabled=True, python=PY, cwd=proj, preload=("pytest", "fakeconst"), env=steady_env())
    assert starter.pool_pid() == second  # nothing changed: the pool stays
    starter.configure(enabled=False, python=PY, cwd=proj, preload=(), env=steady_env(), why_off="--cold")
    assert starter.state == "cold: --cold" and not starter.active
    out = starter.stage("test_version.py")
    assert (out.returncode, out.warm) == (0, False)
    wait_for(lambda: not alive(second), 10, "the pool to exit")


def test_a_pool_that_cannot_preload_means_cold_stages_and_says_why(proj):
    starter = Starter(proj, preload=("fakeconst", "no_such_module_for_gemswatch"))
    try:
        out = starter.stage("test_version.py")
        assert (out.returncode, out.warm) == (0, False)
        wait_for(lambda: starter.state.startswith("cold: preload no_such_module_for_gemswatch: ModuleNotFoundError"),
                 10, f"the cold state line ({starter.state})")
        wait_for(lambda: any("stages start cold" in n for n in starter.notes), 10, "the note that stages start cold")
        out = starter.stage("test_version.py")  # no retry for a failure a restart cannot fix
        assert (out.returncode, out.warm) == (0, False)
        assert len([n for n in starter.notes if "unavailable" in n]) == 1
    finally:
        starter.shutdown()


def test_a_pool_killed_between_stages_is_replaced(proj, starter):
    pool = starter.pool_pid()
    os.kill(pool, signal.SIGKILL)
    wait_for(lambda: not alive(pool), 5, "the pool to die")
    out = starter.stage("test_version.py")
    assert (out.returncode, out.warm) == (0, False)  # this one started cold
    assert any("died" in n and "restarting" in n for n in starter.notes), starter.notes
    assert starter.pool_pid() != pool
    out = starter.stage("test_version.py")
    assert (out.returncode, out.warm) == (0, True)


def test_a_stage_whose_pool_dies_under_it_is_run_again_cold(proj, starter):
    pool = starter.pool_pid()
    started: list[int] = []
    killer = threading.Thread(
        target=lambda: (
            wait_for(lambda: (proj / "slow.pid").exists(), 20, "the warm stage"),
            os.kill(pool, signal.SIGKILL),
        )
    )
    killer.start()
    out = starter.stage("test_slow.py", on_start=started.append)
    killer.join(20)
    assert (out.returncode, out.warm) == (0, False)
    assert len(started) == 2 and not alive(started[0])  # the orphaned warm stage was killed
    assert any("died" in n for n in starter.notes), starter.notes


def test_the_pool_is_told_apart_from_a_cold_start_in_the_state_line(proj, starter):
    starter.pool_pid()
    # The state line is updated by the announcing thread just after the pool is ready.
    wait_for(lambda: starter.state.startswith("warm: pool "), 10, f"the ready state line ({starter.state})")
    assert "fakeconst, pytest" in starter.state
    assert starter.active


def test_a_module_that_starts_cuda_at_import_is_left_to_the_stages_and_the_rest_stays_preloaded(proj):
    # As flag_gems does: importing it initialises CUDA (here a stand-in torch
    # whose CUDA says so), which a forking pool must not have.
    (proj / "cudaatimport.py").write_text(
        "import sys, types\n"
        "sys.modules['torch'] = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True))\n"
    )
    starter = Starter(proj, preload=("cudaatimport", "fakeconst", "pytest"))
    try:
        out = starter.stage("test_version.py")
        assert (out.returncode, out.warm) == (0, True)
        assert starter._spec.preload == ("fakeconst", "pytest")
        assert any("cudaatimport initialises CUDA when imported" in n for n in starter.notes), starter.notes
        assert starter.state.startswith("warm: pool "), starter.state
    finally:
        starter.shutdown()
