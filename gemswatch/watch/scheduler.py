"""Jobs: which stage runs next, where, and what a new save cancels.

- At most ``jobs`` stages run at once, each on a device slot (a GPU id, or
  None for the CPU). A benchmark stage has its device to itself while it
  times; preflight and correctness may share.
- One file never has two stages running at once: a new save cancels the
  file's run in flight (``superseded``) and its first stage waits until the
  old process group is gone. The cancelled stage gives its job slot back at
  once, so other files do not wait for it to die (a benchmark keeps its
  device to itself until its process is gone).
- Stages are taken in the order their runs were queued (a run's later
  stages keep its place), so many files saved at once finish in save order,
  ``jobs`` at a time, and a file saved again goes to the back.
- A stage that does not pass gates the rest of its run (``not_run``), except
  an all-skipped correctness.

The stages themselves come from a :class:`~.stage.StageRunner` (plan, then
execute), so the policy is tested with fake stages and no processes.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from .stage import Run, StageResult, StageRunner
from .status import CRASHED, NOT_RUN, SUPERSEDED, gates, overall_status

__all__ = ["Scheduler"]

_IDLE_WAIT = 1.0  # seconds an idle worker sleeps between checks without a notify (a safety net)



class Emit(Protocol):
    """Where the scheduler's events go (:meth:`~.events.EventBus.emit`)."""

    def __call__(self, event: str, **fields: Any) -> Any:
        ...


def run_fields(run: Run) -> dict[str, Any]:
    """Fields every event about a run carries."""
    return {
        "run_id": run.run_id,
        "candidate": run.candidate.rel,
        "content_sha256": run.sha256,
        "operators": run.candidate.ops,
        "functions": dict(run.candidate.operators),
    }


class Scheduler:
    """A pool of ``jobs`` worker threads pulling stage tasks in run order."""

    def __init__(
        self,
        stages: StageRunner,
        emit: Emit,
        jobs: int = 1,
        devices: list[str | None] | None = None,
        exclusive_stages: frozenset[str] = frozenset({"benchmark"}),
    ):
        self.stages = stages
        self.emit = emit
        self.devices: list[str | None] = list(devices) if devices else [None]
        self.exclusive_stages = exclusive_stages
        self._cond = threading.Condition()
        self._submit_lock = threading.Lock()
        self._tasks: list[tuple[int, Run, str]] = []  # (seq, run, stage)
        self._runs: dict[str, Run] = {}  # candidate path -> latest run (queued or running)
        self._busy: dict[str, Run] = {}  # candidate path -> run whose stage is running
        self._load: dict[str | None, int] = {d: 0 for d in self.devices}
        self._exclusive: set[str | None] = set()
        self._running = 0  # stages holding a job slot
        self._dying = 0  # cancelled stages whose processes are still being stopped
        self._released: set[int] = set()  # id() of runs whose running stage gave its slot back
        self._stopping = False
        self._workers: list[threading.Thread] = []
        self._want = 0
        self.set_jobs(jobs)

    # -- public --------------------------------------------------------------

    def set_jobs(self, jobs: int) -> None:
        """Run up to ``jobs`` stages at once from now on."""
        jobs = max(1, int(jobs))
        with self._cond:
            self._want = jobs
            self._spawn_workers_locked()
            self._cond.notify_all()

    def _spawn_workers_locked(self) -> None:
        """One worker thread per job slot, plus one per stage still dying."""
        self._workers = [w for w in self._workers if w.is_alive()]
        for i in range(len(self._workers), self._want + self._dying):
            t = threading.Thread(target=self._worker, name=f"gemswatch-job-{i}", daemon=True)
            self._workers.append(t)
            t.start()

    @property
    def jobs(self) -> int:
        return self._want

    def submit(self, run: Run) -> None:
        """Queue ``run``; an earlier run of the same file is superseded."""
        with self._submit_lock:
            finished: list[Run] = []
            with self._cond:
                if self._stopping:
                    return
                key = str(run.candidate.path)
                old = self._runs.get(key)
                if old is not None and old.state != "done":
                    finished += self._cancel_locked(old, f"superseded by a newer save ({run.sha256[:8]})")
                self._runs[key] = run
            for r in finished:
                self._finish_run(r)
            self.emit(
                "run_queued",
                **run_fields(run),
                stages=list(run.stages),
                reason=run.reason,
                run_dir=str(run.run_dir),
            )
            with self._cond:
                if run.cancel.is_set():
                    return
                self._queue_locked(run, run.stages[0])

    def cancel(self, candidate_path: str, reason: str) -> None:
        """Cancel the file's queued or running run (its file was deleted or unmapped)."""
        finished: list[Run] = []
        with self._cond:
            old = self._runs.get(candidate_path)
            if old is not None and old.state != "done":
                finished += self._cancel_locked(old, reason)
            self._cond.notify_all()
        for r in finished:
            self._finish_run(r)

    def idle(self) -> bool:
        with self._cond:
            return self._idle_locked()

    def _idle_locked(self) -> bool:
        return not self._tasks and self._running == 0 and self._dying == 0 and all(r.state == "done" for r in self._runs.values())

    def wait_idle(self, timeout: float | None = None, stop: threading.Event | None = None) -> bool:
        """Block until nothing is queued or running; False on timeout or stop."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._idle_locked():
                if stop is not None and stop.is_set():
                    return False
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(0.1 if left is None else min(left, 0.1))
        return True

    def stop(self, reason: str = "gemswatch stopped", wait: float = 30.0) -> None:
        """Cancel everything and wait for the workers to leave."""
        finished: list[Run] = []
        with self._cond:
            self._stopping = True
            for r in list(self._runs.values()):
                if r.state != "done":
                    finished += self._cancel_locked(r, reason)
            self._cond.notify_all()
        for r in finished:
            self._finish_run(r)
        deadline = time.monotonic() + wait
        for w in list(self._workers):
            w.join(max(0.0, deadline - time.monotonic()))

    # -- internals -----------------------------------------------------------

    def _cancel_locked(self, run: Run, reason: str) -> list[Run]:
        """Mark ``run`` cancelled; return it if it can be finished right away."""
        run.cancel_reason = run.cancel_reason or reason
        run.cancel.set()
        before = len(self._tasks)
        self._tasks = [t for t in self._tasks if t[1] is not run]
        if self._busy.get(str(run.candidate.path)) is run:
            if id(run) not in self._released:
                # free its job slot now; the file stays busy until the process is gone
                self._released.add(id(run))
                self._running -= 1
                self._dying += 1
                self._spawn_workers_locked()
            return []  # its worker finishes it when the process is gone
        if before != len(self._tasks) or run.state != "done":
            run.state = "done"
            return [run]
        return []

    def _pick_locked(self) -> tuple[Run, str, str | None] | None:
        reserved: set[str | None] = set()
        for i, (seq, run, stage) in enumerate(self._tasks):
            key = str(run.candidate.path)
            if key in self._busy:
                continue
            exclusive = stage in self.exclusive_stages
            free = [d for d in self.devices if d not in self._exclusive and d not in reserved]
            if exclusive:
                idle = [d for d in free if self._load[d] == 0]
                if not idle:
                    # hold the least busy device for it so it is not starved
                    if free:
                        reserved.add(min(free, key=lambda d: self._load[d]))
                    continue
                device = idle[0]
                self._exclusive.add(device)
            else:
                if not free:
                    continue
                device = min(free, key=lambda d: self._load[d])
            del self._tasks[i]
            self._load[device] += 1
            self._busy[key] = run
            self._running += 1
            run.state = "running"
            return run, stage, device
        return None

    def _worker(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                while True:
                    if self._stopping:
                        return
                    if len(self._workers) > self._want + self._dying:
                        # fewer slots now (set_jobs, or a dying stage ended): leave
                        if me in self._workers:
                            self._workers.remove(me)
                        return
                    task = self._pick_locked() if self._running < self._want else None
                    if task is not None:
                        break
                    # Every change that lets a worker go on notifies; the
                    # timeout is only a safety net, long because an idle
                    # watcher keeps one waiting worker per job.
                    self._cond.wait(_IDLE_WAIT)
            run, stage, device = task
            try:
                self._run_stage(run, stage, device)
            except Exception:  # pragma: no cover - keep the worker alive whatever happens
                run.cancel.set()
                run.state = "done"
            finally:
                with self._cond:
                    self._load[device] -= 1
                    self._exclusive.discard(device)
                    self._busy.pop(str(run.candidate.path), None)
                    if id(run) in self._released:
                        self._released.discard(id(run))
                        self._dying -= 1
                    else:
                        self._running -= 1
                    self._cond.notify_all()

    def _run_stage(self, run: Run, stage: str, device: str | None) -> None:
        if run.cancel.is_set():
            self._finish_run(run)
            return
        if run.started is None:
            run.started = time.monotonic()
        try:
            plan = self.stages.plan(run, stage, device)
        except Exception as e:  # a bug in gemswatch must not kill the worker
            plan = None
            result = StageResult(stage, CRASHED, message=f"gemswatch internal error: {type(e).__name__}: {e}")
        self.emit(
            "stage_started",
            **run_fields(run),
            stage=stage,
            device=device,
            command=list(plan.command) if plan is not None and plan.command else None,
            command_line=plan.command_line if plan is not None else "",
            warm=plan is not None and plan.warm,
        )
        if plan is not None:
            try:
                result = self.stages.execute(run, plan)
            except Exception as e:  # a bug in gemswatch must not kill the worker
                result = StageResult(stage, CRASHED, message=f"gemswatch internal error: {type(e).__name__}: {e}")
        run.results[stage] = result
        self.emit("stage_finished", **run_fields(run), **result.event_fields())
        nxt = run.stages.index(stage) + 1
        if result.status == SUPERSEDED or run.cancel.is_set():
            self._finish_run(run)
            return
        if gates(result.status):
            for later in run.stages[nxt:]:
                r = StageResult(later, NOT_RUN, message=f"{later} not run: {stage} {result.status}")
                run.results[later] = r
                self.emit("stage_finished", **run_fields(run), **r.event_fields())
            self._finish_run(run)
            return
        if nxt >= len(run.stages):
            self._finish_run(run)
            return
        with self._cond:
            if not run.cancel.is_set():
                self._queue_locked(run, run.stages[nxt])
                return
        self._finish_run(run)

    def _queue_locked(self, run: Run, stage: str) -> None:
        """Queue a stage of ``run``, keeping the queue in run order."""
        self._tasks.append((run.seq, run, stage))
        self._tasks.sort(key=lambda t: t[0])
        self._cond.notify_all()

    def _finish_run(self, run: Run) -> None:
        with self._cond:
            run.state = "done"
            self._cond.notify_all()
        stages = {s: run.results[s].status for s in run.stages if s in run.results}
        status = SUPERSEDED if run.cancel.is_set() else overall_status(list(stages.values()))
        duration = 0.0 if run.started is None else time.monotonic() - run.started
        self.emit(
            "run_finished",
            **run_fields(run),
            status=status,
            stages=stages,
            duration_s=round(duration, 3),
            message=run.cancel_reason if run.cancel.is_set() else "",
        )
