"""What the runner does around a stage process besides waiting for it.

- Escaped descendants: a candidate may start a process that leaves the
  stage's process group (``setsid``, a double fork). Every stage has its
  run's ``GEMSWATCH_RUN_ID`` in its environment and every process it execs
  inherits it, so after the stage the processes that still carry it are
  found in ``/proc/<pid>/environ`` and killed (a stage process also adopts
  and kills its orphans itself, whatever their environment:
  ``gemswatch.testing.orphans``).
- Output floods: the stage log is capped while it is written (the runner
  stops a stage whose log passes :data:`LOG_LIMIT_BYTES`) and compacted
  afterwards to its head and tail.
- Memory: the kernel's OOM killer is told to prefer a stage over the watcher.
- A killed gemswatch: stages lead sessions of their own (so Ctrl-C in the
  terminal reaches gemswatch only), so nothing kills them when gemswatch dies
  by SIGKILL. A reaper process (this file run as a script, started with the
  first stage) is told each stage's environment marker and process group
  before and after the stage runs; when its pipe from gemswatch reaches end
  of file, however gemswatch ended, it kills every stage still registered:
  the group, then every process carrying the marker. This covers cold stages
  and warm ones (a forked stage's marker is not in ``/proc/<pid>/environ``,
  but its group is registered, and what it execs carries the marker).

Linux only (``/proc``); elsewhere these are no-ops. Standard library only:
the reaper runs this file with ``python -I -S``.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
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
    "oom_kills",
    "signal_group",
    "guard",
    "guard_group",
    "unguard",
    "adopt_orphans",
    "spawning",
    "own_child",
    "disown_child",
    "kill_adopted",
]

# A stage whose log grows past this is stopped (a candidate printing in a loop).
LOG_LIMIT_BYTES = int(os.environ.get("GEMSWATCH_LOG_LIMIT_MB", "512")) << 20
# A finished stage's log larger than head + tail keeps only those.
LOG_KEEP_HEAD = 256 << 10
LOG_KEEP_TAIL = 4 << 20

# The run's id: stages of one run never overlap, and the candidate's
# environment names no stage (a candidate must not learn it is being timed).
_MARKER_KEYS = ("GEMSWATCH_RUN_ID",)


def signal_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to process group ``pgid``; False when it is gone (or not ours)."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


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
    for pid in _pids():
        if pid == me or pid in exclude:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
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
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            signal_group(pid)
            killed.append(pid)
        time.sleep(0.01)
    return killed


def _state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[0].decode() if fields else None


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


def oom_kills(cgroup_file: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int | None:
    """How many processes of this process's memory cgroup the kernel's
    out-of-memory killer has killed so far (cgroup v2 ``memory.events``, or
    v1 ``memory.oom_control`` of the memory hierarchy, which a container
    shows as its root); None where neither can be read."""
    try:
        with open(cgroup_file) as f:
            entries = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return None
    files = []
    for _, controllers, path in (e for e in entries if len(e) == 3):
        if controllers == "":
            files.append(f"{root}{path}/memory.events")
        elif "memory" in controllers.split(","):
            files += [f"{root}/memory{path}/memory.oom_control", f"{root}/memory/memory.oom_control"]
    for name in files:
        try:
            with open(name) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def prefer_for_oom(pid: int, score: int = 500) -> None:
    """Raise the OOM score of a stage process (inherited by its children), so
    the kernel kills a runaway stage rather than the watcher."""
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write(str(score))
    except OSError:
        pass


# ---------------------------------------------------------------------------
# orphans: what a stage that died left behind, however it hid

_PR_SET_CHILD_SUBREAPER = 36


class _Adoption:
    """gemswatch as the subreaper of its stages (Linux): a process a stage
    abandons (a double fork, a new session, an emptied environment) is
    re-parented to gemswatch when the stage's own process is gone (killed
    after its grace, or by the OOM killer), instead of to init; after each
    stage gemswatch kills every such child. Its own children in sessions
    of their own (stages, the warm pool, the reaper) are registered while
    they start, under :attr:`lock`, so none is taken for an orphan."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.enabled = False
        self.own: set[int] = set()


_adoption = _Adoption()


def adopt_orphans() -> bool:
    """Make this process the subreaper of everything below it (gemswatch's
    command line does, once; a test process that runs stages does not)."""
    try:
        import ctypes

        ok = ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError, ImportError):
        ok = False
    _adoption.enabled = ok
    return ok


def spawning() -> threading.RLock:
    """Hold while starting a child in a session of its own and :func:`own_child`-ing it."""
    return _adoption.lock


def own_child(pid: int) -> None:
    with _adoption.lock:
        _adoption.own.add(int(pid))


def disown_child(pid: int) -> None:
    with _adoption.lock:
        _adoption.own.discard(int(pid))


def kill_adopted() -> list[int]:
    """SIGKILL and reap every child of this process that it did not start:
    orphans it adopted (never in its own process group, which the children
    of a plain ``subprocess.run`` share); returns their pids."""
    if not _adoption.enabled:
        return []
    killed: list[int] = []
    me, group = os.getpid(), os.getpgrp()
    with _adoption.lock:
        for pid in _children(me):
            try:
                if pid in _adoption.own or os.getpgid(pid) == group:
                    continue
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, PermissionError, ChildProcessError):
                continue
            killed.append(pid)
    return killed


def _children(parent: int) -> list[int]:
    return [pid for pid in _pids() if (fields := _stat_fields(pid)) and int(fields[1]) == parent]


def _pids() -> list[int]:
    """Every process id in ``/proc`` (none where it cannot be read)."""
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


# ---------------------------------------------------------------------------
# the reaper: no stage outlives gemswatch, even a SIGKILLed one


class _Reaper:
    """The client end: a pipe to the reaper process, started on first use."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.owner = 0  # the pid that started it (a forked child starts its own)
        self.ids = itertools.count(1)
        self.broken = False

    def send(self, message: dict) -> None:
        line = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        with self.lock:
            if self.broken or not os.path.isdir("/proc"):
                return
            if self.proc is None or self.owner != os.getpid() or self.proc.poll() is not None:
                try:
                    with spawning():
                        self.proc = subprocess.Popen(
                            [sys.executable, "-I", "-S", os.path.abspath(__file__), "--reaper"],
                            stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            close_fds=True,
                            start_new_session=True,  # Ctrl-C and a hang-up are for gemswatch
                        )
                        own_child(self.proc.pid)
                except OSError:
                    self.broken = True
                    return
                self.owner = os.getpid()
            try:
                self.proc.stdin.write(line)  # type: ignore[union-attr]
                self.proc.stdin.flush()  # type: ignore[union-attr]
            except (OSError, ValueError):  # it died: the next message starts another
                self.proc = None


_reaper = _Reaper()


def guard(marker: tuple[bytes, ...] | None) -> int:
    """Register a stage about to start; returns its handle. Call before the
    stage process exists, so no moment leaves it unregistered."""
    handle = next(_reaper.ids)
    if marker is not None:
        _reaper.send({"op": "add", "id": handle, "marker": [m.decode("utf-8", "surrogateescape") for m in marker]})
    return handle


def guard_group(handle: int, pgid: int) -> None:
    """The stage's process group, once it exists."""
    _reaper.send({"op": "group", "id": handle, "pgid": int(pgid)})


def unguard(handle: int) -> None:
    """The stage is over and reaped: forget it."""
    _reaper.send({"op": "drop", "id": handle})


def _reaper_main() -> None:
    """Keep the registered stages until stdin ends, then kill what is left."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    stages: dict[int, dict] = {}
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
            handle = int(msg["id"])
        except (ValueError, KeyError, TypeError):
            continue
        op = msg.get("op")
        if op == "drop":
            stages.pop(handle, None)
        elif op == "add":
            stages.setdefault(handle, {})["marker"] = tuple(str(m).encode("utf-8", "surrogateescape") for m in msg["marker"])
        elif op == "group":
            stages.setdefault(handle, {})["pgid"] = int(msg["pgid"])
    # End of file: gemswatch is gone (or closed us with stages still registered).
    for st in stages.values():
        pgid = st.get("pgid")
        if pgid and pgid > 1:
            signal_group(pgid)
    for st in stages.values():
        kill_marked(st.get("marker"))


if __name__ == "__main__" and sys.argv[1:] == ["--reaper"]:
    _reaper_main()
