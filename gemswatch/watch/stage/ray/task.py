"""What runs on a cluster node: one stage, exactly as it runs locally.

The task is a Ray worker process of its own (never reused). It reports where
it landed (:class:`Started`: the node and the GPU Ray gave it), then runs
the stage's plan with :func:`~..supervise.run_process`: the same child
process in its own process group, the same timeout, grace, reaping and log
cap as a local stage. A Ray cancel (a newer save) reaches the task as
KeyboardInterrupt and stops the stage as a local cancel does.

On the driver's own node the task runs the plan in place: same files, same
paths. Elsewhere (``shipped``) it runs in a private copy of the project Ray
unpacked for it, with the run folder in a scratch folder: every path of the
plan is moved there, the candidate's bytes are written from the task, the
files the stage is judged by are kept and checked as locally, and the log,
the report (with the driver's paths again) and any changed judged-by file
go back in :class:`Finished`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Mapping

from .. import reaper as care
from ..plan import StagePlan
from ..result import Outcome
from ..supervise import run_process
from ..tamper import ProjectGuard

__all__ = ["Finished", "Started", "StageTask", "run_task"]


@dataclass(frozen=True)
class StageTask:
    """Everything a node needs to run one stage.

    ``source``: the candidate's saved bytes (their hash is ``plan.sha256``);
    ``overlay``: what gemswatch adds to the driver's environment (a shipped
    stage gets it over its node's own); ``gpu``: the stage holds a GPU.
    """

    plan: StagePlan
    source: bytes
    shipped: bool
    overlay: Mapping[str, str]
    gpu: bool


@dataclass(frozen=True)
class Started:
    """The task began on ``node`` (``ip``) holding ``gpus``."""

    node: str
    ip: str
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class Finished:
    """How the stage ended; a shipped stage's files come along (else None).

    ``tampered``: (path relative to the project, the changed bytes or None
    when the file was deleted) of each judged-by file the stage changed.
    """

    outcome: Outcome
    log: bytes | None = None
    report: bytes | None = None
    tampered: tuple[tuple[str, bytes | None], ...] = ()


def run_task(task: StageTask) -> Iterator[Started | Finished]:
    """The body of the Ray task (a streaming generator: Started, then Finished)."""
    import ray

    ctx = ray.get_runtime_context()
    gpus = tuple(str(g) for g in ctx.get_accelerator_ids().get("GPU", []))
    yield Started(ctx.get_node_id(), ray.util.get_node_ip_address(), gpus)
    # As gemswatch's command line does: what a stage abandons comes back here to be killed.
    care.adopt_orphans()
    if task.shipped:
        yield _run_shipped(task, gpus)
    else:
        plan = task.plan
        _write_snapshot(plan, task.source)
        yield Finished(_supervised(plan, _gpu_env(dict(plan.env), task.gpu, gpus)))


def _gpu_env(env: dict[str, str], gpu: bool, gpus: tuple[str, ...]) -> dict[str, str]:
    """The plan's environment with the GPU Ray assigned (the plan's device is only a slot)."""
    if gpu:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    return env


def _write_snapshot(plan: StagePlan, source: bytes) -> None:
    """The stage tests exactly the saved bytes: the snapshot is (re)written
    from the task unless it already holds them."""
    if plan.snapshot is None:
        return
    try:
        if hashlib.sha256(plan.snapshot.read_bytes()).hexdigest() == plan.sha256:
            return
    except OSError:
        pass
    plan.snapshot.parent.mkdir(parents=True, exist_ok=True)
    plan.snapshot.write_bytes(source)


def _supervised(plan: StagePlan, env: dict[str, str]) -> Outcome:
    """run_process in a thread; the task's own thread turns Ray's cancel
    (KeyboardInterrupt) into the stage's cancel event."""
    assert plan.command is not None, "a plan without a command has nothing to execute"
    cancel, done = threading.Event(), threading.Event()
    box: list[Outcome | BaseException] = []

    def body() -> None:
        try:
            box.append(run_process(
                list(plan.command), cwd=plan.cwd, env=env, log_path=plan.log, timeout=plan.timeout,
                cancel=cancel, grace=plan.grace,
            ))
        except BaseException as e:  # handed to the task's thread, which raises it
            box.append(e)
        finally:
            done.set()

    threading.Thread(target=body, name="gemswatch-stage", daemon=True).start()
    # Plain sleeps: an interrupted Thread.join can take a live thread for ended.
    while not done.is_set():
        try:
            time.sleep(0.05)
        except KeyboardInterrupt:
            cancel.set()
    result = box[0]
    if isinstance(result, BaseException):
        raise result
    return result


class _Moved:
    """The plan's paths moved from the driver's project and run folder to a
    private copy of the project and a scratch run folder on this node."""

    def __init__(self, plan: StagePlan, project: Path, run_dir: Path):
        self.pairs = [(str(plan.log.parent), str(run_dir)), (str(plan.cwd), str(project))]

    def text(self, value: str) -> str:
        for old, new in self.pairs:  # the run folder first: it lies inside the project
            value = value.replace(old, new)
        return value

    def path(self, value: Path) -> Path:
        return Path(self.text(str(value)))

    def back(self, data: bytes | None) -> bytes | None:
        """A log or report with the driver's paths again (messages name the user's files)."""
        if data is None:
            return None
        for old, new in self.pairs:
            data = data.replace(new.encode(), old.encode())
        return data

    def plan(self, plan: StagePlan, overlay: Mapping[str, str]) -> StagePlan:
        command = [self.text(a) for a in plan.command or ()]
        if command and os.sep in command[0] and not os.path.exists(command[0]):
            command[0] = sys.executable  # the driver's interpreter path is not on this node: the worker's is
        env = dict(os.environ)
        env.update({k: self.text(v) for k, v in overlay.items()})
        return replace(
            plan,
            command=tuple(command),
            cwd=self.path(plan.cwd),
            env=env,
            log=self.path(plan.log),
            report=self.path(plan.report),
            guarded=tuple(self.path(p) for p in plan.guarded),
            snapshot=None if plan.snapshot is None else self.path(plan.snapshot),
        )


def _run_shipped(task: StageTask, gpus: tuple[str, ...]) -> Finished:
    scratch = Path(tempfile.mkdtemp(prefix="gemswatch-stage-"))
    try:
        project = scratch / "project"
        # A private copy: a candidate that edits the files judging it reaches
        # no other stage on this node (Ray shares its unpacked package).
        shutil.copytree(Path.cwd(), project, symlinks=True)
        run_dir = scratch / "run"
        run_dir.mkdir()
        moved = _Moved(task.plan, project, run_dir)
        plan = moved.plan(task.plan, task.overlay)
        _write_snapshot(plan, task.source)
        guard = ProjectGuard()
        kept = guard.keep(plan.guarded)
        outcome = _supervised(plan, _gpu_env(dict(plan.env), task.gpu, gpus))
        tampered = guard.check(kept, run_dir / "tampered", project)
        changed = []
        for t in tampered:
            rel = t.path.relative_to(project.resolve()).as_posix() if t.path.is_relative_to(project.resolve()) else str(t.path)
            changed.append((rel, t.kept_at.read_bytes() if t.kept_at else None))
        return Finished(outcome, moved.back(_read(plan.log)), moved.back(_read(plan.report)), tuple(changed))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None
