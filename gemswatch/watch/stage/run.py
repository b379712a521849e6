"""One save's run and the one way through a stage of it.

A :class:`Run` is one pipeline execution for one file's exact bytes. The
scheduler drives its stages through a :class:`StageRunner`: ``plan`` builds
the stage's command once (the ``stage_started`` event shows it), ``execute``
runs that plan on an executor and turns its end, log and report into one
typed :class:`~.result.StageResult`. :class:`Stages` is the real runner.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ..config import Config
from ..mapping import Candidate
from ..status import ERROR, FAILURES, NOT_RUN
from .executor import ProcessExecutor, StageExecutor, WarmForkExecutor
from .plan import StagePlan, plan_stage
from .result import LOG_TAIL_CHARS, StageResult
from .starter import StageStarter
from .tamper import ProjectGuard
from .verdict import Verdict, decide

__all__ = ["Run", "StageRunner", "Stages", "execute_stage", "start_run", "LOG_TAIL_BYTES"]

# How much of a stage's log the verdict reads (usage errors are printed
# first, so the head of a longer log is kept too).
LOG_TAIL_BYTES = 64 * 1024
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class Run:
    """One pipeline execution for one file's exact bytes."""

    run_id: str
    candidate: Candidate
    sha256: str
    stages: list[str]
    run_dir: Path
    snapshot: Path
    config: Config
    reason: str = "save"
    fingerprint: str = ""
    seq: int = 0
    cancel: threading.Event = field(default_factory=threading.Event)
    cancel_reason: str = ""
    results: dict[str, StageResult] = field(default_factory=dict)
    state: str = "queued"  # queued | running | done
    started: float | None = None
    snapshot_bytes: bytes | None = field(default=None, repr=False)  # kept by the first stage
    failed_first: Path | None = None  # node ids the correctness stage runs first (one a line), for `f`


def start_run(
    run_dir: Path,
    *,
    run_id: str,
    candidate: Candidate,
    source: bytes,
    sha256: str,
    stages: list[str],
    config: Config,
    reason: str,
    fingerprint: str,
    seq: int,
    failed_first: tuple[str, ...] = (),
) -> Run:
    """A new run of ``candidate``'s bytes ``source``: the bytes are copied to
    ``run_dir/snapshot/`` (every stage tests that copy) and the run is
    described in ``run_dir/run.json``. ``failed_first``: test node ids the
    correctness stage runs before the rest of its selection (``f``), kept
    in ``run_dir/failed_first.txt``."""
    snapshot = run_dir / "snapshot" / _SAFE_NAME.sub("_", candidate.path.name)
    snapshot.parent.mkdir()
    snapshot.write_bytes(source)
    _keep_mode(candidate.path, snapshot, run_dir)
    described = {
        "run_id": run_id,
        "candidate": candidate.rel,
        "path": str(candidate.path),
        "content_sha256": sha256,
        "operators": dict(candidate.operators),
        "stages": stages,
        "reason": reason,
        "config": str(config.path),
    }
    first_file = None
    if failed_first:
        first_file = run_dir / "failed_first.txt"
        first_file.write_text("".join(f"{nodeid}\n" for nodeid in failed_first), encoding="utf-8")
        described["failed_first"] = len(failed_first)
    (run_dir / "run.json").write_text(json.dumps(described, indent=2) + "\n", encoding="utf-8")
    return Run(
        run_id=run_id,
        candidate=candidate,
        sha256=sha256,
        stages=list(stages),
        run_dir=run_dir,
        snapshot=snapshot,
        config=config,
        reason=reason,
        fingerprint=fingerprint,
        seq=seq,
        failed_first=first_file,
    )


class StageRunner(Protocol):
    """What the scheduler needs to run a stage: a plan, then its result."""

    def plan(self, run: Run, stage: str, device: str | None) -> StagePlan:
        ...

    def execute(self, run: Run, plan: StagePlan) -> StageResult:
        """Run ``plan`` to its verdict; never raises for a bad candidate."""
        ...


class Stages:
    """The real :class:`StageRunner`: plans from the run's config, executes
    on ``executor``, and puts back (and fails the stage for) any file it is
    judged by that changed while it ran (``guard``)."""

    def __init__(self, executor: StageExecutor, guard: ProjectGuard | None = None):
        self.executor = executor
        self.guard = guard or ProjectGuard()

    def plan(self, run: Run, stage: str, device: str | None) -> StagePlan:
        return plan_stage(run, stage, device, warm=self.executor.warm)

    def execute(self, run: Run, plan: StagePlan) -> StageResult:
        if plan.command is None:
            return StageResult(plan.stage, NOT_RUN, message=plan.why_not, device=plan.device)
        _keep_snapshot(run)
        (run.run_dir / f"{plan.stage}.cmd").write_text(plan.command_line + "\n", encoding="utf-8")
        try:
            plan.report.unlink()
        except FileNotFoundError:
            pass
        kept = self.guard.keep(plan.guarded)
        try:
            outcome = self.executor.execute(plan, run.cancel)
            tampered = list(outcome.tampered) + self.guard.check(kept, run.run_dir / "tampered", run.config.project)
        finally:
            self.guard.release(kept)
        if outcome.cancelled and not outcome.cancel_reason:
            outcome = replace(outcome, cancel_reason=run.cancel_reason)
        tail = _read_tail(plan.log)
        data, report_error = (None, None) if outcome.cancelled or outcome.timed_out else _read_report(plan.report)
        verdict: Verdict = decide(plan.stage, outcome, data, run.candidate.ops, tail, report_error)
        if tampered:
            first = tampered[0]
            more = f" (and {len(tampered) - 1} more file(s))" if len(tampered) > 1 else ""
            verdict = Verdict(ERROR, first.describe(run.config.rel, plan.stage) + more, cases=verdict.cases)
        return StageResult(
            stage=plan.stage,
            status=verdict.status,
            exit_code=outcome.returncode,
            duration_s=outcome.duration_s,
            cases=verdict.cases,
            candidate_calls=verdict.candidate_calls,
            speedup=verdict.speedup,
            speedups=verdict.speedups,
            headline_speedup=verdict.headline_speedup,
            headline_vs=verdict.headline_vs,
            headline_speedups=verdict.headline_speedups,
            report=str(plan.report) if plan.report.exists() else None,
            log=str(plan.log),
            message=_unsnapshot(verdict.message, run),
            detail=_unsnapshot(verdict.detail, run),
            first_failure=verdict.first_failure,
            seed=verdict.seed,
            skips=verdict.skips,
            per_case=tuple(verdict.per_case),
            failure_groups=tuple({**g.to_dict(), "error": _unsnapshot(g.error, run)} for g in verdict.failure_groups),
            coverage=verdict.coverage,
            command=plan.command,
            device=outcome.device or plan.device,
            warm=outcome.warm,
            log_tail=_unsnapshot(tail[-LOG_TAIL_CHARS:], run) if verdict.status in FAILURES else "",
        )


def execute_stage(run: Run, stage: str, device: str | None, warm: StageStarter | None = None) -> StageResult:
    """Plan and run one stage of ``run`` (forked from ``warm`` when it can be)."""
    stages = Stages(WarmForkExecutor(warm) if warm is not None else ProcessExecutor())
    return stages.execute(run, stages.plan(run, stage, device))


def _read_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            head = b""
            if size > limit:
                # keep the start too: usage errors are printed first
                f.seek(0)
                head = f.read(4096) + b"\n...\n"
            f.seek(max(0, size - limit))
            return (head + f.read()).decode("utf-8", "replace")
    except OSError:
        return ""


def _read_report(path: Path) -> tuple[Any, str | None]:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f), None
    except FileNotFoundError:
        return None, "no report file"
    except (OSError, ValueError) as e:
        return None, f"unreadable report: {e}"


def _keep_mode(source: Path, snapshot: Path, run_dir: Path) -> None:
    """The snapshot keeps the candidate's mode; the run folder of a file
    only its owner may read is its owner's alone (its logs and reports
    show the candidate's output)."""
    try:
        mode = source.stat().st_mode & 0o777
        os.chmod(snapshot, mode)
        if not mode & 0o077:
            os.chmod(run_dir, 0o700)
    except OSError:
        pass  # the file went away: the snapshot is what it was


def _unsnapshot(text: str, run: Run) -> str:
    """Show the user's file, not the snapshot copy, in messages."""
    if not text:
        return text
    return text.replace(str(run.snapshot), run.candidate.rel).replace(str(run.snapshot.parent) + os.sep, "")


def _keep_snapshot(run: Run) -> None:
    """Make sure this stage tests the saved bytes: a candidate may delete or
    rewrite its own file (the snapshot) while an earlier stage runs it."""
    try:
        data = run.snapshot.read_bytes()
    except OSError:
        data = None
    if data is not None and hashlib.sha256(data).hexdigest() == run.sha256:
        if run.snapshot_bytes is None:
            run.snapshot_bytes = data
        return
    if run.snapshot_bytes is not None:
        run.snapshot.parent.mkdir(parents=True, exist_ok=True)
        run.snapshot.write_bytes(run.snapshot_bytes)
