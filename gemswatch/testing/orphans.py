"""Processes a candidate abandons, found by ancestry rather than environment.

A candidate can start a process that leaves the stage's process group
(``setsid``), is re-parented (a double fork) and empties its environment,
so neither the group nor the environment marker the watcher's reaper looks
for finds it. A stage process (one the watcher started: it has
``GEMSWATCH_RUN_ID`` in its environment, which a candidate loaded later
cannot take away) therefore makes itself a *child subreaper* (Linux): every
process abandoned below it is re-parented to it instead of to init, and when
its session ends it kills every child it still has. Elsewhere, and when the
stage itself is killed first, this does nothing. Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

__all__ = ["adopt_orphans", "descendants", "kill_children", "process_table"]

_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> bool:
    """In a stage process, become the subreaper of everything below it."""
    if not os.environ.get("GEMSWATCH_RUN_ID"):
        return False  # not a stage (a test's in-process session, a user's own pytest run)
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state letter) of every process /proc shows now."""
    table: dict[int, tuple[int, str]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            table[int(name)] = (int(fields[1]), fields[0].decode())
        except (OSError, IndexError, ValueError):
            continue
    return table


def descendants(root: int, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """Every live process below ``root`` (children first, then theirs)."""
    table = process_table() if table is None else table
    below: dict[int, list[int]] = {}
    for pid, (ppid, state) in table.items():
        if state not in ("Z", "X"):
            below.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        kids = below.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _children() -> list[int]:
    me = os.getpid()
    return [pid for pid, (ppid, state) in process_table().items() if ppid == me and state not in ("Z", "X")]


def kill_children(rounds: int = 20) -> list[int]:
    """SIGKILL every child of this process (orphans it adopted included) and
    reap them, while new ones appear; returns their pids."""
    killed: list[int] = []
    for _ in range(rounds):
        pids = _children()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
            killed.append(pid)
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        time.sleep(0.01)  # a dying parent's children arrive a moment later
    return killed
