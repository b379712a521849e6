"""A stage starter: what the runner asks for a process before it starts one cold.

:class:`StageStarter` is the surface :func:`~.supervise.run_process` and the
executors depend on; :class:`~.warm.WarmStarter` (forks from a warm pool)
and :class:`~.spares.SpareStarter` (spare processes started ahead of need)
have it. :class:`StarterBase` holds what the two share: the state line and
its listeners, the notes, turning off with a reason, counting failures
until it gives up, and which commands a starter can take at all.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable, Iterable, Mapping, Protocol

from .warm_pool import PoolSpec, SpareProcess, WarmProcess

__all__ = ["StageProcess", "StageStarter", "StarterBase"]

# A stage a starter started: the ``Popen`` surface the runner drives.
StageProcess = WarmProcess | SpareProcess


class StageStarter(Protocol):
    """Hands stage commands to processes made ready ahead of need; None means "start it cold"."""

    listeners: list[Callable[[str], None]]  # told each new state line

    @property
    def state(self) -> str:
        """One line for the dashboard: ``warm: ...`` or ``cold: <why>``."""
        ...

    @property
    def active(self) -> bool:
        """True when stages are meant to start warm (it may still be starting)."""
        ...

    def spawn(self, cmd: list[str], cwd: str | os.PathLike, env: Mapping[str, str], log_fd: int,
              cancel: threading.Event | None = None) -> StageProcess | None:
        """Start ``cmd`` (``PYTHON -m pytest ARGS``), its output on ``log_fd``; None: start it cold."""
        ...

    def lost(self, proc: StageProcess) -> None:
        """``proc`` died with what it ran in; the runner re-runs the stage cold."""
        ...

    def note_changes(self, paths: Iterable[str | os.PathLike]) -> None:
        """The watcher saw ``paths`` change: replace what preloaded one of them."""
        ...

    def shutdown(self) -> None:
        ...


class StarterBase:
    """The state, notes and give-up rule both starters share.

    Subclasses name themselves and what fails in their notes (:attr:`WHAT`,
    :attr:`FAILURES`), say how many failures turn them off
    (:attr:`MAX_FAILURES`) and stop what they hold when they turn off
    (:meth:`_retire_all_locked`). Methods ending in ``_locked`` are called
    with :attr:`_lock` held.
    """

    WHAT = "warm start"  # how notes name the starter
    FAILURES = "failures"  # how the give-up line counts them: "gave up after 3 failures"
    MAX_FAILURES = 3

    def __init__(self, notify: Callable[[str], None] | None = None, log_path: Path | None = None):
        self.notify = notify or (lambda text: None)
        self.log_path = log_path
        self.listeners: list[Callable[[str], None]] = []  # told the new state line
        self._lock = threading.RLock()
        self._spec: PoolSpec | None = None
        self._failures = 0
        self._off: str | None = "not configured"
        self._state = "cold: not configured"
        self._closed = False

    @property
    def state(self) -> str:
        """One line for the dashboard: ``warm: ...`` or ``cold: <why>``."""
        return self._state

    @property
    def active(self) -> bool:
        """True when stages are meant to start warm (it may still be starting)."""
        with self._lock:
            return self._off is None and self._spec is not None

    def _set_state(self, text: str) -> None:
        if text == self._state:
            return
        self._state = text
        for cb in list(self.listeners):
            try:
                cb(text)
            except Exception:  # noqa: BLE001 - a display must not break stages
                pass

    def _retire_all_locked(self) -> None:
        raise NotImplementedError

    def _set_off_locked(self, why: str, note: bool = True) -> None:
        self._off = why
        self._retire_all_locked()
        self._set_state(f"cold: {why}")
        if note:
            self.notify(f"{self.WHAT} unavailable: {why}; stages start cold")

    def _count_failure_locked(self, why: str) -> bool:
        """Count one more failure (``why``: the last one's reason); at
        :attr:`MAX_FAILURES` turn off and return True."""
        self._failures += 1
        if self._failures < self.MAX_FAILURES:
            return False
        self._set_off_locked(f"gave up after {self._failures} {self.FAILURES} (last: {why})")
        return True

    def _usable(self, cmd: list[str], cwd: str) -> bool:
        """Whether ``cmd`` in ``cwd`` is ``PYTHON -m pytest ...`` of the configured interpreter and project."""
        spec = self._spec
        return spec is not None and len(cmd) >= 3 and cmd[0] == spec.python and cmd[1:3] == ["-m", "pytest"] and cwd == spec.cwd
