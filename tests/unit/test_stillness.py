"""The candidate's processes are held still while the judge times its own side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gemswatch.testing.isolation.stillness import held_still

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and SIGSTOP: Linux")

# A worker stand-in: a busy thread counting into a file, and a process it
# starts in a new session (out of its process group) that counts too.
WORKER = textwrap.dedent("""
    import os, sys, threading, time

    def count(path):
        n = 0
        while True:
            n += 1
            with open(path + ".new", "w") as f:
                f.write(str(n))
            os.replace(path + ".new", path)  # a reader never sees it half written
            time.sleep(0.001)

    folder = sys.argv[1]
    escaped = os.fork()
    if escaped == 0:
        os.setsid()
        count(os.path.join(folder, "escaped"))
    with open(sys.argv[2], "w") as f:
        f.write(str(escaped))
    threading.Thread(target=count, args=(os.path.join(folder, "thread"),), daemon=True).start()
    count(os.path.join(folder, "main"))
""")


def _counts(folder: Path) -> dict[str, int]:
    return {p.name: int(p.read_text()) for p in folder.iterdir() if p.suffix != ".new"}


def _wait_for(folder: Path, names: set[str]) -> None:
    deadline = time.monotonic() + 20
    while set(_counts(folder)) != names:
        assert time.monotonic() < deadline, "the stand-in never started counting"
        time.sleep(0.01)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0].decode()


def test_the_worker_its_threads_and_what_it_started_stop_and_go_on(tmp_path):
    counts, pid_file = tmp_path / "counts", tmp_path / "escaped.pid"
    counts.mkdir()
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(counts), str(pid_file)])
    try:
        _wait_for(counts, {"main", "thread", "escaped"})
        with held_still(worker.pid, everything_below=False) as held:
            assert sorted(held) == sorted([worker.pid, int(pid_file.read_text())])
            assert {_state(pid) for pid in held} == {"T"}
            before = _counts(counts)
            time.sleep(0.2)
            assert _counts(counts) == before  # nothing counted while held
        time.sleep(0.2)
        after = _counts(counts)
        assert all(after[name] > before[name] for name in before), (before, after)
    finally:
        worker.kill()
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), 9)
        worker.wait()


# A judge stand-in: the subreaper of its stage, whose worker abandons a
# process (a double fork) and so hands it to the judge.
JUDGE = textwrap.dedent("""
    import json, os, subprocess, sys, time
    from gemswatch.testing.orphans import adopt_orphans, kill_children
    from gemswatch.testing.isolation.stillness import held_still

    assert adopt_orphans()
    worker = subprocess.Popen([sys.executable, "-c", '''
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            while True:
                time.sleep(0.001)
        os._exit(0)
    time.sleep(60)
    '''])
    deadline = time.monotonic() + 20
    while True:
        kids = [int(p) for p in os.listdir("/proc") if p.isdigit() and p != str(worker.pid)
                and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1] == str(os.getpid())]
        if kids or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    with held_still(worker.pid, everything_below=False) as only_the_tree:
        pass
    with held_still(worker.pid, everything_below=True) as everything:
        states = {p: open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] for p in everything}
    print(json.dumps({"orphans": kids, "tree": only_the_tree, "everything": everything, "states": states,
                      "worker": worker.pid}))
    kill_children()
""")


def test_a_stage_holds_the_orphans_it_adopted_too(tmp_path):
    env = dict(os.environ, GEMSWATCH_RUN_ID="stillness-test")
    out = subprocess.run([sys.executable, "-c", JUDGE], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    for pid in got["orphans"]:  # the stand-in killed them; should it not have, nothing outlives the test
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    assert len(got["orphans"]) == 1  # adopted by the judge, no longer below the worker
    assert got["tree"] == [got["worker"]]
    assert set(got["everything"]) == {got["worker"], *got["orphans"]}
    assert set(got["states"].values()) == {"T"}
