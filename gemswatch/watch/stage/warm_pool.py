"""The socket protocol with one warm pool process, the watcher's end.

A :class:`Pool` starts one pool process (``gemswatch/warmpool/server.py``,
run by path in the stages' interpreter), waits for it to report ``ready``
and asks it over a ``SOCK_SEQPACKET`` control socket to fork one stage per
request; the stage comes back as a :class:`WarmProcess` with the ``Popen``
surface the runner uses. A :class:`PoolSpec` says what a pool is for
(interpreter, project, preload list, shared environment). A refusal raises
:class:`SpawnRefused`, a pool that is gone :class:`PoolDead`. When to start,
restart or give up on a pool is decided elsewhere (:mod:`.warm`).

Nothing here imports torch or the operator library: the pool does.
"""

from __future__ import annotations

import hashlib
import json
import select
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from . import reaper as care
from ...warmpool import server as _server
from .reaper import signal_group

__all__ = [
    "PER_STAGE_KEYS",
    "REPLY_TIMEOUT",
    "SERVER",
    "START_TIMEOUT",
    "Pool",
    "PoolDead",
    "PoolSpec",
    "SpareProcess",
    "SpawnRefused",
    "WarmProcess",
    "shared_env",
]

SERVER = Path(_server.__file__).resolve()
# Runs the server by path: the stages' interpreter need not have gemswatch installed.
_BOOT = "import runpy, sys; del sys.argv[0]; runpy.run_path(sys.argv[0], run_name='__main__')"
# Variables a stage may set differently from its pool (the server's own list).
PER_STAGE_KEYS = _server.PER_STAGE_KEYS
START_TIMEOUT = 180.0  # seconds a pool may take to import its preload list
REPLY_TIMEOUT = 30.0  # seconds the pool may take to answer a spawn
_MAX_MESSAGE = _server.MAX_MESSAGE


def _receive(sock: socket.socket, size: int) -> tuple[bytes, dict]:
    """One message from the pool: its bytes (empty when the socket closed or
    failed) and its JSON object (empty when it is not one)."""
    try:
        data = sock.recv(size)
    except OSError:
        return b"", {}
    return data, _decode(data)


def _decode(data: bytes) -> dict:
    """A message's JSON object (empty when there is none)."""
    try:
        msg = json.loads(data) if data else {}
    except ValueError:
        msg = {}
    return msg if isinstance(msg, dict) else {}


def _socketpair() -> tuple[socket.socket, socket.socket]:
    """Connected message sockets, with room for a large message (an
    environment, the pool's file list) in one piece."""
    pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    for s in pair:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _MAX_MESSAGE)
    return pair


def shared_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of a stage environment the pool must have too."""
    return {k: v for k, v in env.items() if k not in PER_STAGE_KEYS}


def _pool_key(python: str, cwd: str, preload: tuple[str, ...], env: Mapping[str, str]) -> str:
    """What a pool is for: a stage may use it only when all of these match."""
    data = [python, cwd, list(preload), sorted(shared_env(env).items())]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16]


class SpawnRefused(Exception):
    """The pool would not fork this stage; ``reason`` is its word for why
    (``stale``, ``polluted``, ``draining``, ...)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


class PoolDead(Exception):
    """The pool is not running, or stopped answering."""


class WarmProcess:
    """A stage forked by the pool, with the ``Popen`` surface the runner uses
    (``pid``, ``poll()``, ``wait(timeout)``, ``returncode``).

    ``pid`` is also the stage's process group. The exit status comes from the
    pool. If the pool dies first the stage's group is killed and ``lost`` is
    set (``returncode`` stays None): the runner then re-runs the stage cold.
    """

    warm = True

    def __init__(self, conn: socket.socket, pid: int, pool: "Pool"):
        self.pid = pid
        self.pool = pool
        self.returncode: int | None = None
        self.lost = False
        self._conn = conn
        self._lock = threading.RLock()  # the runner's thread and a Ctrl-C handler may both poll

    @property
    def done(self) -> bool:
        return self.returncode is not None or self.lost

    def poll(self) -> int | None:
        self._check(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        self._check(timeout)
        if not self.done:
            raise subprocess.TimeoutExpired(f"warm stage {self.pid}", timeout or 0.0)
        return self.returncode

    def _check(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if self.done:
                    return
                left = 0.05 if deadline is None else max(0.0, min(0.05, deadline - time.monotonic()))
                ready, _, _ = select.select([self._conn], [], [], left)
                if ready:
                    self._read()
                if self.done:
                    return
            if deadline is not None and time.monotonic() >= deadline:
                return

    def _read(self) -> None:
        data, msg = _receive(self._conn, 4096)
        if data and msg.get("event") != "exit":
            return
        self._conn.close()
        if isinstance(msg.get("returncode"), int):
            self.returncode = msg["returncode"]
        else:
            # The pool is gone: its stage may live on as an orphan.
            signal_group(self.pid)
            self.lost = True


class SpareProcess:
    """A spare that became a stage: the ``Popen`` surface of the spare's own
    process (it is our child, so its exit status is the stage's)."""

    warm = True
    lost = False

    def __init__(self, pool: "Pool"):
        assert pool.proc is not None
        self.pool = pool
        self._proc = pool.proc
        self.pid = pool.proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def poll(self) -> int | None:
        return self._proc.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        return self._proc.wait(timeout)


class Pool:
    """One pool process and its control socket.

    ``spare``: the server's spare options (it becomes one stage itself,
    see ``gemswatch/warmpool/server.py``); None for a pool that forks.
    """

    def __init__(self, spec: "PoolSpec", log_path: Path | None, spare: Mapping[str, object] | None = None):
        self.spec = spec
        self.log_path = log_path
        self.spare = dict(spare) if spare is not None else None
        self.taken = False  # a spare handed its stage
        self.started_at = 0.0
        self.ready = threading.Event()
        self.info: dict = {}
        self.local_files: frozenset[str] = frozenset()
        self.error: str | None = None
        self.reason: str | None = None
        self.culprit: str | None = None  # the preloaded module the pool's failure names (CUDA at import)
        self.proc: subprocess.Popen | None = None
        self.ctl: socket.socket | None = None
        self._send_lock = threading.Lock()
        self.closed = False

    def start(self) -> None:
        parent, child = _socketpair()
        self.started_at = time.monotonic()
        argv = [str(child.fileno()), json.dumps(list(self.spec.preload))]
        if self.spare is not None:
            argv.append(json.dumps(self.spare))
        log = None
        try:
            if self.log_path is not None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                log = open(self.log_path, "ab")
            with care.spawning():
                self.proc = subprocess.Popen(
                    [self.spec.python, "-c", _BOOT, str(SERVER), *argv],
                    cwd=self.spec.cwd,
                    env=self.spec.env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log if log is not None else subprocess.DEVNULL,
                    pass_fds=(child.fileno(),),
                    start_new_session=True,  # Ctrl-C in the terminal is for gemswatch only
                )
                care.own_child(self.proc.pid)
        except OSError as e:
            parent.close()
            self._fail("spawn", f"cannot start {self.spec.python}: {e.strerror or e}")
            return
        finally:
            child.close()
            if log is not None:
                log.close()
        self.ctl = parent
        threading.Thread(target=self._await_ready, name="gemswatch-warm-start", daemon=True).start()

    def _fail(self, reason: str, message: str) -> None:
        self.reason, self.error = reason, message
        self.ready.set()

    def _await_ready(self) -> None:
        assert self.ctl is not None and self.proc is not None
        self.ctl.settimeout(START_TIMEOUT)
        try:
            data = self.ctl.recv(_MAX_MESSAGE)
        except socket.timeout:
            self.close()
            self._fail("timeout", f"the pool did not preload within {START_TIMEOUT:g} s")
            return
        except OSError:
            data = b""
        try:
            self.ctl.settimeout(None)
        except OSError:  # closed meanwhile (shutdown)
            data = b""
        msg = _decode(data)
        if msg.get("event") == "ready":
            self.info = msg
            self.local_files = frozenset(str(p) for p in msg.get("local_files", []))
            self.ready.set()
            return
        if msg.get("event") == "failed":
            self.culprit = msg.get("module") if isinstance(msg.get("module"), str) else None
            self.close()
            self._fail(str(msg.get("reason") or "error"), str(msg.get("message") or "the pool failed"))
            return
        self.close()
        rc = self.proc.poll()
        where = f"; see {self.log_path}" if self.log_path else ""
        self._fail("exited", f"the pool exited ({rc}) before it was ready{where}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and not self.closed

    def spawn(self, argv: list[str], cwd: str, env: Mapping[str, str], log_fd: int) -> WarmProcess | SpareProcess:
        if self.ctl is None or not self.alive():
            raise PoolDead("the pool is not running")
        mine, theirs = _socketpair()
        request = json.dumps({"op": "spawn", "argv": list(argv), "cwd": cwd, "env": dict(env)}).encode()
        try:
            with self._send_lock:
                socket.send_fds(self.ctl, [request], [theirs.fileno(), log_fd])
        except OSError as e:
            mine.close()
            raise PoolDead(f"cannot reach the pool: {e.strerror or e}") from e
        finally:
            theirs.close()
        mine.settimeout(REPLY_TIMEOUT)
        _, msg = _receive(mine, _MAX_MESSAGE)
        if msg.get("event") == "started" and isinstance(msg.get("pid"), int):
            if self.spare is not None and msg["pid"] == self.proc.pid:
                mine.close()  # the spare is the stage: its exit status is its own
                self.taken = True
                return SpareProcess(self)
            mine.settimeout(None)
            return WarmProcess(mine, msg["pid"], self)
        mine.close()
        if msg.get("event") == "refused":
            raise SpawnRefused(str(msg.get("reason")), str(msg.get("message")))
        raise PoolDead("the pool did not answer")

    def drain(self) -> None:
        """Take no more stages; the pool exits once its running stages end."""
        if self.ctl is None or self.closed:
            return
        try:
            with self._send_lock:
                self.ctl.send(json.dumps({"op": "drain"}).encode())
        except OSError:
            self.close()

    def close(self, wait: float = 5.0) -> None:
        """Close the control socket: the pool kills its stages and exits
        (one still preloading has no stages and is killed at once)."""
        self.closed = True
        if self.taken:
            return  # the stage's runner waits for it and stops it
        if self.proc is not None and (not self.ready.is_set() or self.error):
            signal_group(self.proc.pid)
        if self.ctl is not None:
            try:
                self.ctl.close()
            except OSError:
                pass
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            signal_group(self.proc.pid)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - unkillable
                pass


@dataclass(frozen=True)
class PoolSpec:
    """What a pool is for; ``key`` tells two specs apart (the per-stage
    variables of ``env`` left out)."""

    python: str
    cwd: str
    preload: tuple[str, ...]
    env: dict[str, str]
    key: str

    @classmethod
    def make(cls, python: str, cwd: str, preload: tuple[str, ...], env: Mapping[str, str]) -> "PoolSpec":
        return cls(python, cwd, preload, dict(env), _pool_key(python, cwd, preload, env))

    def for_stage_env(self, env: Mapping[str, str]) -> "PoolSpec":
        """This spec with a stage's shared environment (its own per-stage variables kept)."""
        new_env = {**shared_env(env), **{k: v for k, v in self.env.items() if k in PER_STAGE_KEYS}}
        return PoolSpec.make(self.python, self.cwd, self.preload, new_env)
