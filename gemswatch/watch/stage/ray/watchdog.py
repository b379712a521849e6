"""What is left of a Ray cluster gemswatch started dies with gemswatch.

Ray shares the fate of the cluster's head processes with the driver that
started them, but not of their agents: a SIGKILLed gemswatch leaves Ray's
dashboard and runtime-env agents behind, for good (they wait on the dead
cluster). Every process of a cluster started here carries the environment
entry ``GEMSWATCH_RAY_SESSION=<id>`` (set before the cluster starts, so all
of them and their stages inherit it); this watchdog, this file run with
``python -I -S``, reads its pipe from gemswatch until end of file (however
gemswatch ended) and then SIGKILLs every process carrying the entry.
Linux only (``/proc``). Standard library only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

__all__ = ["MARKER_ENV", "Watchdog"]

MARKER_ENV = "GEMSWATCH_RAY_SESSION"


class Watchdog:
    """The driver's end: start it before the cluster, :meth:`close` after."""

    def __init__(self, session: str):
        self.entry = f"{MARKER_ENV}={session}"
        env = {k: v for k, v in os.environ.items() if k != MARKER_ENV}
        try:
            self.proc: subprocess.Popen | None = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), self.entry],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=env, close_fds=True, start_new_session=True,  # Ctrl-C is for gemswatch
            )
        except OSError:
            self.proc = None

    def close(self, wait: float = 5.0) -> None:
        """gemswatch is done with the cluster: whatever of it is left dies now."""
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(timeout=wait)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.proc = None


def _marked(entry: bytes) -> list[int]:
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if entry in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def _main(entry: bytes) -> None:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    sys.stdin.buffer.read()  # until gemswatch closes it, or dies
    for _ in range(20):  # again while one forks as we look
        pids = _marked(entry)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


if __name__ == "__main__" and len(sys.argv) == 2:
    _main(sys.argv[1].encode())
