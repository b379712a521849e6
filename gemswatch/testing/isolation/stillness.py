"""The candidate's processes held still while the judge times its own side.

Between two requests a candidate's worker looks idle, but it need not be: a
thread or a process it started can burn the CPU, or keep the device busy,
exactly while the judge times a baseline or measures the device's roofs,
and so make the candidate's ratios grow with no faster kernel. So the judge
stops every process below it (SIGSTOP: it cannot be caught, blocked or
ignored) before it times anything of its own, and continues them after.
Below the judge is everything the candidate can start: the worker with all
its threads, the worker's children, and (the judge being its stage's
subreaper, :mod:`..orphans`) whatever they abandoned with a double fork or
a new session.

What this cannot hold: work the worker queued on a GPU before it was
stopped runs on (a stopped process queues nothing new).

Standard library only.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager
from typing import Iterator

from ..orphans import descendants, process_table

__all__ = ["candidate_processes", "held_still"]

ROUNDS = 20  # listings while new processes appear (each round stops the parents of the next)
STOP_WAIT_S = 1.0  # a thread inside a system call stops when it leaves it
_STOPPED = frozenset("TtZX")


def candidate_processes(worker: int, everything_below: bool) -> list[int]:
    """The worker and every process below it; with ``everything_below``
    (this process adopts what the candidate abandons), every process below
    this one, where the abandoned ones are too."""
    table = process_table()
    if everything_below:
        return descendants(os.getpid(), table)
    if table.get(worker, (None, ""))[0] != os.getpid():
        return []  # the worker is gone (its pid may be another process's now)
    return [worker] + descendants(worker, table)


@contextmanager
def held_still(worker: int, everything_below: bool) -> Iterator[list[int]]:
    """Stop the candidate's processes (:func:`candidate_processes`) for the
    ``with`` block; yields their pids. One that exits meanwhile is simply gone."""
    held: list[int] = []
    try:
        for _ in range(ROUNDS):
            new = [pid for pid in candidate_processes(worker, everything_below) if pid not in held]
            if not new:
                break
            for pid in new:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    held.append(pid)
                except (ProcessLookupError, PermissionError):
                    pass
            _wait_stopped(new)
        yield held
    finally:
        for pid in reversed(held):
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass


def _wait_stopped(pids: list[int]) -> None:
    """Wait until every thread of ``pids`` is stopped (or gone): a stop is
    delivered to each thread as it next runs, so a busy one takes a moment."""
    deadline = time.monotonic() + STOP_WAIT_S
    waiting = set(pids)
    while waiting and time.monotonic() < deadline:
        waiting = {pid for pid in waiting if not _all_threads_stopped(pid)}
        if waiting:
            time.sleep(0.0005)


def _all_threads_stopped(pid: int) -> bool:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # gone
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0].decode()
        except (OSError, IndexError):
            continue
        if state not in _STOPPED:
            return False
    return True
