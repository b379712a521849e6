"""The candidate's worker, started ahead of its stage by a spare.

A stage on a GPU is two fresh interpreters: the judge (a spare of
:mod:`.server`) and the candidate's worker, which the judge cannot fork once
it has initialised CUDA. A spare therefore starts the worker too, while it
preloads itself (:func:`prestart`): the worker imports torch, Triton and the
library, creates its CUDA context and waits. The judge's
``CandidateWorker`` then takes it (:func:`take`) instead of starting one,
and hands it the stage (:meth:`Prestarted.hand_over`): its log on stdout
and stderr, its working folder, its environment, its scratch folder and
the protected trees. Only then does the worker sandbox itself and load a
candidate, exactly as a worker started at that moment would.

The worker is the spare's own child (the judge waits for it and it dies
with the judge) and shares its process group, so stopping the stage stops
it. One that would differ from a fresh worker (another ``PYTHONPATH`` or
``CUDA_VISIBLE_DEVICES`` than the stage has) is discarded and a fresh
worker starts instead.

Standard library only: the spare imports it before torch.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

__all__ = ["Prestarted", "prestart", "take", "wait_ready"]

READY_TIMEOUT = 180.0  # seconds the worker may take to preload
_BUFFER = 1 << 20
# What a fresh worker would take from the judge at its start and cannot change later.
_FIXED_AT_START = ("PYTHONPATH", "CUDA_VISIBLE_DEVICES")
_WORKER = "import sys; from gemswatch.testing.isolation.worker import main_spare; main_spare(sys.argv[1:])"


@dataclass
class Prestarted:
    """A worker waiting for its stage, and the judge's end of its socket."""

    proc: subprocess.Popen
    sock: socket.socket
    started_with: dict[str, str | None]

    def hand_over(self, out: int, err: int, scratch: Path, protected: Sequence[Path]) -> int:
        """Give the worker this stage (log descriptors, folder, environment,
        scratch folder, protected trees); returns its pid."""
        message = json.dumps({
            "op": "start",
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "scratch": str(scratch),
            "protected": [str(p) for p in protected],
        }).encode()
        socket.send_fds(self.sock, [message], [out, err])
        return self.proc.pid

    def discard(self) -> None:
        self.sock.close()  # it exits on end of file
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_held: Prestarted | None = None


def prestart() -> None:
    """Start the worker now, in this process's folder and environment (the
    spare's, which are the stage's but for its per-stage variables)."""
    global _held
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for s in (mine, theirs):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _BUFFER)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
    finally:
        theirs.close()
    _held = Prestarted(proc, mine, {k: os.environ.get(k) for k in _FIXED_AT_START})


def wait_ready(timeout: float = READY_TIMEOUT) -> dict[str, list[int] | None]:
    """Wait until the worker has preloaded; returns the state of each of its
    modules' files (``[mtime_ns, size, inode]``) for the staleness check.
    Raises RuntimeError when it failed or exited."""
    held = _held
    if held is None:
        return {}
    held.sock.settimeout(timeout)
    try:
        data = held.sock.recv(_BUFFER)
    except socket.timeout as e:
        raise RuntimeError(f"it did not preload within {timeout:g} s") from e
    finally:
        held.sock.settimeout(None)
    try:
        msg = json.loads(data) if data else {}
    except ValueError:
        msg = {}
    if msg.get("event") != "ready":
        raise RuntimeError(f"it exited ({held.proc.poll()}) before it was ready")
    return dict(msg.get("files") or {})


def take() -> Prestarted | None:
    """The pre-started worker, once; None when there is none, or when it
    would differ from a worker started now (it is discarded then)."""
    global _held
    held, _held = _held, None
    if held is None:
        return None
    if held.proc.poll() is not None or any(os.environ.get(k) != v for k, v in held.started_with.items()):
        held.discard()
        return None
    return held


def ready_message(files: dict[str, list[int] | None]) -> bytes:
    """The worker's side: what it says once it has preloaded."""
    return json.dumps({"event": "ready", "files": files}).encode()


def receive_stage(sock: socket.socket) -> tuple[dict, list[int]] | None:
    """The worker's side: wait for the stage (None: the spare is gone)."""
    try:
        data, fds, _, _ = socket.recv_fds(sock, _BUFFER, 2)
    except OSError:
        return None
    try:
        msg = json.loads(data) if data else {}
    except ValueError:
        msg = {}
    if msg.get("op") != "start" or len(fds) != 2:
        for fd in fds:
            os.close(fd)
        return None
    return msg, fds


def become_stage(msg: dict, fds: list[int]) -> None:
    """The worker's side: take the stage's log, folder and environment."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(msg["cwd"])
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in dict(msg["env"]).items()})
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
