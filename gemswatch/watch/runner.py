"""Run one stage process in its own process group, and stop it for sure.

The child starts a new session (``start_new_session=True``), so Ctrl-C in
the terminal never reaches it and everything it spawns shares its group.
Stopping sends SIGINT to the group (pytest then restores and writes its
summary), waits ``grace`` seconds, then SIGKILLs the group. After the leader
exits the group is SIGKILLed once more so no straggler survives its stage.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

from .status import Outcome

__all__ = ["run_process", "stop_group", "kill_all", "live_groups"]

_live: dict[int, subprocess.Popen] = {}
_live_lock = threading.Lock()


def live_groups() -> list[int]:
    """Process groups of stages still running."""
    with _live_lock:
        return list(_live)


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGINT the process group of ``proc``, wait up to ``grace`` s, then SIGKILL it."""
    pgid = proc.pid
    if proc.poll() is None:
        _signal_group(pgid, signal.SIGINT)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
        pass


def kill_all(grace: float = 0.0) -> None:
    """Stop every running stage (used at exit)."""
    with _live_lock:
        procs = list(_live.values())
    for p in procs:
        if p.poll() is None:
            _signal_group(p.pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    for p in procs:
        left = max(0.0, deadline - time.monotonic())
        try:
            p.wait(timeout=left)
        except subprocess.TimeoutExpired:
            pass
        _signal_group(p.pid, signal.SIGKILL)


def run_process(
    cmd: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    log_path: Path,
    timeout: float | None,
    cancel: threading.Event,
    grace: float = 3.0,
    cancel_reason: Callable[[], str] | None = None,
    on_start: Callable[[int], None] | None = None,
    poll_interval: float = 0.05,
) -> Outcome:
    """Run ``cmd`` to completion, a timeout, or a cancellation.

    stdout and stderr both go to ``log_path`` (never to the terminal); stdin
    is empty. Returns an Outcome; never raises for a failing child.
    """
    start = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=str(cwd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as e:
            return Outcome(None, time.monotonic() - start, spawn_error=f"{cmd[0]}: {e.strerror or e}")
    with _live_lock:
        _live[proc.pid] = proc
    try:
        if on_start is not None:
            on_start(proc.pid)
        deadline = None if timeout is None else start + timeout
        timed_out = cancelled = False
        while True:
            if proc.poll() is not None:
                break
            if cancel.is_set():
                cancelled = True
                stop_group(proc, grace)
                break
            if deadline is not None and time.monotonic() >= deadline:
                timed_out = True
                stop_group(proc, grace)
                break
            cancel.wait(poll_interval)
        # Stragglers the stage left in its group die with it.
        _signal_group(proc.pid, signal.SIGKILL)
        rc = proc.wait()
    finally:
        with _live_lock:
            _live.pop(proc.pid, None)
    return Outcome(
        rc,
        time.monotonic() - start,
        timed_out=timed_out,
        cancelled=cancelled,
        cancel_reason=(cancel_reason() if cancelled and cancel_reason else ""),
        timeout_s=timeout,
    )
