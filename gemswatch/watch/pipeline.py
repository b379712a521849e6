"""The staged pipeline of one save: command lines, one stage's execution.

Each stage is a fresh ``python -m pytest`` process in the project root with
one ``--override op:SNAPSHOT:func`` per mapped operator, where SNAPSHOT is
the copy of the candidate's bytes taken when the save was seen. Its command
line, log and report stay in the run folder. With warm start the process is
forked from the warm pool (``warmstart``) instead of started cold; the
command line, log and report are the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import Config
from .mapping import Candidate, selection_for
from .runner import run_process
from .status import NOT_RUN, Cases, Outcome, Verdict, decide

if TYPE_CHECKING:
    from .warmstart import WarmStarter

__all__ = ["Run", "StageResult", "base_env", "stage_command", "stage_env", "execute_stage", "LOG_TAIL_BYTES"]

LOG_TAIL_BYTES = 64 * 1024


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
    results: dict[str, "StageResult"] = field(default_factory=dict)
    state: str = "queued"  # queued | running | done
    started: float | None = None
    snapshot_bytes: bytes | None = field(default=None, repr=False)  # kept by the first stage


@dataclass
class StageResult:
    """A finished stage: the verdict plus where to look."""

    stage: str
    status: str
    exit_code: int | None = None
    duration_s: float = 0.0
    cases: Cases = field(default_factory=Cases)
    candidate_calls: dict[str, int] = field(default_factory=dict)
    speedup: float | None = None
    speedups: dict[str, float] = field(default_factory=dict)
    report: str | None = None
    log: str | None = None
    message: str = ""
    detail: str = ""
    first_failure: str | None = None
    command: list[str] = field(default_factory=list)
    device: str | None = None
    warm: bool = False  # forked from the warm pool
    extra: dict[str, Any] = field(default_factory=dict)  # more event fields (speedups, first_failure, ...)

    def event_fields(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "status": self.status,
            "exit_code": self.exit_code,
            "duration_s": round(self.duration_s, 3),
            "cases": self.cases.to_dict(),
            "candidate_calls": self.candidate_calls,
            "speedup": None if self.speedup is None else round(self.speedup, 4),
            "report": self.report,
            "log": self.log,
            "message": self.message,
            "warm": self.warm,
        }


def _selection_kind(stage: str) -> str:
    """The config selection a stage runs: ``tests`` or ``benchmark``."""
    return "tests" if stage == "correctness" else "benchmark"


def stage_command(config: Config, candidate: Candidate, stage: str, snapshot: Path, output: Path) -> list[str] | None:
    """The exact argv of ``stage`` for ``candidate``, or None when the
    operators have no selection for it (a stage with nothing to run)."""
    sel = selection_for(config, candidate.ops, _selection_kind(stage))
    if not sel:
        return None
    cmd = [config.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *sel.args]
    if stage in ("preflight", "benchmark"):
        cmd += ["--level", config.level]
    if stage == "preflight":
        cmd += ["--preflight-only"]
    for op, func in candidate.operators:
        cmd += ["--override", f"{op}:{snapshot}:{func}"]
    cmd += ["--record", "json", "--output", str(output)]
    return cmd


def base_env(config: Config) -> dict[str, str]:
    """The environment every stage of ``config`` shares: ours and the config's ``env``."""
    env = dict(os.environ)
    env.update(config.env)
    env["PYTHONUNBUFFERED"] = "1"
    # No colour codes in the log files.
    env["PY_COLORS"] = "0"
    # Stages run side by side, about one per core. Each stage's torch would
    # otherwise start a thread per core for any op over 32768 elements, and
    # parallel stages would fight for the cores. A user's setting wins.
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def stage_env(config: Config, candidate: Candidate, run_id: str, stage: str, device: str | None) -> dict[str, str]:
    """The environment of a stage: :func:`base_env` plus the candidate's
    folder on PYTHONPATH, the run and stage, and the device."""
    env = base_env(config)
    # The snapshot lives in the run folder; sibling helpers stay importable.
    extra = str(candidate.path.parent)
    env["PYTHONPATH"] = extra + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["GEMSWATCH_RUN_ID"] = run_id
    env["GEMSWATCH_STAGE"] = stage
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    return env


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


def execute_stage(run: Run, stage: str, device: str | None, on_start=None, warm: "WarmStarter | None" = None) -> StageResult:
    """Run one stage of ``run`` and classify it. Never raises for a bad candidate.

    With ``warm`` the stage process is forked from the warm pool when it can be.
    """
    config = run.config
    report = run.run_dir / f"{stage}.json"
    log = run.run_dir / f"{stage}.log"
    cmd = stage_command(config, run.candidate, stage, run.snapshot, report)
    if cmd is None:
        return StageResult(stage, NOT_RUN, message=f"no {_selection_kind(stage)} selection for {', '.join(run.candidate.ops)} in config.yaml")
    _keep_snapshot(run)
    (run.run_dir / f"{stage}.cmd").write_text(shlex.join(cmd) + "\n", encoding="utf-8")
    try:
        report.unlink()
    except FileNotFoundError:
        pass
    env = stage_env(config, run.candidate, run.run_id, stage, device)
    outcome: Outcome = run_process(
        cmd,
        cwd=config.project,
        env=env,
        log_path=log,
        timeout=config.timeouts.get(stage),
        cancel=run.cancel,
        grace=config.grace,
        cancel_reason=lambda: run.cancel_reason,
        on_start=on_start,
        warm=warm,
    )
    tail = _read_tail(log)
    data, report_error = (None, None) if outcome.cancelled or outcome.timed_out else _read_report(report)
    verdict: Verdict = decide(stage, outcome, data, run.candidate.ops, tail, report_error)
    return StageResult(
        stage=stage,
        status=verdict.status,
        exit_code=outcome.returncode,
        duration_s=outcome.duration_s,
        cases=verdict.cases,
        candidate_calls=verdict.candidate_calls,
        speedup=verdict.speedup,
        speedups=verdict.speedups,
        report=str(report) if report.exists() else None,
        log=str(log),
        message=_unsnapshot(verdict.message, run),
        detail=_unsnapshot(verdict.detail, run),
        first_failure=verdict.first_failure,
        command=cmd,
        device=device,
        warm=outcome.warm,
    )
