"""A stage cannot take the watcher (or the warm pool) with it: whatever it
kills, its parent, its parent's process group or every ancestor it finds in
/proc, the watcher lives on and reports the stage.

The "watcher" is a child process of the test running the real runner, so a
regression kills that child, never the test session. A tiny pytest project
without torch keeps each case well under a second.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PY = sys.executable

KILLER_TEST = '''
import os
import signal


def _parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _ancestors_up_to(last):
    pid, found = os.getpid(), []
    while pid > 1 and pid != last:
        pid = _parent_of(pid)
        found.append(pid)
    return found


def test_kills_what_runs_it():
    watcher = int(os.environ["WATCHER_PID"])
    attempts = {
        "parent": lambda: os.kill(os.getppid(), signal.SIGKILL),
        "group": lambda: os.killpg(os.getpgid(os.getppid()), signal.SIGKILL),
        "ancestors": lambda: [os.kill(p, signal.SIGKILL) for p in _ancestors_up_to(watcher)],
    }
    for name, attempt in attempts.items():
        try:
            attempt()
            print(name, "sent", flush=True)
        except PermissionError:
            print(name, "refused", flush=True)
'''

# The watcher's side: run the stage (warm from a pool, or cold), then say it survived.
WATCHER = '''
import os, sys, threading
from pathlib import Path
from gemswatch.watch.stage.supervise import run_process
from gemswatch.watch.stage.warm import WarmStarter

proj, mode = Path(sys.argv[1]), sys.argv[2]
env = {**os.environ, "WATCHER_PID": str(os.getpid()), "GEMSWATCH_RUN_ID": "r"}
env.pop("PYTEST_CURRENT_TEST", None)
starter = None
if mode == "warm":
    starter = WarmStarter(log_path=proj / "warm.log")
    starter.configure(enabled=True, python=sys.executable, cwd=proj, preload=("pytest",), env=env)
out = run_process([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_killer.py"],
                  cwd=proj, env=env, log_path=proj / "stage.log", timeout=60, cancel=threading.Event(), warm=starter)
if starter is not None:
    starter.shutdown()
print("watcher survived: exit", out.returncode, "warm", out.warm, flush=True)
'''


def _can_confine() -> str | None:
    """Whether this kernel scopes signals (tried in a throwaway child)."""
    r = subprocess.run([PY, "-c", "import sys; from gemswatch.warmpool.signal_scope import confine_signals as c; "
                        "why = c(); print(why or ''); sys.exit(1 if why else 0)"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode else None


@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_a_stage_that_kills_its_ancestors_leaves_the_watcher_alive(tmp_path: Path, mode: str):
    why = _can_confine()
    if why:
        pytest.skip(f"signals cannot be scoped here: {why}")
    (tmp_path / "test_killer.py").write_text(textwrap.dedent(KILLER_TEST))
    watcher = subprocess.run([PY, "-c", WATCHER, str(tmp_path), mode], capture_output=True, text=True, timeout=120,
                             start_new_session=True)
    log = (tmp_path / "stage.log").read_text()
    assert watcher.returncode == 0, (watcher.returncode, watcher.stderr[-2000:], log[-2000:])
    assert f"watcher survived: exit 0 warm {mode == 'warm'}" in watcher.stdout, watcher.stdout
    for attempt in ("parent", "group", "ancestors"):
        assert f"{attempt} refused" in log, log[-2000:]

