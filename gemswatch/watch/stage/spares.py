"""Spare stages: fresh processes started ahead of need, one consumed per stage.

On a GPU the warm pool's forks are of little use: CUDA cannot be
initialised before a fork, so every forked stage still creates its CUDA
context and loads its modules onto the device, and the candidate's worker
(which the judge cannot fork once CUDA is up) starts as a fresh interpreter.
A :class:`SpareStarter` keeps, per GPU slot, a few spare processes that run
``gemswatch/warmpool/server.py`` in spare mode: each has imported the preload
list, created its CUDA context on its slot's GPU and started the candidate's
worker (``gemswatch/warmpool/worker_spare.py``), and waits for one stage. A
stage takes a ready spare (or waits for the one that will be ready first),
the spare becomes that stage by the warm pool's own code path (exact
command line, folder, environment, log), and a replacement starts at once.
A spare is our child, so the stage's exit status is its own.

A spare that could differ from a fresh process is never used: the server
refuses a spawn when a preloaded file changed (the pool's staleness check)
or the stage's ``CUDA_VISIBLE_DEVICES`` is not its own; a change the
watcher sees to one of the spares' files, or to the interpreter, preload
list or shared environment, replaces every spare at once.

It is a :class:`~.starter.StageStarter`, as :class:`~.warm.WarmStarter` is,
so the runner (:func:`~.supervise.run_process`) drives both the same way;
the state line, notes and give-up rule are :class:`~.starter.StarterBase`'s.
Nothing here imports torch.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from ...warmpool import worker_spare
from .starter import StageProcess, StarterBase
from .warm_pool import Pool, PoolDead, PoolSpec, SpareProcess, SpawnRefused, shared_env

__all__ = ["SpareStarter", "spares_per_slot", "spares_wanted"]

_GIVE_UP = ("import", "cuda", "spawn", "worker")  # failures another spare would repeat
_DEVICE = "CUDA_VISIBLE_DEVICES"


def spares_wanted(setting: str, device_kind: str) -> bool:
    """config.yaml's ``spares:`` (on, off, auto) for stages on ``device_kind``:
    auto is on for a GPU, where a fork cannot carry CUDA, and off for the
    CPU, where the warm pool's forks start faster and share memory."""
    return setting == "on" or (setting == "auto" and device_kind == "cuda")


def spares_per_slot(jobs: int, slots: int) -> int:
    """Spares to keep per device slot: one for each stage that may run on the
    slot at once, plus one, because a save runs preflight and then
    correctness at once after it (a replacement takes as long to start as a
    cold stage, so the second stage needs a spare of its own)."""
    return max(1, math.ceil(max(1, jobs) / max(1, slots))) + 1


class SpareStarter(StarterBase):
    """Hands stage commands to spare processes; None means "start it cold"
    (a :class:`~.starter.StageStarter`).

    Args:
        notify: receives one line for every change of state worth a note.
        log_path: where spares write their own stderr.
    """

    WHAT = "spares"
    FAILURES = "spares failed"
    MAX_FAILURES = 3  # spares in a row that failed to start before spares are turned off

    def __init__(self, notify: Callable[[str], None] | None = None, log_path: Path | None = None):
        super().__init__(notify, log_path)
        self._options: dict[str, object] = {}
        self._slots: dict[str | None, list[Pool]] = {}
        self._per_slot = 1
        self._announced = False

    # -- configuration ---------------------------------------------------------

    def configure(
        self,
        *,
        enabled: bool,
        python: str,
        cwd: str | os.PathLike,
        preload: Iterable[str],
        env: Mapping[str, str],
        slots: Sequence[str | None] = (None,),
        per_slot: int = 2,
        cuda: bool = False,
        worker: bool | None = None,
        why_off: str = "spares are off",
    ) -> None:
        """Keep ``per_slot`` spares on each of ``slots`` (a GPU id, or None
        for the CPU), started with this interpreter, project, preload list
        and environment. ``cuda``: spares create their CUDA context;
        ``worker``: they start the candidate's worker too (default: with
        ``cuda``). A change replaces every spare; ``enabled=False`` stops them."""
        spec = PoolSpec.make(python, str(cwd), tuple(preload), env)
        worker = cuda if worker is None else worker
        options: dict[str, object] = {"spare": True, "cuda": cuda}
        if worker:
            options["worker"] = worker_spare.__name__
        wanted = (spec.key, tuple(slots), per_slot, tuple(sorted(options.items())))
        with self._lock:
            if self._closed:
                return
            if not enabled:
                self._spec = None
                self._retire_all_locked()
                self._set_off_locked(why_off, note=False)
                return
            old = self._spec
            if old is not None and self._wanted() == wanted:
                return
            self._spec, self._options, self._per_slot = spec, options, max(1, per_slot)
            self._failures = 0
            self._announced = False
            self._off = None
            if old is not None:
                self.notify("spares: config.yaml changed the interpreter, preload list or environment; replacing the spares")
            self._retire_all_locked()
            self._slots = {slot: [] for slot in slots}
            self._fill_locked()

    def _wanted(self) -> tuple:
        assert self._spec is not None
        return (self._spec.key, tuple(self._slots), self._per_slot, tuple(sorted(self._options.items())))

    # -- spares ----------------------------------------------------------------

    def _env_for(self, slot: str | None) -> dict[str, str]:
        assert self._spec is not None
        env = dict(self._spec.env)
        if slot is not None:
            env[_DEVICE] = slot
        return env

    def _fill_locked(self) -> None:
        """Start spares until every slot has its number (a replacement included)."""
        spec = self._spec
        if spec is None or self._off is not None or self._closed:
            return
        for slot, spares in self._slots.items():
            while len(spares) < self._per_slot:
                env = self._env_for(slot)
                pool = Pool(PoolSpec.make(spec.python, spec.cwd, spec.preload, env), self.log_path, self._options)
                spares.append(pool)
                pool.start()
                threading.Thread(target=self._announce, args=(pool,), name="gemswatch-spare-ready", daemon=True).start()
        self._describe_locked()

    def _describe_locked(self) -> None:
        if self._off is not None:
            return
        spares = [p for ps in self._slots.values() for p in ps]
        ready = [p for p in spares if p.ready.is_set() and not p.error]
        where = ", ".join("cpu" if s is None else f"gpu {s}" for s in self._slots)
        if ready:
            secs = max(float(p.info.get("seconds", 0)) for p in ready)
            self._set_state(f"warm: {len(ready)}/{len(spares)} spare stages ready on {where} ({secs:.1f} s to start one)")
        else:
            assert self._spec is not None
            self._set_state(f"warm: starting {len(spares)} spare stages on {where} (preload {', '.join(self._spec.preload)})")

    def _announce(self, pool: Pool) -> None:
        pool.ready.wait()
        with self._lock:
            if not self._holds(pool):
                return
            if pool.error:
                self._failed_locked(pool)
                return
            self._failures = 0
            self._describe_locked()
            if not self._announced:  # once per configuration: replacements are routine
                self._announced = True
                self.notify(f"spares: {self._state.removeprefix('warm: ')}")

    def _holds(self, pool: Pool) -> bool:
        return any(pool in spares for spares in self._slots.values())

    def _drop_locked(self, pool: Pool) -> None:
        for spares in self._slots.values():
            if pool in spares:
                spares.remove(pool)
        if not pool.taken:
            threading.Thread(target=pool.close, name="gemswatch-spare-close", daemon=True).start()

    def _failed_locked(self, pool: Pool) -> None:
        self._drop_locked(pool)
        why = pool.error or "the spare failed"
        if pool.reason == "changed":  # a preloaded file was saved while it was imported: again
            self._fill_locked()
            return
        if pool.reason in _GIVE_UP:
            self._set_off_locked(why)
            return
        if self._count_failure_locked(why):
            return
        self.notify(f"spares: {why}; starting another")
        self._fill_locked()

    def _retire_all_locked(self) -> None:
        for spares in self._slots.values():
            for pool in list(spares):
                self._drop_locked(pool)

    def renew(self, why: str) -> None:
        """Replace every spare now (a file they preloaded changed)."""
        with self._lock:
            if self._spec is None or self._off is not None or self._closed:
                return
            self.notify(f"spares: {why}; replacing the spares")
            self._retire_all_locked()
            self._fill_locked()

    def note_changes(self, paths: Iterable[str | os.PathLike]) -> None:
        """Replace the spares when the watcher saw a change to one of their files."""
        with self._lock:
            files: set[str] = set()
            for spares in self._slots.values():
                for p in spares:
                    if p.ready.is_set() and not p.error:
                        files |= p.local_files
            hit = next((str(p) for p in paths if str(Path(p).resolve()) in files), None)
        if hit is not None:
            self.renew(f"{hit} changed")

    def ready_count(self, slot: str | None = None) -> int:
        """Spares ready now on ``slot`` (the first slot when None is not one)."""
        with self._lock:
            spares = self._slots.get(slot) if slot in self._slots else next(iter(self._slots.values()), [])
            return sum(1 for p in spares or [] if p.ready.is_set() and not p.error)

    def lost(self, proc: StageProcess) -> None:
        """Part of the starter surface: a spare's stage is never lost (its
        exit status is our child's own)."""

    # -- stages ----------------------------------------------------------------

    def _slot_for(self, env: Mapping[str, str]) -> tuple[bool, str | None]:
        """(whether a slot's spares have the stage's device, which slot)."""
        for slot in self._slots:
            if self._env_for(slot).get(_DEVICE) == env.get(_DEVICE):
                return True, slot
        return False, None

    def _take(self, slot: str | None, cancel: threading.Event | None) -> Pool | None:
        """A ready spare of ``slot`` (or the one that will be ready first),
        out of the list, its replacement started; None when there is none."""
        while True:
            with self._lock:
                if self._off is not None or self._closed:
                    return None
                spares = [p for p in self._slots.get(slot, []) if not p.error]
                if not spares:
                    return None
                ready = [p for p in spares if p.ready.is_set()]
                pool = ready[0] if ready else min(spares, key=lambda p: p.started_at)
            while not pool.ready.wait(0.05):
                if cancel is not None and cancel.is_set():
                    return None
            with self._lock:
                if not self._holds(pool):
                    continue  # replaced meanwhile
                if pool.error:
                    self._failed_locked(pool)
                    continue
                pool.taken = True  # from now on the stage's runner owns it
                self._drop_locked(pool)
                self._fill_locked()
                return pool

    def spawn(
        self,
        cmd: list[str],
        cwd: str | os.PathLike,
        env: Mapping[str, str],
        log_fd: int,
        cancel: threading.Event | None = None,
    ) -> SpareProcess | None:
        """Run ``cmd`` (``PYTHON -m pytest ARGS``) in a spare, its stdout and
        stderr on ``log_fd``. None when the stage must start cold: spares are
        off, none fits (another device, a changed file), or ``cancel`` was
        set while waiting for one."""
        cwd = str(cwd)
        with self._lock:
            if self._off is not None or self._closed or not self._usable(cmd, cwd):
                return None
            spec = self._spec
            assert spec is not None
            if shared_env(env) != shared_env(spec.env):
                # the stages' environment changed (config.yaml's env:): spares with it
                self._spec = spec.for_stage_env(env)
                self.notify("spares: the stages' environment changed; replacing the spares")
                self._retire_all_locked()
                self._fill_locked()
            known, slot = self._slot_for(env)
            if not known:
                return None
        for _ in range(self._per_slot + 1):
            pool = self._take(slot, cancel)
            if pool is None:
                return None
            try:
                return pool.spawn(cmd[3:], cwd, env, log_fd)  # type: ignore[return-value]
            except SpawnRefused as e:
                pool.taken = False
                pool.close(wait=2)
                if e.reason == "stale":
                    self.renew(e.message)
                return None  # e.g. another device or a missing folder: the cold start reports it
            except PoolDead:
                pool.taken = False
                pool.close(wait=2)
                continue
        return None

    def shutdown(self) -> None:
        """Stop every spare (stages already running in one are the runner's)."""
        with self._lock:
            self._closed = True
            pools = [p for ps in self._slots.values() for p in ps]
            self._slots = {slot: [] for slot in self._slots}
        for p in pools:
            p.close(wait=2)
