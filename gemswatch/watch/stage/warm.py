"""Warm start, the watcher's side: when stages are forked from a warm pool.

A stage normally pays the interpreter start and ``import torch, triton``
(1.3-1.7 s on a CPU machine, about 4 s with CUDA). A :class:`WarmStarter`
keeps one pool process (``gemswatch/warmpool/server.py``) per interpreter, project,
preload list and environment; the pool has imported those modules once and
forks a fresh child per stage, which runs ``pytest`` in-process exactly as
``python -m pytest`` would. The child is a :class:`WarmProcess`: the runner
waits on it, times it out and stops its process group like a ``Popen``.
This module is the policy (when to start, restart, give up, go cold); the
socket protocol with one pool process is :mod:`.warm_pool`, whose public
names are re-exported here.

Invalidation: a spawn is refused by the pool when a preloaded module's file
changed (it checks every file before each fork); a change the watcher sees
to one of the pool's own (non-installed) files, or a config change of the
preload list, interpreter or environment, restarts the pool at once. When a
pool cannot start or dies, stages start cold and the starter says so.

Nothing here imports torch or the operator library: the pool does.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable, Iterable, Mapping

from .starter import StageProcess, StarterBase
from .warm_pool import (
    PER_STAGE_KEYS,
    REPLY_TIMEOUT,
    SERVER,
    START_TIMEOUT,
    Pool,
    PoolDead,
    PoolSpec,
    SpawnRefused,
    WarmProcess,
    shared_env,
)

__all__ = [
    "PER_STAGE_KEYS",
    "REPLY_TIMEOUT",
    "SERVER",
    "START_TIMEOUT",
    "WarmProcess",
    "WarmStarter",
]

MAX_RESTARTS_IN_A_ROW = 5  # restarts for changed sources before one stage goes cold
_GIVE_UP = ("import", "threads", "cuda", "spawn")  # failures that a restart cannot fix


class WarmStarter(StarterBase):
    """Hands stage commands to a warm pool; None means "start it cold"
    (a :class:`~.starter.StageStarter`).

    Args:
        notify: receives one line for every change of warm-start state
            (ready, restarted and why, unavailable and why).
        log_path: where pools write their own stderr.
    """

    WHAT = "warm start"
    FAILURES = "pool failures"
    MAX_FAILURES = 3  # pools that died or timed out before warm start is turned off

    def __init__(self, notify: Callable[[str], None] | None = None, log_path: Path | None = None):
        super().__init__(notify, log_path)
        self._pool: Pool | None = None
        self._retired: list[Pool] = []
        self._restarts_in_a_row = 0

    # -- configuration ---------------------------------------------------------

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
        spec = PoolSpec.make(python, str(cwd), tuple(preload), env)
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

    # -- pools -----------------------------------------------------------------

    def _start_locked(self) -> Pool:
        spec = self._spec
        assert spec is not None
        pool = Pool(spec, self.log_path)
        self._pool = pool
        self._set_state("warm: starting the pool (preload " + ", ".join(spec.preload) + ")")
        pool.start()
        threading.Thread(target=self._announce, args=(pool,), name="gemswatch-warm-ready", daemon=True).start()
        return pool

    def _announce(self, pool: Pool) -> None:
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

    def _pool_error_locked(self, pool: Pool) -> bool:
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

    def _retire_locked(self, pool: Pool | None = None) -> None:
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

    def _retire_all_locked(self) -> None:
        self._retire_locked()  # the current pool; retired ones finish their stages

    def _reap_retired_locked(self) -> None:
        keep = []
        for p in self._retired:
            if p.alive():
                keep.append(p)
            else:
                p.close(wait=0.5)
        self._retired = keep

    def restart(self, why: str, pool: Pool | None = None) -> None:
        """Replace the pool now (the old one finishes its running stages)."""
        with self._lock:
            if self._spec is None or self._off is not None or self._closed:
                return
            if pool is not None and pool is not self._pool:
                return  # already replaced
            self.notify(f"warm start: {why}; restarting the pool")
            self._retire_locked()
            self._start_locked()

    def _pool_failed_locked(self, pool: Pool, why: str) -> None:
        if pool is not self._pool:
            return
        self._retire_locked(pool)
        spec = self._spec
        if pool.reason == "cuda" and spec is not None and pool.culprit in spec.preload:
            # A module that starts CUDA when imported (flag_gems does) cannot be
            # preloaded; the rest still can, and each stage imports it itself.
            rest = tuple(m for m in spec.preload if m != pool.culprit)
            self._spec = PoolSpec.make(spec.python, spec.cwd, rest, spec.env)
            self.notify(f"warm start: {pool.culprit} initialises CUDA when imported, so each stage imports it; "
                        f"the pool preloads {', '.join(rest) or 'nothing'}")
            self._start_locked()
            return
        if pool.reason in _GIVE_UP:
            self._set_off_locked(why)
            return
        if self._count_failure_locked(why):
            return
        self.notify(f"warm start: {why}; restarting the pool (stages start cold until it is ready)")
        self._start_locked()

    def lost(self, proc: StageProcess) -> None:
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

    def _follow_env_locked(self, env: Mapping[str, str]) -> None:
        """A stage whose environment differs from the pool's (beyond the
        per-stage variables) needs a pool started with that environment."""
        spec = self._spec
        assert spec is not None
        if shared_env(env) == shared_env(spec.env):
            return
        self._spec = spec.for_stage_env(env)
        if self._pool is not None:
            self.notify("warm start: the stages' environment changed; restarting the pool")
        self._retire_locked()
        self._start_locked()

    def _ready_pool(self, cancel: threading.Event | None) -> tuple[Pool | None, bool]:
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
            return None, replacing and pool.reason in ("changed", "cuda")

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
            except SpawnRefused as e:
                if e.reason in ("stale", "polluted", "draining"):
                    self.restart(e.message, pool)
                    continue
                return None  # e.g. a missing folder: the cold start reports it
            except PoolDead as e:
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
