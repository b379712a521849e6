"""Run one stage process in its own process group, and stop it for sure.

The child starts a new session (``start_new_session=True``), so Ctrl-C in
the terminal never reaches it and everything it spawns shares its group.
Stopping sends SIGINT to the group (pytest then restores and writes its
summary), waits ``grace`` seconds, then SIGKILLs the group. After the leader
exits the group is SIGKILLed once more so no straggler survives its stage,
and processes it started in other sessions are found by their environment
and killed too (:mod:`.reaper`), as is a stage whose log passes the output
limit. Every stage is registered with the reaper (:mod:`.reaper`) while it runs,
so it dies even when gemswatch is killed by SIGKILL.

A warm stage (forked by the warm pool, see :mod:`.warm`) is driven the same
way: it leads its own session too, and the pool reports its exit status.

Every stage, warm or cold, first confines its signals to itself
(:mod:`gemswatch.warmpool.signal_scope`): a candidate that kills its
parent, its process group's parent or every ancestor it finds in ``/proc``
cannot reach the pool or the watcher.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from . import reaper as care
from ...warmpool import signal_scope
from .result import Outcome

if TYPE_CHECKING:
    from .starter import StageStarter

__all__ = ["run_process", "stop_group", "kill_all", "live_groups"]

_live: dict[int, subprocess.Popen] = {}
_markers: dict[int, tuple[bytes, ...] | None] = {}  # pid -> its stage's environment marker
_live_lock = threading.Lock()
# Run before a cold stage's command: nothing the stage starts can signal the
# watcher (a stage started cold is its child, and a candidate may kill its
# ancestors); see gemswatch/warmpool/signal_scope.py.
_CONFINE = [sys.executable, "-S", "-E", str(Path(signal_scope.__file__).resolve())]


def live_groups() -> list[int]:
    """Process groups of stages still running."""
    with _live_lock:
        return list(_live)


def stop_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGINT the process group of ``proc``, wait up to ``grace`` s, then SIGKILL it."""
    pgid = proc.pid
    if proc.poll() is None:
        care.signal_group(pgid, signal.SIGINT)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    care.signal_group(pgid, signal.SIGKILL)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
        pass


def kill_all(grace: float = 0.0) -> None:
    """Stop every running stage (used at exit)."""
    with _live_lock:
        procs = list(_live.values())
        markers = [_markers.get(p.pid) for p in procs]
    for p in procs:
        if p.poll() is None:
            care.signal_group(p.pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    for p in procs:
        left = max(0.0, deadline - time.monotonic())
        try:
            p.wait(timeout=left)
        except subprocess.TimeoutExpired:
            pass
        care.signal_group(p.pid, signal.SIGKILL)
    for marker in markers:
        care.kill_marked(marker)


def _missing_program(program: str, cwd: Path, env: dict[str, str]) -> str:
    """Why ``program`` cannot be started ('' when it can): said here, as the
    confining step runs it by exec and could only exit 127."""
    if os.sep in program:
        program = os.path.join(cwd, program)
        if not os.path.exists(program):
            return "No such file or directory"
        return "" if os.access(program, os.X_OK) else "Permission denied"
    return "" if shutil.which(program, path=env.get("PATH", os.defpath)) else "No such file or directory"


def _finished(proc) -> bool:
    """The stage process ended (or, for a warm stage, its pool vanished)."""
    return proc.poll() is not None or getattr(proc, "lost", False)


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
    warm: "StageStarter | None" = None,
) -> Outcome:
    """Run ``cmd`` to completion, a timeout, or a cancellation.

    stdout and stderr both go to ``log_path`` (never to the terminal); stdin
    is empty. With ``warm``, a ``python -m pytest`` command is forked from the
    warm pool (or run by a spare process) when it can be (``Outcome.warm``), else started cold; a warm
    stage whose pool dies under it is run again cold. Returns an Outcome;
    never raises for a failing child.
    """
    start = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    marker = care.stage_marker(env)
    ooms = care.oom_kills()
    # Registered before it exists: a SIGKILLed gemswatch still takes the stage along.
    guard = care.guard(marker)
    with open(log_path, "wb") as log:
        proc = None
        if warm is not None:
            proc = warm.spawn(cmd, cwd, env, log.fileno(), cancel)
            if proc is None and cancel.is_set():
                care.unguard(guard)
                return Outcome(
                    None,
                    time.monotonic() - start,
                    cancelled=True,
                    cancel_reason=cancel_reason() if cancel_reason else "",
                )
        if proc is None:
            missing = _missing_program(cmd[0], cwd, env)
            if missing:
                care.unguard(guard)
                return Outcome(None, time.monotonic() - start, spawn_error=f"{cmd[0]}: {missing}")
            try:
                with care.spawning():
                    proc = subprocess.Popen(
                        _CONFINE + cmd,
                        cwd=str(cwd),
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        close_fds=True,
                    )
                    care.own_child(proc.pid)
            except OSError as e:
                care.unguard(guard)
                return Outcome(None, time.monotonic() - start, spawn_error=f"{cmd[0]}: {e.strerror or e}")
    care.guard_group(guard, proc.pid)
    care.own_child(proc.pid)  # a warm stage becomes our child if its pool dies under it
    with _live_lock:
        _live[proc.pid] = proc
        _markers[proc.pid] = marker
    care.prefer_for_oom(proc.pid)
    flooded = False
    try:
        if on_start is not None:
            on_start(proc.pid)
        # The limit counts from the process start (not from waiting for the warm pool).
        deadline = None if timeout is None else time.monotonic() + timeout
        timed_out = cancelled = False
        while True:
            if _finished(proc):
                break
            if cancel.is_set():
                cancelled = True
                stop_group(proc, grace)
                break
            if deadline is not None and time.monotonic() >= deadline:
                timed_out = True
                stop_group(proc, grace)
                break
            if care.log_too_big(log_path):
                flooded = True
                stop_group(proc, 0)  # no grace: it would keep writing
                break
            cancel.wait(poll_interval)
        # Stragglers the stage left in its group die with it, and so do the
        # processes it started in other groups (found by their environment).
        care.signal_group(proc.pid, signal.SIGKILL)
        rc = proc.wait()
        care.disown_child(proc.pid)
        care.kill_marked(marker)
        care.kill_adopted()  # what a stage killed before its own clean-up left behind
        care.compact_log(log_path)
    finally:
        with _live_lock:
            _live.pop(proc.pid, None)
            _markers.pop(proc.pid, None)
        care.unguard(guard)
    if getattr(proc, "lost", False) and not (cancelled or timed_out) and warm is not None:
        warm.lost(proc)
        return run_process(
            cmd,
            cwd=cwd,
            env=env,
            log_path=log_path,
            timeout=timeout,
            cancel=cancel,
            grace=grace,
            cancel_reason=cancel_reason,
            on_start=on_start,
            poll_interval=poll_interval,
        )
    return Outcome(
        rc,
        time.monotonic() - start,
        timed_out=timed_out,
        cancelled=cancelled,
        cancel_reason=(cancel_reason() if cancelled and cancel_reason else ""),
        timeout_s=timeout,
        warm=getattr(proc, "warm", False),
        log_limit=care.LOG_LIMIT_BYTES if flooded else None,
        oom_killed=ooms is not None and (care.oom_kills() or 0) > ooms,
    )
