"""What the runner does around a stage besides waiting (gemswatch.watch.stage.reaper):
escaped descendants found by their environment, the output limit and log
compaction, the OOM preference, and a snapshot a candidate deleted."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time

from _e2e_helpers import alive, wait_for

from gemswatch.watch.stage import reaper as care
from gemswatch.watch.stage.run import Run, _keep_snapshot
from gemswatch.watch.stage.supervise import run_process
from gemswatch.watch.stage.result import Outcome
from gemswatch.watch.stage.verdict import decide
from gemswatch.watch.status import CRASHED

PY = sys.executable


def stage_env(run_id: str) -> dict[str, str]:
    return {**os.environ, "GEMSWATCH_RUN_ID": run_id}


def test_marker_needs_run_and_stage():
    assert care.stage_marker({"GEMSWATCH_RUN_ID": ""}) is None
    assert care.stage_marker(stage_env("r1")) == (b"GEMSWATCH_RUN_ID=r1",)


def test_an_inherited_marker_is_not_used(monkeypatch):
    # gemswatch's own tests run by a gemswatch stage: the outer stage's values
    # would match the test process and its relatives.
    monkeypatch.setenv("GEMSWATCH_RUN_ID", "outer")
    assert care.stage_marker(dict(os.environ)) is None
    assert care.stage_marker({**os.environ, "GEMSWATCH_RUN_ID": "inner"}) is not None


ESCAPER = r"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
print("escaped", child.pid, flush=True)
"""


def test_a_descendant_in_another_session_dies_with_its_stage(tmp_path):
    log = tmp_path / "s.log"
    run_id = f"test-escape-{os.getpid()}-{time.monotonic_ns()}"
    out = run_process([PY, "-c", ESCAPER], cwd=tmp_path, env=stage_env(run_id), log_path=log, timeout=20,
                      cancel=threading.Event())
    assert out.returncode == 0
    pid = int(log.read_text().split()[1])
    wait_for(lambda: not alive(pid), 5, f"the escaped child {pid} to die")
    assert care.find_marked(care.stage_marker(stage_env(run_id))) == []


# A stage whose helper hides from every marker (a new session, an emptied
# environment, a parent that exits at once), and which is then killed
# before it can clean up after itself.
HIDER = r"""
import subprocess, sys, time
launcher = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
            "env={}, start_new_session=True); print('hidden', p.pid, flush=True)")
subprocess.run([sys.executable, "-c", launcher], env={})
time.sleep(60)
"""

ADOPTING_WATCHER = r"""
import sys, threading
from pathlib import Path
from gemswatch.watch.stage import reaper as care
from gemswatch.watch.stage.supervise import run_process
assert care.adopt_orphans()
folder = Path(sys.argv[1])
out = run_process([sys.executable, "-c", sys.argv[2]], cwd=folder, env={"GEMSWATCH_RUN_ID": sys.argv[3], "PATH": ""},
                  log_path=folder / "s.log", timeout=3, grace=0.5, cancel=threading.Event())
print("timed out" if out.timed_out else "finished", flush=True)
"""


def test_a_hidden_helper_of_a_killed_stage_dies_with_it(tmp_path):
    # gemswatch (here a small script: adopting orphans changes the process
    # that does it) is the subreaper of its stages: the helper comes back to
    # it when the stage is killed, and is killed in turn.
    run_id = f"test-hide-{os.getpid()}-{time.monotonic_ns()}"
    r = subprocess.run([PY, "-c", ADOPTING_WATCHER, str(tmp_path), HIDER, run_id], capture_output=True, text=True,
                       timeout=60)
    assert r.stdout.strip() == "timed out", r.stderr
    pid = int((tmp_path / "s.log").read_text().split()[1])
    wait_for(lambda: not alive(pid), 5, f"the hidden helper {pid} to die")


def test_without_a_marker_nothing_is_searched(tmp_path):
    assert care.kill_marked(None) == []


def test_a_flooding_stage_is_stopped_and_its_log_compacted(tmp_path, monkeypatch):
    monkeypatch.setattr(care, "LOG_LIMIT_BYTES", 8 << 20)
    log = tmp_path / "s.log"
    flood = "import os\nos.write(1, b'start\\n')\nwhile True:\n    os.write(1, b'x' * 65536)\n"
    start = time.monotonic()
    out = run_process([PY, "-c", flood], cwd=tmp_path, env=dict(os.environ), log_path=log, timeout=60,
                      cancel=threading.Event(), grace=5)
    assert time.monotonic() - start < 20
    assert out.log_limit == 8 << 20 and not out.timed_out
    assert log.stat().st_size <= care.LOG_KEEP_HEAD + care.LOG_KEEP_TAIL + 200
    text = log.read_text()
    assert text.startswith("start") and "bytes of output dropped here" in text
    verdict = decide("correctness", out, None, ["softmax"], text[-1000:])
    assert verdict.status == CRASHED and "more than 8 MiB of output" in verdict.message


def test_compact_log_keeps_small_logs_and_cuts_big_ones(tmp_path):
    small = tmp_path / "small.log"
    small.write_bytes(b"hello\n")
    assert care.compact_log(small) == 0 and small.read_bytes() == b"hello\n"
    big = tmp_path / "big.log"
    big.write_bytes(b"H" * 100 + b"m" * 10_000 + b"T" * 100)
    dropped = care.compact_log(big, head=100, tail=100)
    assert dropped == 10_000
    data = big.read_bytes()
    assert data.startswith(b"H" * 100) and data.endswith(b"T" * 100) and b"10000 bytes of output dropped" in data


def test_stages_are_the_oom_killers_first_choice(tmp_path):
    log = tmp_path / "s.log"
    code = "import time; time.sleep(0.5); print(open('/proc/self/oom_score_adj').read())"
    run_process([PY, "-c", code], cwd=tmp_path, env=dict(os.environ), log_path=log, timeout=20, cancel=threading.Event())
    assert log.read_text().strip() == "500"


def test_a_deleted_snapshot_is_put_back_for_the_next_stage(tmp_path):
    snap = tmp_path / "run" / "snapshot" / "cand.py"
    snap.parent.mkdir(parents=True)
    data = b"def my_softmax(x):\n    return x\n"
    snap.write_bytes(data)
    run = Run("r", None, hashlib.sha256(data).hexdigest(), ["preflight", "correctness"], tmp_path / "run", snap, None)
    _keep_snapshot(run)  # first stage: keeps the bytes
    snap.unlink()
    snap.parent.rmdir()
    _keep_snapshot(run)
    assert snap.read_bytes() == data
    snap.write_bytes(b"rewritten by the candidate")
    _keep_snapshot(run)
    assert snap.read_bytes() == data


def test_outcome_limit_decides_crashed_before_anything_else():
    verdict = decide("preflight", Outcome(0, 1.0, log_limit=512 << 20), {"records": []}, ["softmax"])
    assert verdict.status == CRASHED and "512 MiB" in verdict.message


FAKE_WATCHER = """\
import os, sys, threading
from pathlib import Path
from gemswatch.watch.stage.supervise import run_process
folder = Path(sys.argv[2])
env = {**os.environ, "GEMSWATCH_RUN_ID": sys.argv[1]}
run_process([sys.executable, "-c", sys.argv[3]], cwd=folder, env=env, log_path=folder / "s.log", timeout=60,
            cancel=threading.Event())
"""

HANGING_STAGE = """\
import os, subprocess, sys, time
sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
escaped = subprocess.Popen(sleep, start_new_session=True)  # found by its environment
unmarked = subprocess.Popen(sleep, env={"PATH": os.environ.get("PATH", "")})  # found by its group
print(os.getpid(), escaped.pid, unmarked.pid, flush=True)
time.sleep(60)
"""


def test_a_sigkilled_watcher_takes_its_stages_along(tmp_path):
    """The reaper: gemswatch killed by SIGKILL, its stage (its own session),
    the stage's child in yet another session and an unmarked child in the
    stage's group all die."""
    import signal
    import subprocess

    run_id = f"test-reaper-{os.getpid()}-{time.monotonic_ns()}"
    watcher = subprocess.Popen([PY, "-c", FAKE_WATCHER, run_id, str(tmp_path), HANGING_STAGE])
    log = tmp_path / "s.log"
    pids: list[int] = []
    try:
        end = time.monotonic() + 20
        while len(pids) < 3 and time.monotonic() < end:
            time.sleep(0.05)
            pids = [int(x) for x in log.read_text().split()] if log.exists() else []
        assert len(pids) == 3, "the stage did not start"
        watcher.send_signal(signal.SIGKILL)
        watcher.wait(10)
        wait_for(lambda: not any(alive(p) for p in pids), 5, f"the stage's processes {pids} to die")
    finally:
        if watcher.poll() is None:
            watcher.kill()
        for p in pids:
            if alive(p):
                os.kill(p, signal.SIGKILL)
