"""The runner with real processes: process groups, timeouts, cancellation, no orphans."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from _e2e_helpers import alive, wait_for

from gemswatch.watch.stage.supervise import live_groups, run_process

PY = sys.executable


# A stage that starts a grandchild, reports its pid, then sleeps.
SPAWNER = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("grandchild", child.pid, flush=True)
{tail}
"""


def grandchild_pid(log) -> int:
    def pid() -> int | None:
        text = log.read_text() if log.exists() else ""
        return next((int(line.split()[1]) for line in text.splitlines() if line.startswith("grandchild ")), None)

    return wait_for(pid, 5, f"a grandchild line in {log}")


def test_exit_code_and_log(tmp_path):
    log = tmp_path / "s.log"
    out = run_process([PY, "-c", "import sys; print('hi'); sys.stderr.write('err\\n'); sys.exit(3)"], cwd=tmp_path, env=dict(os.environ), log_path=log, timeout=10, cancel=threading.Event())
    assert out.returncode == 3 and not out.timed_out and not out.cancelled
    assert "hi" in log.read_text() and "err" in log.read_text()
    assert not live_groups()


def test_stdin_is_empty(tmp_path):
    log = tmp_path / "s.log"
    out = run_process([PY, "-c", "import sys; print(repr(sys.stdin.read()))"], cwd=tmp_path, env=dict(os.environ), log_path=log, timeout=10, cancel=threading.Event())
    assert out.returncode == 0 and "''" in log.read_text()


def test_timeout_kills_the_whole_group(tmp_path):
    log = tmp_path / "s.log"
    result = {}
    t = threading.Thread(
        target=lambda: result.update(
            out=run_process([PY, "-c", SPAWNER.format(tail="time.sleep(60)")], cwd=tmp_path, env=dict(os.environ), log_path=log, timeout=1.0, cancel=threading.Event(), grace=0.5)
        )
    )
    start = time.monotonic()
    t.start()
    gc = grandchild_pid(log)
    t.join(15)
    assert result["out"].timed_out and time.monotonic() - start < 10
    wait_for(lambda: not alive(gc), 5, f"grandchild {gc} to die")


def test_sigint_ignored_then_sigkill_after_grace(tmp_path):
    log = tmp_path / "s.log"
    cancel = threading.Event()
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(60)\n"
    threading.Timer(0.5, cancel.set).start()
    start = time.monotonic()
    out = run_process([PY, "-c", code], cwd=tmp_path, env=dict(os.environ), log_path=log, timeout=30, cancel=cancel, grace=0.5, cancel_reason=lambda: "newer save")
    took = time.monotonic() - start
    assert out.cancelled and out.cancel_reason == "newer save"
    assert out.returncode == -signal.SIGKILL
    assert took < 5


def test_sigint_reaches_a_cooperative_child_first(tmp_path):
    log = tmp_path / "s.log"
    cancel = threading.Event()
    code = ("import time\ntry:\n    print('ready', flush=True)\n    time.sleep(60)\nexcept KeyboardInterrupt:\n"
            "    print('cleaned up', flush=True)\n    raise SystemExit(2)\n")
    # Cancelled once it is inside its try: on a loaded machine the interpreter can take longer to start than any fixed delay.
    threading.Thread(target=lambda: (wait_for(lambda: log.exists() and "ready" in log.read_text(), 30, "the child to start"),
                                     cancel.set()), daemon=True).start()
    out = run_process([PY, "-c", code], cwd=tmp_path, env=dict(os.environ), log_path=log, timeout=30, cancel=cancel, grace=5)
    assert out.cancelled and out.returncode == 2
    assert "cleaned up" in log.read_text()


def test_no_straggler_survives_a_normal_exit(tmp_path):
    log = tmp_path / "s.log"
    out = run_process([PY, "-c", SPAWNER.format(tail="")], cwd=tmp_path, env=dict(os.environ), log_path=log, timeout=10, cancel=threading.Event())
    assert out.returncode == 0
    gc = grandchild_pid(log)
    wait_for(lambda: not alive(gc), 5, f"grandchild {gc} to die")


def test_spawn_error(tmp_path):
    out = run_process(["/nonexistent/python9"], cwd=tmp_path, env=dict(os.environ), log_path=tmp_path / "s.log", timeout=5, cancel=threading.Event())
    assert out.returncode is None and "python9" in out.spawn_error


def test_child_is_in_its_own_session(tmp_path):
    log = tmp_path / "s.log"
    out = run_process([PY, "-c", "import os; print(os.getsid(0) == os.getpid(), os.getpgrp() == os.getpid())"], cwd=tmp_path, env=dict(os.environ), log_path=log, timeout=10, cancel=threading.Event())
    assert out.returncode == 0 and log.read_text().split() == ["True", "True"]


def test_a_stage_sees_exactly_its_gpu(tmp_path):
    from gemswatch.watch.config import load_config
    from gemswatch.watch.mapping import Candidate
    from gemswatch.watch.stage.plan import stage_env

    (tmp_path / "config.yaml").write_text("watch: candidates\ncandidates: {}\noperators: {}\n")
    (tmp_path / "candidates").mkdir()
    config = load_config(tmp_path / "config.yaml")
    cand = Candidate(tmp_path / "candidates" / "x.py", "x.py", (("softmax", "f"),), "x.py")
    assert stage_env(config, cand, "r1", "1")["CUDA_VISIBLE_DEVICES"] == "1"
    # One intra-op thread per stage unless the user chose otherwise.
    assert stage_env(config, cand, "r1", None)["OMP_NUM_THREADS"] == os.environ.get("OMP_NUM_THREADS", "1")
    # On the CPU (no device slot) the watcher's own setting passes through.
    assert stage_env(config, cand, "r1", None).get("CUDA_VISIBLE_DEVICES") == os.environ.get(
        "CUDA_VISIBLE_DEVICES")


def test_a_stage_log_keeps_pytest_summary_lines_whole(tmp_path, monkeypatch):
    from gemswatch.watch.config import load_config
    from gemswatch.watch.stage.plan import base_env

    monkeypatch.setenv("COLUMNS", "80")  # the watcher's terminal does not set the log's width
    (tmp_path / "config.yaml").write_text("watch: candidates\ncandidates: {}\noperators: {}\n")
    (tmp_path / "candidates").mkdir()
    reason = "the worst case differs at index [4, 781] by 3.0e-02, tolerance 1.6e-02 (bfloat16, 12 of 20 elements)"
    (tmp_path / "test_long.py").write_text(f"def test_long_message():\n    assert False, {reason!r}\n")
    log = tmp_path / "s.log"
    out = run_process([PY, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "test_long.py"], cwd=tmp_path,
                      env=base_env(load_config(tmp_path / "config.yaml")), log_path=log, timeout=30, cancel=threading.Event())
    assert out.returncode == 1
    summary = [ln for ln in log.read_text().splitlines() if ln.startswith("FAILED ")]
    assert len(summary) == 1 and reason in summary[0], summary
