"""What the runner does around a stage process besides waiting for it.

- Escaped descendants: a candidate may start a process that leaves the
  stage's process group (``setsid``, a double fork). Every stage has
  ``GEMSWATCH_RUN_ID`` and ``GEMSWATCH_STAGE`` in its environment and every
  process it execs inherits them, so after the stage the processes that still
  carry both are found in ``/proc/<pid>/environ`` and killed.
- Output floods: the stage log is capped while it is written (the runner
  stops a stage whose log passes :data:`LOG_LIMIT_BYTES`) and compacted
  afterwards to its head and tail.
- Memory: the kernel's OOM killer is told to prefer a stage over the watcher.

Linux only (``/proc``); elsewhere these are no-ops. Standard library only.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Mapping

__all__ = [
    "LOG_LIMIT_BYTES",
    "LOG_KEEP_HEAD",
    "LOG_KEEP_TAIL",
    "stage_marker",
    "find_marked",
    "kill_marked",
    "log_too_big",
    "compact_log",
    "prefer_for_oom",
]

# A stage whose log grows past this is stopped (a candidate printing in a loop).
LOG_LIMIT_BYTES = int(os.environ.get("GEMSWATCH_LOG_LIMIT_MB", "512")) << 20
# A finished stage's log larger than head + tail keeps only those.
LOG_KEEP_HEAD = 256 << 10
LOG_KEEP_TAIL = 4 << 20

_MARKER_KEYS = ("GEMSWATCH_RUN_ID", "GEMSWATCH_STAGE")


def stage_marker(env: Mapping[str, str]) -> tuple[bytes, ...] | None:
    """The environment entries that identify one stage's processes, or None
    when ``env`` does not name a run and a stage of its own (values this
    process inherited would match its relatives: gemswatch run by a stage)."""
    if not all(env.get(k) for k in _MARKER_KEYS):
        return None
    if all(env[k] == os.environ.get(k) for k in _MARKER_KEYS):
        return None
    return tuple(f"{k}={env[k]}".encode() for k in _MARKER_KEYS)


def find_marked(marker: tuple[bytes, ...], exclude: frozenset[int] = frozenset()) -> list[int]:
    """Pids of live processes whose environment holds every entry of ``marker``."""
    found = []
    me = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid == me or pid in exclude:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                entries = f.read().split(b"\0")
        except OSError:  # gone, or not ours
            continue
        if all(m in entries for m in marker):
            found.append(pid)
    return found


def kill_marked(marker: tuple[bytes, ...] | None, exclude: frozenset[int] = frozenset(), rounds: int = 20) -> list[int]:
    """SIGKILL every process carrying ``marker`` (and its process group),
    repeating while new ones appear (one may fork while we look). Returns the
    pids killed."""
    if marker is None:
        return []
    killed: list[int] = []
    for _ in range(rounds):
        pids = [p for p in find_marked(marker, exclude) if _state(p) not in ("Z", "X", None)]
        if not pids:
            break
        for pid in pids:
            for kill in (os.kill, os.killpg):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            killed.append(pid)
        time.sleep(0.01)
    return killed


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def log_too_big(path: Path, limit: int | None = None) -> bool:
    """True when the stage log at ``path`` has passed the limit."""
    try:
        return path.stat().st_size > (LOG_LIMIT_BYTES if limit is None else limit)
    except OSError:
        return False


def compact_log(path: Path, head: int = LOG_KEEP_HEAD, tail: int = LOG_KEEP_TAIL) -> int:
    """Keep the first ``head`` and last ``tail`` bytes of a finished stage's
    log, with a line saying how much was dropped. Returns the bytes dropped."""
    try:
        size = path.stat().st_size
        if size <= head + tail:
            return 0
        with open(path, "rb") as f:
            first = f.read(head)
            f.seek(size - tail)
            last = f.read(tail)
        dropped = size - len(first) - len(last)
        note = f"\n[gemswatch: {dropped} bytes of output dropped here; the stage wrote {size} bytes]\n".encode()
        tmp = path.with_name(path.name + ".compact")
        with open(tmp, "wb") as f:
            f.write(first + note + last)
        os.replace(tmp, path)
        return dropped
    except OSError:
        return 0


def prefer_for_oom(pid: int, score: int = 500) -> None:
    """Raise the OOM score of a stage process (inherited by its children), so
    the kernel kills a runaway stage rather than the watcher."""
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write(str(score))
    except OSError:
        pass
