"""Warm start, the watcher's side: stage processes forked from a warm pool.

A stage normally pays the interpreter start and ``import torch, triton``
(1.3-1.7 s on a CPU machine, about 4 s with CUDA). A :class:`WarmStarter`
keeps one pool process (``gemswatch/warmpool/server.py``) per interpreter, project,
preload list and environment; the pool has imported those modules once and
forks a fresh child per stage, which runs ``pytest`` in-process exactly as
``python -m pytest`` would. The child is a :class:`WarmProcess`: the runner
waits on it, times it out and stops its process group like a ``Popen``.

Invalidation: a spawn is refused by the pool when a preloaded module's file
changed (it checks every file before each fork); a change the watcher sees
to one of the pool's own (non-installed) files, or a config change of the
preload list, interpreter or environment, restarts the pool at once. When a
pool cannot start or dies, stages start cold and the starter says so.

Nothing here imports torch or the operator library: the pool does.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ...warmpool import server as _server
from .reaper import signal_group

__all__ = [
    "PER_STAGE_KEYS",
    "SERVER",
    "WarmProcess",
    "WarmStarter",
]

SERVER = Path(_server.__file__).resolve()
# Runs the server by path: the stages' interpreter need not have gemswatch installed.
_BOOT = "import runpy, sys; del sys.argv[0]; runpy.run_path(sys.argv[0], run_name='__main__')"
# Variables a stage may set differently from its pool (the server's own list).
PER_STAGE_KEYS = _server.PER_STAGE_KEYS
START_TIMEOUT = 180.0  # seconds a pool may take to import its preload list
REPLY_TIMEOUT = 30.0  # seconds the pool may take to answer a spawn
MAX_FAILURES = 3  # pools that died or timed out before warm start is turned off
MAX_RESTARTS_IN_A_ROW = 5  # restarts for changed sources before one stage goes cold
_GIVE_UP = ("import", "threads", "cuda", "spawn")  # failures that a restart cannot fix
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


def _shared_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of a stage environment the pool must have too."""
    return {k: v for k, v in env.items() if k not in PER_STAGE_KEYS}


def _key(python: str, cwd: str, preload: tuple[str, ...], env: Mapping[str, str]) -> str:
    """What a pool is for: a stage may use it only when all of these match."""
    data = [python, cwd, list(preload), sorted(_shared_env(env).items())]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16]


class _Refused(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


class _PoolDead(Exception):
    pass


class WarmProcess:
    """A stage forked by the pool, with the ``Popen`` surface the runner uses
    (``pid``, ``poll()``, ``wait(timeout)``, ``returncode``).

    ``pid`` is also the stage's process group. The exit status comes from the
    pool. If the pool dies first the stage's group is killed and ``lost`` is
    set (``returncode`` stays None): the runner then re-runs the stage cold.
    """

    warm = True

    def __init__(self, conn: socket.socket, pid: int, pool: "_Pool"):
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


class _Pool:
    """One pool process and its control socket."""

    def __init__(self, spec: "_Spec", log_path: Path | None):
        self.spec = spec
        self.log_path = log_path
        self.ready = threading.Event()
        self.info: dict = {}
        self.local_files: frozenset[str] = frozenset()
        self.error: str | None = None
        self.reason: str | None = None
        self.proc: subprocess.Popen | None = None
        self.ctl: socket.socket | None = None
        self._send_lock = threading.Lock()
        self.closed = False

    def start(self) -> None:
        parent, child = _socketpair()
        log = None
        try:
            if self.log_path is not None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [self.spec.python, "-c", _BOOT, str(SERVER), str(child.fileno()), json.dumps(list(self.spec.preload))],
                cwd=self.spec.cwd,
                env=self.spec.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log if log is not None else subprocess.DEVNULL,
                pass_fds=(child.fileno(),),
                start_new_session=True,  # Ctrl-C in the terminal is for gemswatch only
            )
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
            self.close()
            self._fail(str(msg.get("reason") or "error"), str(msg.get("message") or "the pool failed"))
            return
        self.close()
        rc = self.proc.poll()
        where = f"; see {self.log_path}" if self.log_path else ""
        self._fail("exited", f"the pool exited ({rc}) before it was ready{where}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None and not self.closed

    def spawn(self, argv: list[str], cwd: str, env: Mapping[str, str], log_fd: int) -> WarmProcess:
        if self.ctl is None or not self.alive():
            raise _PoolDead("the pool is not running")
        mine, theirs = _socketpair()
        request = json.dumps({"op": "spawn", "argv": list(argv), "cwd": cwd, "env": dict(env)}).encode()
        try:
            with self._send_lock:
                socket.send_fds(self.ctl, [request], [theirs.fileno(), log_fd])
        except OSError as e:
            mine.close()
            raise _PoolDead(f"cannot reach the pool: {e.strerror or e}") from e
        finally:
            theirs.close()
        mine.settimeout(REPLY_TIMEOUT)
        _, msg = _receive(mine, _MAX_MESSAGE)
        if msg.get("event") == "started" and isinstance(msg.get("pid"), int):
            mine.settimeout(None)
            return WarmProcess(mine, msg["pid"], self)
        mine.close()
        if msg.get("event") == "refused":
            raise _Refused(str(msg.get("reason")), str(msg.get("message")))
        raise _PoolDead("the pool did not answer")

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
class _Spec:
    python: str
    cwd: str
    preload: tuple[str, ...]
    env: dict[str, str]
    key: str

    @classmethod
    def make(cls, python: str, cwd: str, preload: tuple[str, ...], env: Mapping[str, str]) -> "_Spec":
        return cls(python, cwd, preload, dict(env), _key(python, cwd, preload, env))


class WarmStarter:
    """Hands stage commands to a warm pool; None means "start it cold".

    Args:
        notify: receives one line for every change of warm-start state
            (ready, restarted and why, unavailable and why).
        log_path: where pools write their own stderr.
    """

    def __init__(self, notify: Callable[[str], None] | None = None, log_path: Path | None = None):
        self.notify = notify or (lambda text: None)
        self.log_path = log_path
        self.listeners: list[Callable[[str], None]] = []  # told the new state line
        self._lock = threading.RLock()
        self._spec: _Spec | None = None
        self._pool: _Pool | None = None
        self._retired: list[_Pool] = []
        self._failures = 0
        self._restarts_in_a_row = 0
        self._off: str | None = "not configured"
        self._state = "cold: not configured"
        self._closed = False

    # -- configuration ---------------------------------------------------------

    @property
    def state(self) -> str:
        """One line for the dashboard: ``warm: ...`` or ``cold: <why>``."""
        return self._state

    @property
    def active(self) -> bool:
        """True when stages are meant to start warm (the pool may still be starting)."""
        with self._lock:
            return self._off is None and self._spec is not None

    def configure(
        self,
        *,
        enabled: bool,
        python: str,
        cwd: str | os.PathLike,
        preload: Iterable[str],
        env: Mapping[str, str],
        why_off: str = "warm start is off",
    ) -> None:
        """Use this interpreter, project, preload list and environment from
        now on. A change restarts the pool at once; ``enabled=False`` stops it."""
        spec = _Spec.make(python, str(cwd), tuple(preload), env)
        with self._lock:
            if self._closed:
                return
            if not enabled:
                self._spec = None
                self._retire_locked()
                self._set_off_locked(why_off, note=False)
                return
            old = self._spec
            if old is not None and old.key == spec.key:
                return  # unchanged (a pool that failed is not retried for an unrelated edit)
            self._spec = spec
            self._failures = 0
            self._off = None
            if old is not None and self._pool is not None:
                self.notify("warm start: config.yaml changed the interpreter, preload list or environment; restarting the pool")
            self._retire_locked()
            self._start_locked()

    def _set_state(self, text: str) -> None:
        if text == self._state:
            return
        self._state = text
        for cb in list(self.listeners):
            try:
                cb(text)
            except Exception:  # noqa: BLE001 - a display must not break stages
                pass

    def _set_off_locked(self, why: str, note: bool = True) -> None:
        self._off = why
        self._set_state(f"cold: {why}")
        if note:
            self.notify(f"warm start unavailable: {why}; stages start cold")

    # -- pools -----------------------------------------------------------------

    def _start_locked(self) -> _Pool:
        spec = self._spec
        assert spec is not None
        pool = _Pool(spec, self.log_path)
        self._pool = pool
        self._set_state("warm: starting the pool (preload " + ", ".join(spec.preload) + ")")
        pool.start()
        threading.Thread(target=self._announce, args=(pool,), name="gemswatch-warm-ready", daemon=True).start()
        return pool

    def _announce(self, pool: _Pool) -> None:
        pool.ready.wait()
        with self._lock:
            if pool.error:
                self._pool_error_locked(pool)
                return
            if self._pool is not pool:
                return
            self._restarts_in_a_row = 0
            info = pool.info
            ready = f"pool {info.get('pid')} ready ({info.get('seconds', 0):.1f} s to preload {', '.join(pool.spec.preload)})"
            self._set_state(f"warm: {ready}")
            self.notify(f"warm start: {ready}")

    def _pool_error_locked(self, pool: _Pool) -> bool:
        """Handle a pool that failed to start; True when a replacement is starting."""
        if pool is self._pool:
            if pool.reason == "changed" and self._restarts_in_a_row < MAX_RESTARTS_IN_A_ROW:
                # a preloaded file was saved while it was being imported: again
                self._restarts_in_a_row += 1
                self._retire_locked(pool)
                self._start_locked()
            else:
                self._pool_failed_locked(pool, pool.error or "the pool failed")
        return self._pool is not None and self._off is None and not self._closed

    def _retire_locked(self, pool: _Pool | None = None) -> None:
        pool = pool or self._pool
        if pool is None:
            return
        if pool is self._pool:
            self._pool = None
        if pool.ready.is_set() and not pool.error:
            pool.drain()  # its running stages finish; then it exits
            self._retired.append(pool)
        else:
            pool.close()  # still preloading (or failed): nothing of it is needed
        self._reap_retired_locked()

    def _reap_retired_locked(self) -> None:
        keep = []
        for p in self._retired:
            if p.alive():
                keep.append(p)
            else:
                p.close(wait=0.5)
        self._retired = keep

    def restart(self, why: str, pool: _Pool | None = None) -> None:
        """Replace the pool now (the old one finishes its running stages)."""
        with self._lock:
            if self._spec is None or self._off is not None or self._closed:
                return
            if pool is not None and pool is not self._pool:
                return  # already replaced
            self.notify(f"warm start: {why}; restarting the pool")
            self._retire_locked()
            self._start_locked()

    def _pool_failed_locked(self, pool: _Pool, why: str) -> None:
        if pool is not self._pool:
            return
        self._retire_locked(pool)
        if pool.reason in _GIVE_UP:
            self._set_off_locked(why)
            return
        self._failures += 1
        if self._failures >= MAX_FAILURES:
            self._set_off_locked(f"gave up after {self._failures} pool failures (last: {why})")
            return
        self.notify(f"warm start: {why}; restarting the pool (stages start cold until it is ready)")
        self._start_locked()

    def lost(self, proc: WarmProcess) -> None:
        """A stage's pool died under it (the runner re-runs the stage cold)."""
        rc = proc.pool.proc.poll() if proc.pool.proc is not None else None
        with self._lock:
            self._pool_failed_locked(proc.pool, f"the warm pool died (exit status {rc})")

    def note_changes(self, paths: Iterable[str | os.PathLike]) -> None:
        """Restart now when the watcher saw a change to one of the pool's own files."""
        with self._lock:
            pool = self._pool
            if pool is None or not pool.ready.is_set() or pool.error:
                return
            hit = next((str(p) for p in paths if str(Path(p).resolve()) in pool.local_files), None)
        if hit is not None:
            self.restart(f"{hit} changed", pool)

    # -- stages ----------------------------------------------------------------

    def _usable(self, cmd: list[str], cwd: str) -> bool:
        spec = self._spec
        return spec is not None and len(cmd) >= 3 and cmd[0] == spec.python and cmd[1:3] == ["-m", "pytest"] and cwd == spec.cwd

    def _follow_env_locked(self, env: Mapping[str, str]) -> None:
        """A stage whose environment differs from the pool's (beyond the
        per-stage variables) needs a pool started with that environment."""
        spec = self._spec
        assert spec is not None
        shared = _shared_env(env)
        if shared == _shared_env(spec.env):
            return
        new_env = {**shared, **{k: v for k, v in spec.env.items() if k in PER_STAGE_KEYS}}
        self._spec = _Spec.make(spec.python, spec.cwd, spec.preload, new_env)
        if self._pool is not None:
            self.notify("warm start: the stages' environment changed; restarting the pool")
        self._retire_locked()
        self._start_locked()

    def _ready_pool(self, cancel: threading.Event | None) -> tuple[_Pool | None, bool]:
        """(the ready pool, or None; whether a replacement is worth waiting for)."""
        with self._lock:
            if self._off is not None or self._spec is None or self._closed:
                return None, False
            pool = self._pool or self._start_locked()
        while not pool.ready.wait(0.05):
            if cancel is not None and cancel.is_set():
                return None, False
        if not pool.error:
            return pool, False
        with self._lock:
            replacing = self._pool_error_locked(pool)
            return None, replacing and pool.reason == "changed"

    def spawn(
        self,
        cmd: list[str],
        cwd: str | os.PathLike,
        env: Mapping[str, str],
        log_fd: int,
        cancel: threading.Event | None = None,
    ) -> WarmProcess | None:
        """Fork ``cmd`` (``PYTHON -m pytest ARGS``) from the pool, its stdout and
        stderr on ``log_fd``. Returns None when the stage must start cold: warm
        start is off, the pool could not start, or ``cancel`` was set while
        waiting for it. Waits for a pool that is still preloading."""
        cwd = str(cwd)
        with self._lock:
            if self._off is not None or self._closed or not self._usable(cmd, cwd):
                return None
            self._reap_retired_locked()
            self._follow_env_locked(env)
        for _ in range(MAX_RESTARTS_IN_A_ROW):
            pool, again = self._ready_pool(cancel)
            if pool is None:
                if again:
                    continue
                return None
            try:
                return pool.spawn(cmd[3:], cwd, env, log_fd)
            except _Refused as e:
                if e.reason in ("stale", "polluted", "draining"):
                    self.restart(e.message, pool)
                    continue
                return None  # e.g. a missing folder: the cold start reports it
            except _PoolDead as e:
                with self._lock:
                    self._pool_failed_locked(pool, f"the warm pool died ({e})")
                return None
        return None

    def shutdown(self) -> None:
        """Stop every pool (and with them any stage still running in one)."""
        with self._lock:
            self._closed = True
            pools = ([self._pool] if self._pool else []) + self._retired
            self._pool = None
            self._retired = []
        for p in pools:
            p.close()
